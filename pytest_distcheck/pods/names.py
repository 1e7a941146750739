"""Pod names and session liveness: how a sweep tells the kit's orphans from pods still in use.

A pod is named ``distcheck-<run id>-<deadline>``: the run id is the budget reservation's
(``<session id>-<hex>``, :meth:`pytest_distcheck.budget.guard.BudgetGuard.reserve`) and the deadline
is the Unix time (seconds) its reservation runs out. Every process of a session holds a shared
``flock`` on ``~/.cache/distcheck/sessions/<session id>.lock`` while it may own pods; the kernel drops
it when the process dies, however it dies, so a lock nobody holds means the session is over.
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.i18n import N_, _

PREFIX = "distcheck-"
NOT_A_RUN_ID = N_("run id {run!r} is not '<8 hex digits>-<hex digits>'")
_NAME = re.compile(r"^distcheck-(?P<session>[0-9a-f]{8})-(?P<run>[0-9a-f]+)-(?P<deadline>\d{9,11})$")


@dataclass(frozen=True)
class PodName:
    """A parsed pod name: ``session`` (8 hex), ``run_id`` (``<session>-<hex>``), ``deadline`` (Unix s)."""

    session: str
    run_id: str
    deadline: int


def pod_name(run_id: str, deadline_epoch: float) -> str:
    """The name for a pod of reservation ``run_id`` whose reserved time ends at ``deadline_epoch``.

    Raises:
        ValueError: ``run_id`` is not ``<8 hex>-<hex>`` (the budget guard's format).
    """
    name = f"{PREFIX}{run_id}-{int(deadline_epoch)}"
    if parse(name) is None:
        raise ValueError(_(NOT_A_RUN_ID).format(run=run_id))
    return name


def parse(name: str) -> PodName | None:
    """The parts of a kit pod's name, or None for any other name."""
    m = _NAME.match(name or "")
    if m is None:
        return None
    return PodName(m["session"], f"{m['session']}-{m['run']}", int(m["deadline"]))


def sessions_dir() -> Path:
    """Where session locks live: ``~/.cache/distcheck/sessions`` (``$XDG_CACHE_HOME`` if set)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "distcheck" / "sessions"


class SessionLock:
    """This process's shared hold on its session's lock file (released by ``release`` or by dying)."""

    def __init__(self, session: str, folder: Path | None = None) -> None:
        self.path = (folder or sessions_dir()) / f"{session}.lock"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def session_state(session: str, folder: Path | None = None) -> str:
    """``"alive"`` (some process holds its lock), ``"ended"`` (the lock file exists, nobody holds it)
    or ``"unknown"`` (no lock file here: the session ran on another machine, or never had pods)."""
    path = (folder or sessions_dir()) / f"{session}.lock"
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return "alive"
    finally:
        os.close(fd)  # also drops the exclusive lock if we got it
    return "ended"
