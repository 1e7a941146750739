"""The program one rank runs, in a process forked from the zygote: :func:`serve`.

It opens the pool's store (a ``FileStore`` in the pool's private folder, new for every start of the
ranks), then serves calls until its parent goes away. Each call runs on a process group over a
``PrefixStore`` of that store; the group is kept between calls while the parent sees every rank
in step, and rebuilt under a new prefix otherwise. A rank whose call raised reports, then exits: that
closes its sockets at once (so a peer blocked on it fails fast instead of waiting out the group's
timeout) and the pool is replaced by freshly forked ranks before the next call.

State reset after every call (documented in the README): the global RNG states of torch (CPU), Python
and NumPy (when loaded), torch's default dtype, default device, grad mode, deterministic-algorithms
flag and intra-op thread count, ``os.environ``, the working directory and the warnings filters; subgroups
a call created are destroyed. Anything else a test changes at module level (a module's globals,
``sys.modules``) stays for the next test on the same pool; ask for ``@pytest.mark.fresh_ranks``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import linecache
import os
import random
import signal
import sys
import traceback
import warnings
from datetime import timedelta
from multiprocessing.connection import Connection

from pytest_distcheck.ranks import rank_warnings


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _format_traceback(exc: BaseException, origin: str) -> str:
    """The traceback text, with the file name and source line of code that travelled by value."""
    tb = traceback.TracebackException.from_exception(exc)
    for te in _chain(tb):
        for i, fs in enumerate(te.stack):
            if fs.filename == "<dynamic-code>" and origin:
                te.stack[i] = traceback.FrameSummary(origin, fs.lineno, fs.name,
                                                     line=linecache.getline(origin, fs.lineno or 0).strip())
    return "".join(tb.format())


def _chain(te: traceback.TracebackException):
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        yield te
        te = te.__cause__ or te.__context__


class _Rank:
    def __init__(self, conn: Connection, rank: int, world_size: int, backend: str, store_file: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.conn, self.rank, self.world_size, self.backend = conn, rank, world_size, backend
        self.generation: int | None = None
        # Not a TCPStore: it reverse-resolves its peers' addresses, and a resolver that drops one query
        # stalls the start for glibc's 5 s timeout (measured here in about 4 % of starts).
        self.store = dist.FileStore(store_file, world_size)
        self._snapshot()

    def _snapshot(self) -> None:
        torch = self.torch
        numpy = sys.modules.get("numpy")  # torch imports it when installed
        self.saved = (
            torch.get_rng_state(),
            random.getstate(),
            numpy.random.get_state() if numpy is not None else None,
            torch.get_default_dtype(),
            torch.get_default_device(),
            torch.is_grad_enabled(),
            (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
            torch.get_num_threads(),
            dict(os.environ),
            os.getcwd(),
            list(warnings.filters),
        )

    def _restore(self) -> None:
        torch = self.torch
        rng, py_rng, np_rng, dtype, device, grad, deterministic, threads, env, cwd, filters = self.saved
        torch.set_rng_state(rng)
        random.setstate(py_rng)
        if np_rng is not None:
            sys.modules["numpy"].random.set_state(np_rng)
        torch.set_default_dtype(dtype)
        if torch.get_default_device() != device:
            torch.set_default_device(None if device.type == "cpu" else device)
        torch.set_grad_enabled(grad)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if os.environ != env:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd)
        warnings.filters[:] = filters

    def _ensure_group(self, generation: int, timeout: float) -> None:
        dist = self.dist
        # The parent bumps the generation whenever a new group is due (timeout raised, group destroyed or
        # subgroups made), so a prefix of the store is never used twice: stale keys would mislead init.
        if self.generation == generation and dist.is_initialized():
            return
        self._drop_group()
        dist.init_process_group(
            self.backend,
            store=dist.PrefixStore(f"pg/{generation}", self.store),
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout),
        )
        self.generation = generation

    def _drop_group(self) -> None:
        with contextlib.suppress(Exception):
            if self.dist.is_initialized():
                self.dist.destroy_process_group()
        self.generation = None

    def _group_state(self) -> tuple[int | None, bool]:
        """(sequence number of the default group, whether it can be kept for the next call)."""
        dist = self.dist
        if not dist.is_initialized():
            return None, False
        c10d = dist.distributed_c10d
        if len(c10d._world.pg_map) != 1:  # the test created subgroups: start the next one clean
            return None, False
        try:
            return c10d._get_default_group()._get_sequence_number_for_group(), True
        except Exception:  # noqa: BLE001 - no sequence number: rebuild rather than guess
            return None, False

    def call(self, call_id: int, payload: bytes, generation: int, timeout: float, origin: str) -> bool:
        """Run one call and send its outcome; False when this rank must now exit (the call raised)."""
        import cloudpickle

        out, err = io.StringIO(), io.StringIO()
        outcome: dict = {"rank": self.rank, "status": "ok"}
        result = b""
        wlog: list = []
        try:
            self._ensure_group(generation, timeout)
            fn, args, kwargs = cloudpickle.loads(payload)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    rank_warnings.recording() as wlog:
                value = fn(*args, **kwargs)
            try:
                result = cloudpickle.dumps(value)
            except Exception as exc:  # noqa: BLE001
                outcome.update(status="error", error=f"the return value could not be pickled: {_describe(exc)}")
        except BaseException as exc:  # noqa: BLE001 - SystemExit and pytest outcomes are outcomes too
            outcomes_mod = sys.modules.get("_pytest.outcomes")
            skip = outcomes_mod is not None and isinstance(exc, outcomes_mod.Skipped)
            outcome.update(
                status="skip" if skip else "error",
                error=getattr(exc, "msg", None) or str(exc) if skip else _describe(exc),
                traceback="" if skip else _format_traceback(exc, origin),
            )
        outcome["stdout"], outcome["stderr"] = out.getvalue(), err.getvalue()
        if outcome["status"] == "error":  # shown with the error; re-issued, they could mask it
            outcome["stderr"] += rank_warnings.as_text(wlog)
        else:
            outcome["warnings"] = rank_warnings.records(wlog)
        if outcome["status"] == "error":
            self.conn.send(("result", call_id, outcome, result, None, False))
            return False
        seq, keep = self._group_state()
        if not keep:  # subgroups or a destroyed group: start the next call on a fresh one
            self._drop_group()
        self.conn.send(("result", call_id, outcome, result, seq, keep))
        self._restore()  # after the reply (off the caller's path), always before the next call is read
        return True

    def serve(self) -> None:
        """Run calls until the parent goes away (it ends ranks with SIGKILL) or a call raised."""
        self.conn.send(("ready", os.getpid()))
        while True:
            try:
                _, call_id, payload, generation, timeout, sys_path, origin = self.conn.recv()
            except (EOFError, OSError):
                return
            if sys.path != sys_path:  # pytest inserts test folders as it collects them
                sys.path[:] = sys_path
            if not self.call(call_id, payload, generation, timeout, origin):
                return


def serve(conn: Connection, rank: int, world_size: int, backend: str, store_file: str, stack_file: str) -> None:
    """Be rank ``rank`` of ``world_size``: open the pool's store, then run calls sent on ``conn``.

    Called in a process just forked from the zygote, with stdout and stderr already on the rank's log.
    Returns when the parent goes away or after a call that raised; the caller
    then ends the process with ``os._exit`` (gloo threads may still hold the store at teardown).
    """
    dump = open(stack_file, "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    faulthandler.enable(file=sys.stderr, all_threads=True)  # a segfault leaves its stack in the log
    kind, init = conn.recv()
    assert kind == "init"
    sys.path[:] = init["sys_path"]
    os.chdir(init["cwd"])
    _Rank(conn, rank, world_size, backend, store_file).serve()
    conn.close()
