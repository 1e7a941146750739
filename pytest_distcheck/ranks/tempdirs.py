"""Temporary folders of a session (zygote logs, rank output, stores): locked while used, swept when dead.

A session's folder holds a ``.lock`` file with an exclusive ``flock`` held by the pytest process (or the
script owning a pool) for as long as it lives; the kernel drops the lock when the process dies, however
it dies. A folder is made and locked under a working name (``NEW_PREFIX``) and only then renamed to its
session name, so every folder with a session name is locked from its first moment: the next session to
make a folder removes this user's unlocked ones at once, and a SIGKILLed or SIGTERMed pytest leaves
nothing behind past the next start (tests/test_rank_report.py). A folder left under its working name
(its owner died within the few microseconds before the rename) is removed once it is a minute old.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

SESSION_PREFIX = "distcheck-session-"
NEW_PREFIX = "distcheck-new-"  # a session folder being made, not locked yet
# A folder under its working name younger than this is never swept: its owner may not hold its lock yet.
SWEEP_MIN_AGE_S = 60.0


class SessionFolder:
    """A new, locked session folder (dead sessions' folders are swept first).

    Attributes:
        path: the folder. :meth:`remove` deletes it and releases the lock.
    """

    def __init__(self) -> None:
        sweep_dead_sessions()
        while True:
            new = tempfile.mkdtemp(prefix=NEW_PREFIX)
            self._lock: int | None = os.open(os.path.join(new, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_EX)
            self.path = os.path.join(os.path.dirname(new), SESSION_PREFIX + os.path.basename(new)[len(NEW_PREFIX):])
            if not os.path.exists(self.path):  # (mkdtemp's names are unique per prefix, not across both)
                try:
                    os.rename(new, self.path)
                    break
                except OSError:
                    pass
            os.close(self._lock)
            shutil.rmtree(new, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def sweep_dead_sessions(root: str | None = None, min_age_s: float = SWEEP_MIN_AGE_S) -> list[str]:
    """Remove session folders of this user whose owner is gone (their lock is free); return their paths.

    A folder is left alone while its lock is held (its session runs), when it is not this user's, or,
    under its working name (``NEW_PREFIX``), when it is younger than ``min_age_s`` seconds (its owner may
    be about to lock it).
    """
    removed = []
    base = Path(root or tempfile.gettempdir())
    for path in [*base.glob(SESSION_PREFIX + "*"), *base.glob(NEW_PREFIX + "*")]:
        try:
            st = path.stat()
            young = path.name.startswith(NEW_PREFIX) and time.time() - st.st_mtime < min_age_s
            if st.st_uid != os.getuid() or young:
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
