"""Rank processes kept alive across tests, and how a call is dispatched to them and collected.

Design (see tests/test_rank_pool.py for each behaviour):
- one worker process per rank, started with ``subprocess`` in its own session (a kill reaches
  grandchildren) with SIGKILL as its parent-death signal (SIGINT does not stop a rank blocked in gloo);
- rendezvous on a ``TCPStore`` on port 0 hosted by rank 0, so ports never collide under xdist;
- the process group is kept while every rank ends a call in step (same sequence number, no subgroups,
  no error) and rebuilt under a new ``PrefixStore`` prefix otherwise;
- a call that outlives its timeout, or a rank that dies, gets every unfinished rank stack-dumped
  (faulthandler on SIGUSR1) and the whole pool killed; the next call starts a new pool.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable

from pytest_distcheck.ranks.errors import PicklingError, RankError, RankOutcome, RankTimeout
from pytest_distcheck.ranks.payload import dump_call, origin_file

_PR_SET_PDEATHSIG = 1
# After the first rank fails, how long its peers get to report before they are stopped.
PEER_GRACE_S = 5.0


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class RankPool:
    """``world_size`` live rank processes with a process group of ``backend``.

    Args:
        world_size: number of ranks (processes), >= 1.
        backend: ``gloo`` (CPU) or ``nccl`` (one GPU per rank).
        start_timeout: seconds to wait for every rank to import torch and join the store.

    Raises:
        RankError: a rank failed to start (with its output).
    """

    def __init__(self, world_size: int, backend: str = "gloo", start_timeout: float = 120.0) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.backend = backend
        self.generation = 0
        self.calls = 0
        self.started_s = 0.0
        self._dir = tempfile.mkdtemp(prefix="distcheck-ranks-")
        self._procs: list[subprocess.Popen[bytes]] = []
        self._conns: list[Connection] = []
        self._start(start_timeout)

    # -- life cycle -------------------------------------------------------------------------------
    def _start(self, timeout: float) -> None:
        t0 = time.perf_counter()
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        init = {"sys_path": list(sys.path), "cwd": os.getcwd()}
        try:
            for rank in range(self.world_size):
                parent, child = Pipe(duplex=True)
                log = open(self._path(rank, "log"), "wb")  # noqa: SIM115
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest_distcheck.ranks.worker", str(child.fileno()),
                     str(rank), str(self.world_size), self.backend, self._path(rank, "stack")],
                    pass_fds=(child.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
                log.close()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
                parent.send(("init", init))
            port = self._expect(0, "port", timeout)
            for conn in self._conns[1:]:
                conn.send(("port", port))
            for rank in range(self.world_size):
                self._expect(rank, "ready", timeout - (time.perf_counter() - t0))
        except BaseException:
            self.kill()
            raise
        self.started_s = time.perf_counter() - t0

    def _path(self, rank: int, kind: str) -> str:
        return os.path.join(self._dir, f"rank{rank}.{kind}")

    def _expect(self, rank: int, kind: str, timeout: float) -> Any:
        conn = self._conns[rank]
        if conn.poll(max(timeout, 0.0)):
            try:
                msg = conn.recv()
            except EOFError:
                msg = None
            if msg and msg[0] == kind:
                return msg[1]
        log = Path(self._path(rank, "log")).read_text(errors="replace")[-4000:]
        raise RankError([RankOutcome(rank, "died", f"rank did not start ({kind})", stderr=log)],
                        detail="could not start the rank pool")

    @property
    def alive(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for p in self._procs)

    def pids(self) -> list[int]:
        """Process ids of the ranks, in rank order."""
        return [p.pid for p in self._procs]

    def close(self) -> None:
        """Stop the ranks politely, then make sure: every process is gone when this returns."""
        for conn in self._conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        deadline = time.monotonic() + 5.0
        for proc in self._procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL every rank's process group and reap it."""
        for proc in self._procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self._procs:
            proc.wait()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []

    # -- calls ------------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank; return the results in rank order.

        Args:
            timeout: seconds for the whole call on every rank; also the process group's timeout.

        Raises:
            PicklingError: ``fn``, an argument or a result could not be pickled (names which).
            RankError: a rank raised; all ranks' outcomes, tracebacks and output are in the message.
            RankTimeout: ranks still running after ``timeout``; their stacks are in the message and
                the pool is killed (the next call starts a fresh one).
            pytest.skip.Exception: every rank skipped (the reason of rank 0).
        """
        payload = dump_call(fn, args, kwargs)
        self.calls += 1
        call_id = self.calls
        msg = ("run", call_id, payload, self.generation, float(timeout), list(sys.path), origin_file(fn))
        for conn in self._conns:
            conn.send(msg)
        outcomes, results, seqs, keep = self._collect(call_id, timeout)
        if len(set(seqs)) > 1 or not all(keep):
            self.generation += 1  # out of step, destroyed or errored: next call gets a fresh group
        return self._finish(outcomes, results)

    def _collect(self, call_id: int, timeout: float):
        n = self.world_size
        outcomes: list[RankOutcome | None] = [None] * n
        results: list[bytes] = [b""] * n
        seqs: list[Any] = [None] * n
        keep = [False] * n
        deadline = time.monotonic() + timeout
        pending = {self._conns[r]: r for r in range(n)}
        timed_out = False
        try:
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for conn in wait(list(pending), timeout=remaining):
                    rank = pending.pop(conn)
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
            died = any(o is not None and o.status == "died" for o in outcomes)
            for rank in pending.values():
                status = "timeout" if timed_out and not died else "stopped"
                why = f"no result after {timeout:g} s" if status == "timeout" else "stopped after a peer failed"
                outcomes[rank] = RankOutcome(rank, status, why, stack=stacks.get(rank, ""))
            self.kill()
            if timed_out and not died:
                raise RankTimeout([o for o in outcomes if o is not None], detail=f"timeout {timeout:g} s")
        elif any(o.status == "died" for o in outcomes if o is not None):
            self.kill()
        return outcomes, results, seqs, keep

    def _death(self, rank: int) -> RankOutcome:
        proc = self._procs[rank]
        try:
            code = proc.wait(2.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            why = "lost contact with the rank"
        elif code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        else:
            why = f"exited with code {code}"
        log = Path(self._path(rank, "log")).read_text(errors="replace")[-4000:]
        return RankOutcome(rank, "died", why, stderr=log)

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        for rank in ranks:
            try:
                os.kill(self._procs[rank].pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
        return {r: Path(self._path(r, "stack")).read_text(errors="replace") for r in ranks}

    def _finish(self, outcomes: list[RankOutcome | None], results: list[bytes]) -> list[Any]:
        import cloudpickle

        done = [o for o in outcomes if o is not None]
        if any(o.status not in ("ok", "skip") for o in done):
            raise RankError(done)
        for o in done:
            _echo(o)
        if any(o.status == "skip" for o in done):
            import pytest

            reasons = {o.error for o in done if o.status == "skip"}
            if len(reasons) == 1 and all(o.status == "skip" for o in done):
                pytest.skip(reasons.pop())
            raise RankError(done, detail="ranks disagree: some skipped, some did not (" + "; ".join(
                f"rank {o.rank}: {o.status} {o.error}".strip() for o in done) + ")")
        try:
            return [cloudpickle.loads(r) for r in results]
        except Exception as exc:  # noqa: BLE001
            raise PicklingError(f"a rank's return value could not be unpickled here: {exc}") from exc


def _echo(o: RankOutcome) -> None:
    # Ranks' prints reach the test's captured output, tagged, so pytest shows them with the test.
    for stream, text in ((sys.stdout, o.stdout), (sys.stderr, o.stderr)):
        for line in text.splitlines():
            stream.write(f"[rank {o.rank}] {line}\n")
