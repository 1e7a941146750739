"""Rank processes kept alive across tests (:class:`RankPool`): a call dispatched to every rank, its outcomes collected.

One process per rank, forked from the zygote (:mod:`.zygote`); the ranks meet on a ``FileStore`` in the session's
private folder and keep their process group while every call ends in step. A call carries the test's context
(:mod:`.context`) and its warnings come back (:mod:`.rank_warnings`); a rank's output goes to per-rank files. A rank
that raised, died, hung or ended out of step is replaced by fresh forks before the next call. A hang is a
:class:`~.errors.RankTimeout` with every rank's stack (the group's timeout, :func:`group_timeout`, is longer than the
call's). Replies are unpickled as plain data only (:func:`plain_loads`). Design record: docs/design/ranks.md.
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import select
import signal
import sys
import time
import warnings
from multiprocessing import current_process
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from pytest_distcheck import i18n
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.ranks.children import describe_children
from pytest_distcheck.ranks.context import EnvTracker, rewritten_modules
from pytest_distcheck.ranks.errors import (
    PicklingError,
    RankError,
    RankOutcome,
    RanksOutOfStepWarning,
    RankTimeout,
)
from pytest_distcheck.ranks.payload import dump_call, origin_file
from pytest_distcheck.ranks.rank_warnings import reissue
from pytest_distcheck.ranks.report import STOPPED, blame, detail_rerun, hang_hint, known_crash, peers_returned
from pytest_distcheck.ranks.tempdirs import SessionFolder
from pytest_distcheck.ranks.zygote import Zygote, ZygoteError, any_exited

# After the first rank fails, how long its peers get to report before they are stopped.
PEER_GRACE_S = 5.0
# How long a killed or stopped rank may take to be gone.
REAP_S = 5.0
# How often output is tailed while a call runs with live output (pytest -s).
LIVE_POLL_S = 0.1
# Most of one stream of one rank shown per call (the tail is kept).
OUTPUT_MAX = 64_000
# Longest call timeout, seconds (a year): beyond it the poll and the group's timedelta overflow.
MAX_TIMEOUT_S = 366 * 24 * 3600
# Seconds a call capped by pytest-timeout ends before it (at most half the time left): the 0.3 s stack
# dump, the kill and the report must be done before pytest-timeout fails the test without them.
OUTER_MARGIN_S = 2.0

# What the pool says, in the language in use (tests import these).
NOT_PLAIN_DATA = N_("{module}.{name} is not plain data")
BAD_WORLD_SIZE = N_("world_size must be >= 1, got {world_size}")
NO_ZYGOTE = N_("the rank zygote this pool forks from is gone")
EXITED_AT_START = N_("exited as it started")
DID_NOT_START = N_("rank did not start ({kind})")
POOL_NOT_STARTED = N_("could not start the rank pool")
BAD_TIMEOUT = N_("timeout must be a number of seconds > 0 and at most {most} (a year), got {timeout!r}")
OUT_OF_STEP = N_("ranks ended the call out of step (collectives issued per rank: {counts}): a collective or send "
                 "that only some ranks issued, or an async_op never waited on? The ranks were replaced.")
TO_FIND_IT = N_(" To find it, {rerun}")
NOT_THE_KITS_REPLY = N_("the rank's reply is not the kit's: {error}")
# Why a rank has no result: it outlived the call's timeout, or it died.
NO_RESULT = N_("no result after {seconds}")
LOST_CONTACT = N_("lost contact with the rank")
KILLED_BY = N_("killed by {signal}")
EXITED_WITH = N_("exited with code {code}")
# A RankTimeout's detail: TIMEOUT_DETAIL, its limit CAPPED_LIMIT when pytest-timeout's capped it, then SOME_RETURNED.
TIMEOUT_DETAIL = N_("timeout {limit}")
CAPPED = N_("capped by pytest-timeout's {outer:g} s")
CAPPED_LIMIT = N_("{seconds} ({capped}, so the ranks' stacks come before it fails the test)")
RETURNED = N_("rank {rank}: returned")
SOME_RETURNED = N_("; {returned} (ranks out of step: a collective only some ranks issued?)")
SKIPS_DISAGREE = N_("ranks disagree: some skipped, some did not ({outcomes})")
NOT_UNPICKLED = N_("a rank's return value could not be unpickled here: {error}")
NOT_UNPICKLED_PLAIN = N_("a rank's return value could not be unpickled here (only plain data may come back from the "
                         "ranks here): {error}")
LEFT_OUT = N_("[... {skipped} bytes left out ...]")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(_(NOT_PLAIN_DATA).format(module=module, name=name))


def plain_loads(data: bytes) -> Any:
    """Unpickle ``data`` holding plain data only: builtin str, bytes, int, float, bool,
    None, list, tuple, dict, set and frozenset. Nothing is imported or called, so bytes a rank made cannot
    run code here (the Python docs' "Restricting Globals", pickle module).

    Raises:
        pickle.UnpicklingError: ``data`` names a class or function (any other object), or is not a pickle.
    """
    return _PlainUnpickler(io.BytesIO(data)).load()


def capped_timeout(timeout: float, left: float, outer: float) -> tuple[float, str]:
    """The call's timeout under an outer deadline (pytest-timeout's) ``left`` seconds away, and a note.

    A call that would outlive the outer deadline ends ``OUTER_MARGIN_S`` (at most half of ``left``) before
    it, so its ``RankTimeout`` with every rank's stack comes first, not pytest-timeout's bare "Timeout".

    Args:
        timeout: the call's own timeout, seconds.
        left: seconds until the outer deadline.
        outer: the outer timeout as configured, seconds (named in the note).

    Returns:
        (seconds, "") when ``timeout`` ends in time; otherwise (capped seconds, at least 0.01, and
        :data:`CAPPED`, "capped by pytest-timeout's N s", in the language in use).
    """
    cap = left - min(OUTER_MARGIN_S, left / 2)
    if timeout <= cap:
        return timeout, ""
    return max(cap, 0.01), _(CAPPED).format(outer=outer)


def group_timeout(call_timeout: float) -> float:
    """Seconds the process group's collectives may take for a call of ``call_timeout`` seconds.

    Well above the call's deadline (also after the 0.3 s stack dump), so the kit's ``RankTimeout`` always
    comes first and gloo's own "Timed out waiting" never races it.
    """
    return 2 * call_timeout + 10


_UTF8 = codecs.getincrementaldecoder("utf-8")


class _Output:
    """One rank's stdout and stderr files: where the current call started, and a live tail."""

    def __init__(self, out: str, err: str) -> None:
        self.fds = [os.open(out, os.O_RDONLY), os.open(err, os.O_RDONLY)]
        self.start = [0, 0]
        self.end = [0, 0]  # where the last call's output ended
        self.pos = [0, 0]
        self.partial = ["", ""]
        self.decoders: list[codecs.IncrementalDecoder] = []

    def mark(self) -> None:
        """A call starts: its output is what follows what the last call read (no system call here)."""
        self.start = list(self.end)
        self.pos = list(self.start)
        self.partial = ["", ""]
        self.decoders = []

    def _read(self, i: int, frm: int) -> str:
        end = self.end[i] = os.fstat(self.fds[i]).st_size
        skipped = max(end - frm - OUTPUT_MAX, 0)
        data = os.pread(self.fds[i], end - frm - skipped, frm + skipped) if end > frm else b""
        text = data.decode(errors="replace")
        return _(LEFT_OUT).format(skipped=skipped) + "\n" + text if skipped else text

    def call_text(self) -> tuple[str, str]:
        """(stdout, stderr) written since :meth:`mark`."""
        return self._read(0, self.start[0]), self._read(1, self.start[1])

    def tail(self, rank: int, final: bool = False) -> None:
        """Write complete new lines (all at the end) to this process's stdout/stderr, tagged with the rank."""
        if not self.decoders:
            self.decoders = [_UTF8(errors="replace") for _ in self.fds]
        for i, stream in enumerate((sys.stdout, sys.stderr)):
            end = os.fstat(self.fds[i]).st_size
            if end > self.pos[i]:
                # a character cut in two by a read waits in the decoder for its other half
                self.partial[i] += self.decoders[i].decode(os.pread(self.fds[i], end - self.pos[i], self.pos[i]))
                self.pos[i] = end
            if final:
                self.partial[i] += self.decoders[i].decode(b"", final=True)
            lines = self.partial[i].split("\n")
            self.partial[i] = lines.pop()  # an unfinished line waits for its end, or for the call's end
            if final and self.partial[i]:
                lines.append(self.partial[i])
                self.partial[i] = ""
            for line in lines:
                stream.write(f"[rank {rank}] {line}\n")
            if lines:
                stream.flush()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


class RankPool:
    """``world_size`` live rank processes with a process group of ``backend``.

    The ranks start on the first :meth:`run` (or :meth:`start`) and are replaced, on the next call,
    whenever a call leaves any doubt about them.

    Args:
        world_size: number of ranks (processes), >= 1.
        backend: ``gloo`` (CPU) or ``nccl`` (one GPU per rank).
        zygote: the process to fork ranks from; by default the pool starts (and owns) its own.
        start_timeout: seconds to wait for the zygote to import torch, and for every rank to join.
        base_env: the environment the ranks start with, against which each call's environment is
            diffed (default: this process's, now).
        folder: where the rank files go (default: a locked session folder of its own, made at start and
            removed by :meth:`close`; :mod:`pytest_distcheck.ranks.tempdirs`).
        debug_level: the ranks' ``TORCH_DISTRIBUTED_DEBUG`` (``OFF``/``INFO``/``DETAIL``), for the report.
        plain_results: unpickle return values as plain data only (:func:`plain_loads`), for ranks that run
            code this process must not trust; a call returning anything else raises ``PicklingError``.

    Attributes:
        starts: how many times ranks were started; started_s: seconds the last start took.

    Raises:
        RankError: a rank failed to start (with its output).
    """

    def __init__(self, world_size: int, backend: str = "gloo", zygote: Zygote | None = None,
                 start_timeout: float = 120.0, base_env: dict[str, str] | None = None,
                 folder: str | None = None, debug_level: str = "OFF", plain_results: bool = False) -> None:
        if world_size < 1:
            raise ValueError(_(BAD_WORLD_SIZE).format(world_size=world_size))
        self.world_size = world_size
        self.backend = backend
        self.start_timeout = start_timeout
        self.debug_level = debug_level
        self.plain_results = plain_results
        self.generation = 0  # the group's PrefixStore prefix; a new one for every new group
        self.pg_timeout = 0.0  # seconds the current group's collectives may take
        self.calls = 0
        self.starts = 0
        self._attempts = 0
        self._origin = ""  # source file of the function of the current call
        self.started_s = 0.0
        self.base_env = dict(os.environ if base_env is None else base_env)
        self._env = EnvTracker(self.base_env)
        self._own_folder = folder is None
        self._session: SessionFolder | None = None  # the folder of a pool used on its own (a script)
        self._dir = folder or ""
        self._own_zygote = zygote is None
        self._zygote = zygote
        self._pids: list[int] = []
        self._pidfds: list[int] = []
        self._conns: list[Connection] = []
        self._outputs: list[_Output] = []
        self._rewrite_sent: dict[str, str] | None = None

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Fork the ranks and wait until each has joined the store (no-op while they are alive).

        The ranks speak the language in use (:func:`pytest_distcheck.i18n.language`), given in their ``init``
        message and again with every call (a test that switched the language gets ranks that speak it)."""
        if self.alive:
            return
        self.kill()
        t0 = time.perf_counter()
        if self._own_folder and self._session is None:
            self._session = SessionFolder()
            self._dir = self._session.path
        os.makedirs(self._dir, exist_ok=True)
        if self._zygote is None or not self._zygote.alive:
            if not self._own_zygote:
                raise ZygoteError(_(NO_ZYGOTE))
            self._zygote = Zygote(self._path(-1, "log"), self.start_timeout, env=self.base_env)
        init = {"sys_path": list(sys.path), "cwd": os.getcwd(), "authkey": bytes(current_process().authkey),
                "lang": i18n.language()}
        self._attempts += 1  # a new store file for every attempt: a failed one may have left keys
        store_file = os.path.join(self._dir, f"store.{self._attempts}")
        self._rewrite_sent = None
        try:
            for rank in range(self.world_size):
                out, err = self._path(rank, "out"), self._path(rank, "err")
                for path in (out, err):
                    with open(path, "wb"):
                        pass
                self._outputs.append(_Output(out, err))
                pid, conn = self._zygote.fork_rank({
                    "rank": rank, "world_size": self.world_size, "backend": self.backend,
                    "store_file": store_file, "stack_file": self._path(rank, "stack"), "out": out, "err": err,
                })
                self._pids.append(pid)
                self._conns.append(conn)
                try:
                    self._pidfds.append(os.pidfd_open(pid))
                except ProcessLookupError:  # died and reaped already
                    raise RankError([RankOutcome(rank, "died", _(EXITED_AT_START), stderr=self._log(rank))],
                                    detail=_(POOL_NOT_STARTED)) from None
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
        raise RankError([RankOutcome(rank, "died", _(DID_NOT_START).format(kind=kind), stderr=self._log(rank))],
                        detail=_(POOL_NOT_STARTED))

    def _log(self, rank: int) -> str:
        parts = []
        for kind in ("out", "err"):
            try:
                parts.append(Path(self._path(rank, kind)).read_text(errors="replace")[-4000:])
            except OSError:
                pass
        return "".join(parts)

    @property
    def alive(self) -> bool:
        """Whether every rank process is running (False before the first start and after a kill)."""
        return bool(self._pids) and not any_exited(self._pidfds)

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
        if self._session is not None:
            self._session.remove()
            self._session = None

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
        for output in self._outputs:
            output.close()
        self._pids, self._pidfds, self._conns, self._outputs = [], [], [], []

    def _wait_gone(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for fd in self._pidfds:
            any_exited([fd], max(deadline - time.monotonic(), 0.0))

    # -- calls ------------------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float, *, live: bool = False,
            pass_rank: bool = False, nodeid: str = "", outer: tuple[float, float] | None = None) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank; return the results in rank order.

        Args:
            timeout: seconds for the whole call on every rank (the group's own is longer:
                :func:`group_timeout`).
            live: write the ranks' output as it comes, tagged ``[rank r]`` (pytest ``-s``); otherwise it is
                written at the end of a call that returned, and put into the error of one that did not.
            pass_rank: call ``fn(rank, *args, **kwargs)`` (``torch.multiprocessing.spawn``'s convention).
            nodeid: the test's id, for the re-run command a timeout proposes.
            outer: (``time.monotonic()`` deadline, seconds) of pytest-timeout's timer on the test, if any: a
                call that would end after it is capped before it (:func:`capped_timeout`), once the ranks
                are up.

        Raises:
            PicklingError: ``fn``, an argument or a result could not be pickled (names which).
            RankError: a rank raised or died; all ranks' outcomes, tracebacks and output are in the
                message. The ranks are replaced before the next call.
            RankTimeout: ranks still running after ``timeout``; their stacks are in the message and
                the ranks are killed (the next call starts fresh ones).
            pytest.skip.Exception: every rank skipped (the reason of rank 0).
            ValueError: ``timeout`` is not a number of seconds > 0 and at most ``MAX_TIMEOUT_S`` (nothing
                is started).
        """
        __tracebackhide__ = True  # a failing call points at the test, not at the pool
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S:
            raise ValueError(_(BAD_TIMEOUT).format(most=MAX_TIMEOUT_S, timeout=timeout))
        payload = dump_call(fn, args, kwargs)
        self.start()
        capped = ""
        if outer is not None:
            timeout, capped = capped_timeout(timeout, outer[0] - time.monotonic(), outer[1])
        need = group_timeout(timeout)
        if need > self.pg_timeout:  # the group's own timeout must not cut the call short
            self.generation += 1
            self.pg_timeout = need
        self.calls += 1
        call_id = self.calls
        self._origin = origin_file(fn)
        rewrite = rewritten_modules()
        ctx = {"env": self._env.diff(), "cwd": os.getcwd(), "pass_rank": pass_rank, "lang": i18n.language(),
               "rewrite": None if rewrite == self._rewrite_sent else rewrite}
        self._rewrite_sent = rewrite
        # Pickled once for every rank (Connection.send would pickle it again for each).
        msg = pickle.dumps(("run", call_id, payload, self.generation, float(self.pg_timeout), sys.path,
                            self._origin, ctx), pickle.HIGHEST_PROTOCOL)
        for output in self._outputs:
            output.mark()
        for conn in self._conns:
            try:
                conn.send_bytes(msg)
            except OSError:  # the rank is gone; _collect reports how it ended
                pass
        outcomes, results, seqs, keep = self._collect(call_id, timeout, live, nodeid, capped)
        if any(o.status not in ("ok", "skip") for o in outcomes):
            self.kill()  # a rank raised, died or hung: fresh ranks for the next call
        elif None not in seqs and len(set(seqs)) > 1:  # a rank without a number (subgroups) is not compared
            self.kill()
            rerun = detail_rerun(nodeid, self.debug_level)
            warnings.warn(RanksOutOfStepWarning(
                _(OUT_OF_STEP).format(counts=", ".join(f"rank {r}: {s}" for r, s in enumerate(seqs)))
                + (_(TO_FIND_IT).format(rerun=rerun) if rerun else "")), stacklevel=4)
        elif not all(keep):
            self.generation += 1  # subgroups or a destroyed group: the next call gets a fresh group
        return self._finish(outcomes, results, live, nodeid)

    def _collect(self, call_id: int, timeout: float, live: bool, nodeid: str, capped: str = ""):
        __tracebackhide__ = True
        n = self.world_size
        outcomes: list[RankOutcome | None] = [None] * n
        results: list[bytes] = [b""] * n
        seqs: list[Any] = [None] * n
        keep = [False] * n
        deadline = time.monotonic() + timeout
        # fd -> rank, for each rank's pipe and pidfd; both leave the poll set once the rank is done.
        # (A select.poll, not multiprocessing's wait(), which builds a selector in Python on every call.)
        poller = select.poll()
        conn_fd: dict[int, int] = {}
        pid_fd: dict[int, int] = {}
        for r in range(n):
            conn_fd[self._conns[r].fileno()] = r
            pid_fd[self._pidfds[r]] = r
            poller.register(self._conns[r].fileno(), select.POLLIN)
            poller.register(self._pidfds[r], select.POLLIN)
        pending = set(range(n))

        def done(rank: int) -> None:
            pending.discard(rank)
            poller.unregister(self._conns[rank].fileno())
            poller.unregister(self._pidfds[rank])

        timed_out = False
        try:
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                # (an hour at most per poll: poll's int of milliseconds ends at about 24 days)
                ready = poller.poll(1000 * min(remaining, LIVE_POLL_S if live else 3600.0))
                if live:
                    for rank, output in enumerate(self._outputs):
                        output.tail(rank)
                for fd, _events in ready:
                    rank = conn_fd.get(fd, pid_fd.get(fd))
                    if rank not in pending:
                        continue
                    conn = self._conns[rank]
                    # A rank that reported and then exited has both ready: read the report first.
                    if fd in pid_fd and not conn.poll(0):
                        done(rank)
                        outcomes[rank] = self._death(rank)
                        continue
                    done(rank)
                    try:
                        kind, cid, outcome, result, seq, ok = plain_loads(conn.recv_bytes())
                        assert kind == "result" and cid == call_id
                        outcomes[rank] = RankOutcome(**outcome)
                    except (EOFError, OSError):
                        outcomes[rank] = self._death(rank)
                        continue
                    except Exception as exc:  # noqa: BLE001 - whatever the rank sent, it is not the kit's reply
                        outcomes[rank] = RankOutcome(rank, "error", _(NOT_THE_KITS_REPLY).format(error=exc))
                        continue
                    results[rank], seqs[rank], keep[rank] = result, seq, ok
                failed = any(o is not None and o.status in ("error", "died") for o in outcomes)
                if failed and pending:
                    deadline = min(deadline, time.monotonic() + PEER_GRACE_S)
        except BaseException:  # KeyboardInterrupt, pytest-timeout: leave nothing running
            self.kill()
            raise
        pending = sorted(pending)
        seconds = f"{timeout:.3g} s" if capped else f"{timeout:g} s"
        stacks = self._dump_stacks(pending) if pending else {}
        died = any(o is not None and o.status in ("error", "died") for o in outcomes)
        for rank in pending:
            status = "timeout" if timed_out and not died else "stopped"
            why = _(NO_RESULT).format(seconds=seconds) if status == "timeout" else _(STOPPED)
            outcomes[rank] = RankOutcome(rank, status, why, stack=stacks.get(rank, ""))
        done: list[RankOutcome] = [o for o in outcomes if o is not None]
        for o, output in zip(done, self._outputs, strict=True):
            if live:
                output.tail(o.rank, final=True)
            o.stdout, o.stderr = output.call_text()
        if pending:
            self.kill()
            if timed_out and not died:
                returned = [_(RETURNED).format(rank=o.rank) for o in done if o.status == "ok"]
                rerun = hang_hint(nodeid, self.debug_level, stacks)
                limit = _(CAPPED_LIMIT).format(seconds=seconds, capped=capped) if capped else seconds
                raise RankTimeout(done, detail=_(TIMEOUT_DETAIL).format(limit=limit) + (
                    _(SOME_RETURNED).format(returned=", ".join(returned)) if returned else ""),
                    hint=rerun[:1].upper() + rerun[1:] if rerun else "")
        return done, results, seqs, keep

    def _death(self, rank: int) -> RankOutcome:
        code = self._zygote.exit_code(self._pids[rank], 2.0) if self._zygote is not None else None
        if code is None:
            why = _(LOST_CONTACT)
        elif code < 0:
            why = _(KILLED_BY).format(signal=signal.Signals(-code).name)
        else:
            why = _(EXITED_WITH).format(code=code)
        return RankOutcome(rank, "died", why)

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        for rank in ranks:
            try:
                os.kill(self._pids[rank], signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
        # Code sent by value has lost its file name (cloudpickle); the line numbers are the source's.
        origin = f'File "{self._origin}"' if self._origin else 'File "<dynamic-code>"'

        def clean(text: str) -> str:
            return _user_frames(text.replace('File "<dynamic-code>"', origin))
        # Each rank's stack, then its children's (a hang in a process the rank forked: children.py).
        return {r: clean(Path(self._path(r, "stack")).read_text(errors="replace"))
                + describe_children(self._pids[r], self._path(r, "stack"), clean) for r in ranks}

    def _finish(self, outcomes: list[RankOutcome], results: list[bytes], live: bool, nodeid: str) -> list[Any]:
        __tracebackhide__ = True
        import cloudpickle

        if any(o.status not in ("ok", "skip") for o in outcomes):
            outcomes = blame(outcomes)
            notes = [f"rank {o.rank}: {note}" for o in outcomes if (note := known_crash(o, self.debug_level))]
            why = peers_returned(outcomes)
            rerun = detail_rerun(nodeid, self.debug_level) if why else ""
            if rerun:
                notes.insert(0, rerun[:1].upper() + rerun[1:])
            raise RankError(outcomes, detail=why, hint="\n".join(notes))
        if not live:
            for o in outcomes:
                _echo(o)
        reissue([o.warnings for o in outcomes], self._origin)
        if any(o.status == "skip" for o in outcomes):
            import pytest

            reasons = {o.error for o in outcomes if o.status == "skip"}
            if len(reasons) == 1 and all(o.status == "skip" for o in outcomes):
                pytest.skip(reasons.pop())
            raise RankError(outcomes, detail=_(SKIPS_DISAGREE).format(outcomes="; ".join(
                f"rank {o.rank}: {o.status} {o.error}".strip() for o in outcomes)))
        try:
            return [plain_loads(r) if self.plain_results else cloudpickle.loads(r) for r in results]
        except Exception as exc:  # noqa: BLE001
            raise PicklingError(_(NOT_UNPICKLED_PLAIN if self.plain_results else NOT_UNPICKLED).format(
                error=exc)) from exc


_KIT_FRAMES = (f'File "{os.path.dirname(os.path.abspath(__file__))}{os.sep}', 'File "<frozen runpy>"')


def _user_frames(stack: str) -> str:
    """A faulthandler dump without the frames of the rank's own machinery (zygote, worker, runpy)."""
    return "\n".join(line for line in stack.splitlines() if not line.strip().startswith(_KIT_FRAMES))


def _echo(o: RankOutcome) -> None:
    # Ranks' prints reach the test's captured output, tagged, so pytest shows them with the test.
    for stream, text in ((sys.stdout, o.stdout), (sys.stderr, o.stderr)):
        for line in text.splitlines():
            stream.write(f"[rank {o.rank}] {line}\n")
