"""One process per pytest process that imports torch once and forks every rank process from itself.

A fork costs tens of milliseconds where ``import torch`` costs 1-2 s, so start-up pays one import whatever the
world size. The zygote never runs test code. Control connection: pytest sends ``("fork", args)`` and the rank's
pipe end (``SCM_RIGHTS``); the zygote answers ``("forked", rank, pid)`` and later ``("exit", pid, returncode)``
(negative: killed by that signal). Design record (process tree, life cycle): docs/design/ranks.md.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _

_PR_SET_PDEATHSIG = 1
# ZygoteError's texts: ZYGOTE_FAILED's {why} is SENT_NO or EXITED_BEFORE.
ZYGOTE_FAILED = N_("the rank zygote {why}; its log:\n{log}")
SENT_NO = N_("sent no {kind!r} within {timeout:g} s")
EXITED_BEFORE = N_("exited before sending {kind!r}")
ZYGOTE_GONE = N_("the rank zygote is gone ({error}); its log:\n{log}")


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux ``prctl``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def any_exited(pidfds: Iterable[int], timeout: float = 0.0) -> bool:
    """Whether any process behind ``pidfds`` has ended, waiting up to ``timeout`` seconds (a pidfd turns
    readable when its process ends; one system call for all of them)."""
    poller = select.poll()  # not select(): fd numbers may pass FD_SETSIZE in a busy pytest process
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


class ZygoteError(RuntimeError):
    """The zygote could not be started or stopped answering; the text ends with its log."""


class Zygote:
    """The pytest side of the zygote: start it, fork ranks from it, learn how they ended.

    The process starts at once; its torch import runs while the caller goes on (pytest collecting, say),
    and the first :meth:`fork_rank` (or :meth:`wait_ready`) waits for it.

    Args:
        log_path: file the zygote's own output goes to (shown if it fails to start).
        start_timeout: seconds to wait for the zygote to import torch, from its start.
        env: its environment (default: this process's); the ranks inherit it, plus
            ``OMP_NUM_THREADS=1``, ``PYTHONUNBUFFERED=1`` and ``GLOO_SOCKET_IFNAME=lo`` unless set.
        watch_pid: a process whose end also ends the zygote and its ranks (the xdist controller).

    Raises:
        ZygoteError: (from :meth:`wait_ready`) the zygote did not report ready in time, with its log.
    """

    def __init__(self, log_path: str, start_timeout: float = 120.0, env: dict[str, str] | None = None,
                 watch_pid: int | None = None) -> None:
        self.log_path = log_path
        self.start_timeout = start_timeout
        self._exits: dict[int, int] = {}
        self._ready = False
        self._started = time.monotonic()
        parent, child = Pipe(duplex=True)
        env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        # Gloo on loopback: otherwise it resolves the host name, which may ask a DNS server.
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        self.env = env
        fds = [child.fileno()]
        if watch_pid is not None:
            try:
                fds.append(os.pidfd_open(watch_pid))
            except ProcessLookupError:  # already gone: nothing to watch, the caller goes soon too
                pass
        try:
            with open(log_path, "wb") as log:
                # No -X pycache_prefix here, unlike the gate's sub-session: the ranks forked from the zygote
                # run the learner's lab, which can change anything in them anyway (their replies are judged
                # as untrusted data), and a fresh prefix would compile torch from source each time (+3 s CPU).
                # -P: -m would put the current folder first on sys.path, and a workspace that is a clone of the
                # kit (the gate's copy of a commit, say) would give the ranks its pytest_distcheck instead of the
                # one running here.
                self._proc = subprocess.Popen(
                    [sys.executable, "-P", "-m", "pytest_distcheck.ranks.zygote", *map(str, fds)],
                    pass_fds=fds, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True, preexec_fn=die_with_parent,
                )
        finally:
            child.close()
            for fd in fds[1:]:
                os.close(fd)
        self._conn = parent

    def wait_ready(self) -> None:
        """Wait until the zygote has imported torch (no-op after the first time).

        Raises:
            ZygoteError: it did not report ready within ``start_timeout`` of its start, or exited.
        """
        if self._ready:
            return
        try:
            self._expect("ready", self.start_timeout - (time.monotonic() - self._started))
        except BaseException:
            self.kill()
            raise
        self._ready = True

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _expect(self, kind: str, timeout: float) -> tuple:
        """Read messages until one of ``kind`` arrives, recording exit reports on the way."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline - time.monotonic())
            if msg is None:
                why = (_(SENT_NO).format(kind=kind, timeout=timeout) if self.alive
                       else _(EXITED_BEFORE).format(kind=kind))
                raise ZygoteError(_(ZYGOTE_FAILED).format(why=why, log=self._log()))
            if msg[0] == kind:
                return msg

    def _read(self, timeout: float) -> tuple | None:
        try:
            if not self._conn.poll(max(timeout, 0.0)):
                return None
            msg = self._conn.recv()
        except (EOFError, OSError):
            return None
        if msg[0] == "exit":
            self._exits[msg[1]] = msg[2]
        return msg

    def _log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")[-4000:]

    def fork_rank(self, args: dict[str, Any], timeout: float = 30.0) -> tuple[int, Connection]:
        """Fork one rank process; return its pid and the pytest end of its connection.

        ``args`` are the keyword arguments of :func:`pytest_distcheck.ranks.worker.serve`
        (less ``conn``) plus ``out`` and ``err``: existing files the rank's stdout and stderr are
        appended to, as written (the pool reads them for every outcome, a hang or a death included).
        """
        self.wait_ready()
        parent, child = Pipe(duplex=True)
        try:
            self._conn.send(("fork", args))
            send_handle(self._conn, child.fileno(), self._proc.pid)
        except OSError as exc:
            raise ZygoteError(_(ZYGOTE_GONE).format(error=exc, log=self._log())) from exc
        finally:
            child.close()
        _kind, pid = self._expect("forked", timeout)
        return pid, parent

    def exit_code(self, pid: int, timeout: float) -> int | None:
        """How rank ``pid`` ended (``subprocess`` convention), or None if not known within ``timeout``."""
        deadline = time.monotonic() + timeout
        while pid not in self._exits:
            if self._read(deadline - time.monotonic()) is None:
                break
        return self._exits.get(pid)

    def close(self) -> None:
        """Stop the zygote (it kills any rank still running); make sure it is gone.

        One that never reported ready has forked no rank and reads no message until torch is imported
        (a second or more): it is killed at once (``-k``/``--dod`` deselected every dist_world test).
        """
        if self._ready:
            try:
                self._conn.send(("stop",))
                self._proc.wait(5.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._proc.wait()
        self._conn.close()


# -- the zygote process ---------------------------------------------------------------------------
def _start_rank(conn_fd: int, args: dict[str, Any], close_fds: list[int]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    zygote_pid = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        die_with_parent()
        if os.getppid() != zygote_pid:  # the zygote died before prctl took effect
            os._exit(1)
        for fd in close_fds:
            os.close(fd)
        for fd, path in ((1, args.pop("out")), (2, args.pop("err"))):
            stream = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.dup2(stream, fd)
            os.close(stream)
        from pytest_distcheck.ranks import worker

        worker.serve(Connection(conn_fd), **args)
        code = 0
    except BaseException:  # noqa: BLE001 - the rank's own errors go to its log, never back to the zygote
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(fd: int, watch: list[int]) -> None:
    # Everything a rank needs, imported once here so that each fork starts with it; pytest because the
    # test modules a rank imports by name import it (about 0.15 s a fresh rank would pay each time).
    import cloudpickle  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    import pytest_distcheck.ranks.worker  # noqa: F401

    conn = Connection(fd)
    conn.send(("ready", os.getpid()))
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for ready in wait([conn, *watch, *children]):
            if ready is conn:
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = ("stop",)
            elif ready in watch:  # the xdist controller is gone, so is this session
                msg = ("stop",)
            else:
                pid = children.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.send(("exit", pid, os.waitstatus_to_exitcode(status)))
                except OSError:
                    os._exit(0)
                continue
            if msg[0] == "stop":
                for pid in children.values():
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                for pid in children.values():  # reaped here: else they would outlive the zygote as zombies
                    os.waitpid(pid, 0)
                os._exit(0)
            _, args = msg
            conn_fd = recv_handle(conn)
            pid = _start_rank(conn_fd, args, [fd, *watch, *children])
            os.close(conn_fd)
            children[os.pidfd_open(pid)] = pid
            conn.send(("forked", pid))


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(a) for a in sys.argv[2:]])
