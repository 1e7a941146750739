"""Temporary folders of a session (zygote logs, rank output, stores): locked while used, swept when dead.

A session's folder holds a ``.lock`` file with an exclusive ``flock`` held by the pytest process (or the
script owning a pool) for as long as it lives; the kernel drops the lock when the process dies, however
it dies. The next session to make a folder removes this user's unlocked folders older than a minute, so
a SIGKILLed or SIGTERMed pytest leaves nothing behind for long (tests/test_rank_report.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

SESSION_PREFIX = "distcheck-session-"
# A folder younger than this is never swept: its owner may not hold its lock yet.
SWEEP_MIN_AGE_S = 60.0


class SessionFolder:
    """A new, locked session folder (dead sessions' folders are swept first).

    Attributes:
        path: the folder. :meth:`remove` deletes it and releases the lock.
    """

    def __init__(self) -> None:
        sweep_dead_sessions()
        self.path = tempfile.mkdtemp(prefix=SESSION_PREFIX)
        self._lock: int | None = os.open(os.path.join(self.path, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def sweep_dead_sessions(root: str | None = None, min_age_s: float = SWEEP_MIN_AGE_S) -> list[str]:
    """Remove session folders of this user whose owner is gone (their lock is free); return their paths.

    A folder is left alone while its lock is held (its session runs), when it is younger than
    ``min_age_s`` seconds (its owner may be about to lock it), or when it is not this user's.
    """
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(SESSION_PREFIX + "*"):
        try:
            st = path.stat()
            if st.st_uid != os.getuid() or time.time() - st.st_mtime < min_age_s:
                continue
            fd = os.open(path / ".lock", os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: a live session
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed
