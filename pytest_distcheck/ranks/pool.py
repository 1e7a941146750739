"""Rank processes kept alive across tests, and how a call is dispatched to them and collected.

Design (each behaviour is tested in tests/test_rank_group.py, test_rank_recovery.py, test_rank_processes.py):
- one process per rank, forked from the zygote (:mod:`pytest_distcheck.ranks.zygote`), which imported
  torch once: starting or replacing the ranks costs a fork, not an import. Each rank has its own session
  (a kill reaches grandchildren) and SIGKILL as its parent-death signal (SIGINT does not stop a rank
  blocked in gloo);
- rendezvous on a ``FileStore`` in the pool's private temporary folder, a new file for every start of
  the ranks: nothing to collide under xdist, no stale keys, and no DNS (a ``TCPStore`` reverse-resolves
  its peers, which stalls 5 s whenever the resolver drops a query);
- the process group is kept while every rank ends a call in step (same sequence number of the default
  group, no subgroups, no error); a call that created subgroups or destroyed the group gets a fresh
  group under a new ``PrefixStore`` prefix for the next call;
- on any doubt the ranks are replaced by fresh forks before the next call: a rank raised (it exits
  right after reporting, which also unblocks peers waiting on it), died, or outlived the timeout
  (stack-dumped with faulthandler on SIGUSR1, then killed), or the ranks ended out of step (a
  :class:`~pytest_distcheck.ranks.errors.RanksOutOfStepWarning` names the counts);
- warnings raised in the ranks are re-issued in the test process under the test's filters
  (:mod:`pytest_distcheck.ranks.rank_warnings`).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable

from pytest_distcheck.ranks.errors import (
    PicklingError,
    RankError,
    RankOutcome,
    RanksOutOfStepWarning,
    RankTimeout,
)
from pytest_distcheck.ranks.payload import dump_call, origin_file
from pytest_distcheck.ranks.rank_warnings import reissue
from pytest_distcheck.ranks.zygote import Zygote, ZygoteError, pidfd_exited

# After the first rank fails, how long its peers get to report before they are stopped.
PEER_GRACE_S = 5.0
# How long a killed or stopped rank may take to be gone.
REAP_S = 5.0


class RankPool:
    """``world_size`` live rank processes with a process group of ``backend``.

    The ranks start on the first :meth:`run` (or :meth:`start`) and are replaced, on the next call,
    whenever a call leaves any doubt about them.

    Args:
        world_size: number of ranks (processes), >= 1.
        backend: ``gloo`` (CPU) or ``nccl`` (one GPU per rank).
        zygote: the process to fork ranks from; by default the pool starts (and owns) its own.
        start_timeout: seconds to wait for the zygote to import torch, and for every rank to join.

    Attributes:
        starts: how many times ranks were started; started_s: seconds the last start took.

    Raises:
        RankError: a rank failed to start (with its output).
    """

    def __init__(self, world_size: int, backend: str = "gloo", zygote: Zygote | None = None,
                 start_timeout: float = 120.0) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.backend = backend
        self.start_timeout = start_timeout
        self.generation = 0  # the group's PrefixStore prefix; a new one for every new group
        self.pg_timeout = 0.0  # seconds the current group's collectives may take
        self.calls = 0
        self.starts = 0
        self._attempts = 0
        self._origin = ""  # source file of the function of the current call
        self.started_s = 0.0
        self._dir = tempfile.mkdtemp(prefix="distcheck-ranks-")
        self._own_zygote = zygote is None
        self._zygote = zygote
        self._pids: list[int] = []
        self._pidfds: list[int] = []
        self._conns: list[Connection] = []

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Fork the ranks and wait until each has joined the store (no-op while they are alive)."""
        if self.alive:
            return
        self.kill()
        t0 = time.perf_counter()
        os.makedirs(self._dir, exist_ok=True)  # close() removed it
        if self._zygote is None or not self._zygote.alive:
            if not self._own_zygote:
                raise ZygoteError("the rank zygote this pool forks from is gone")
            self._zygote = Zygote(self._path(-1, "log"), self.start_timeout)
        init = {"sys_path": list(sys.path), "cwd": os.getcwd()}
        self._attempts += 1  # a new store file for every attempt: a failed one may have left keys
        store_file = os.path.join(self._dir, f"store.{self._attempts}")
        try:
            for rank in range(self.world_size):
                pid, conn = self._zygote.fork_rank({
                    "rank": rank, "world_size": self.world_size, "backend": self.backend,
                    "store_file": store_file,
                    "stack_file": self._path(rank, "stack"), "log": self._path(rank, "log"),
                })
                self._pids.append(pid)
                self._conns.append(conn)
                try:
                    self._pidfds.append(os.pidfd_open(pid))
                except ProcessLookupError:  # died and reaped already
                    raise RankError([RankOutcome(rank, "died", "exited as it started", stderr=self._log(rank))],
                                    detail="could not start the rank pool") from None
                conn.send(("init", init))
            for rank in range(self.world_size):
                self._expect(rank, "ready", self.start_timeout - (time.perf_counter() - t0))
        except BaseException:
            self.kill()
            raise
        self.generation = 0
        self.pg_timeout = 0.0
        self.starts += 1
        self.started_s = time.perf_counter() - t0

    def _path(self, rank: int, kind: str) -> str:
        return os.path.join(self._dir, f"rank{rank}.{kind}" if rank >= 0 else f"zygote.{kind}")

    def _expect(self, rank: int, kind: str, timeout: float) -> Any:
        conn = self._conns[rank]
        if conn.poll(max(timeout, 0.0)):
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            if msg and msg[0] == kind:
                return msg[1]
        raise RankError([RankOutcome(rank, "died", f"rank did not start ({kind})", stderr=self._log(rank))],
                        detail="could not start the rank pool")

    def _log(self, rank: int) -> str:
        try:
            return Path(self._path(rank, "log")).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        """Whether every rank process is running (False before the first start and after a kill)."""
        return bool(self._pids) and not any(pidfd_exited(fd) for fd in self._pidfds)

    def pids(self) -> list[int]:
        """Process ids of the ranks, in rank order (empty while none run)."""
        return list(self._pids)

    def close(self) -> None:
        """Stop the ranks (and the zygote, if the pool owns it); every process is gone when this returns.

        Ranks hold nothing worth a graceful shutdown (they end with ``os._exit`` anyway), so they are
        killed; a polite stop could wait on a group's pending work.
        """
        self.kill()
        if self._own_zygote and self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL every rank's process group and wait until the ranks are gone (the zygote stays)."""
        for pid in self._pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._wait_gone(REAP_S)
        for fd in self._pidfds:
            os.close(fd)
        for conn in self._conns:
            conn.close()
        self._pids, self._pidfds, self._conns = [], [], []

    def _wait_gone(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for fd in self._pidfds:
            pidfd_exited(fd, max(deadline - time.monotonic(), 0.0))

    # -- calls ------------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank; return the results in rank order.

        Args:
            timeout: seconds for the whole call on every rank; also the process group's timeout.

        Raises:
            PicklingError: ``fn``, an argument or a result could not be pickled (names which).
            RankError: a rank raised or died; all ranks' outcomes, tracebacks and output are in the
                message. The ranks are replaced before the next call.
            RankTimeout: ranks still running after ``timeout``; their stacks are in the message and
                the ranks are killed (the next call starts fresh ones).
            pytest.skip.Exception: every rank skipped (the reason of rank 0).
        """
        __tracebackhide__ = True  # a failing call points at the test, not at the pool
        payload = dump_call(fn, args, kwargs)
        self.start()
        if timeout > self.pg_timeout:  # the group's own timeout must not cut the call short
            self.generation += 1
            self.pg_timeout = timeout
        self.calls += 1
        call_id = self.calls
        self._origin = origin_file(fn)
        msg = ("run", call_id, payload, self.generation, float(timeout), list(sys.path), self._origin)
        for conn in self._conns:
            try:
                conn.send(msg)
            except OSError:  # the rank is gone; _collect reports how it ended
                pass
        outcomes, results, seqs, keep = self._collect(call_id, timeout)
        if any(o.status not in ("ok", "skip") for o in outcomes):
            self.kill()  # a rank raised, died or hung: fresh ranks for the next call
        elif len(set(seqs)) > 1:
            self.kill()
            warnings.warn(RanksOutOfStepWarning(
                "ranks ended the call out of step (collectives issued per rank: "
                + ", ".join(f"rank {r}: {s}" for r, s in enumerate(seqs))
                + "): a collective or send that only some ranks issued, or an async_op never waited on? "
                  "The ranks were replaced."), stacklevel=3)
        elif not all(keep):
            self.generation += 1  # subgroups or a destroyed group: the next call gets a fresh group
        return self._finish(outcomes, results)

    def _collect(self, call_id: int, timeout: float):
        __tracebackhide__ = True
        n = self.world_size
        outcomes: list[RankOutcome | None] = [None] * n
        results: list[bytes] = [b""] * n
        seqs: list[Any] = [None] * n
        keep = [False] * n
        deadline = time.monotonic() + timeout
        pending = {self._conns[r]: r for r in range(n)}
        pidfds = {self._pidfds[r]: r for r in range(n)}
        timed_out = False
        try:
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                ready = wait([*pending, *(fd for fd, r in pidfds.items() if self._conns[r] in pending)],
                             timeout=remaining)
                for obj in ready:
                    rank = pending.get(obj) if isinstance(obj, Connection) else pidfds[obj]
                    if rank is None or self._conns[rank] not in pending:
                        continue
                    conn = self._conns[rank]
                    # A rank that reported and then exited has both ready: read the report first.
                    if isinstance(obj, int) and not conn.poll(0):
                        del pending[conn]
                        outcomes[rank] = self._death(rank)
                        continue
                    del pending[conn]
                    try:
                        kind, cid, outcome, result, seq, ok = conn.recv()
                    except (EOFError, OSError):
                        outcomes[rank] = self._death(rank)
                        continue
                    assert kind == "result" and cid == call_id
                    outcomes[rank] = RankOutcome(**outcome)
                    results[rank], seqs[rank], keep[rank] = result, seq, ok
                failed = any(o is not None and o.status in ("error", "died") for o in outcomes)
                if failed and pending:
                    deadline = min(deadline, time.monotonic() + PEER_GRACE_S)
        except BaseException:  # KeyboardInterrupt, pytest-timeout: leave nothing running
            self.kill()
            raise
        if pending:
            stacks = self._dump_stacks(list(pending.values()))
            died = any(o is not None and o.status in ("error", "died") for o in outcomes)
            for rank in pending.values():
                status = "timeout" if timed_out and not died else "stopped"
                why = f"no result after {timeout:g} s" if status == "timeout" else "stopped after a peer failed"
                outcomes[rank] = RankOutcome(rank, status, why, stack=stacks.get(rank, ""))
            self.kill()
            if timed_out and not died:
                done = [f"rank {r}: returned" for r, o in enumerate(outcomes) if o is not None and o.status == "ok"]
                raise RankTimeout([o for o in outcomes if o is not None], detail=f"timeout {timeout:g} s" + (
                    f"; {', '.join(done)} (ranks out of step: a collective only some ranks issued?)" if done else ""))
        return [o for o in outcomes if o is not None], results, seqs, keep

    def _death(self, rank: int) -> RankOutcome:
        code = self._zygote.exit_code(self._pids[rank], 2.0) if self._zygote is not None else None
        if code is None:
            why = "lost contact with the rank"
        elif code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        else:
            why = f"exited with code {code}"
        return RankOutcome(rank, "died", why, stderr=self._log(rank))

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        for rank in ranks:
            try:
                os.kill(self._pids[rank], signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
        # Code sent by value has lost its file name (cloudpickle); the line numbers are the source's.
        origin = f'File "{self._origin}"' if self._origin else 'File "<dynamic-code>"'
        return {r: Path(self._path(r, "stack")).read_text(errors="replace").replace('File "<dynamic-code>"', origin)
                for r in ranks}

    def _finish(self, outcomes: list[RankOutcome], results: list[bytes]) -> list[Any]:
        __tracebackhide__ = True
        import cloudpickle

        if any(o.status not in ("ok", "skip") for o in outcomes):
            raise RankError(outcomes)
        for o in outcomes:
            _echo(o)
        reissue([o.warnings for o in outcomes], self._origin)
        if any(o.status == "skip" for o in outcomes):
            import pytest

            reasons = {o.error for o in outcomes if o.status == "skip"}
            if len(reasons) == 1 and all(o.status == "skip" for o in outcomes):
                pytest.skip(reasons.pop())
            raise RankError(outcomes, detail="ranks disagree: some skipped, some did not (" + "; ".join(
                f"rank {o.rank}: {o.status} {o.error}".strip() for o in outcomes) + ")")
        try:
            return [cloudpickle.loads(r) for r in results]
        except Exception as exc:  # noqa: BLE001
            raise PicklingError(f"a rank's return value could not be unpickled here: {exc}") from exc


def _echo(o: RankOutcome) -> None:
    # Ranks' prints reach the test's captured output, tagged, so pytest shows them with the test.
    for stream, text in ((sys.stdout, o.stdout), (sys.stderr, o.stderr)):
        for line in text.splitlines():
            stream.write(f"[rank {o.rank}] {line}\n")
