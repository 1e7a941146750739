"""The program one rank runs, in a process forked from the zygote: :func:`serve`.

It serves calls on a process group over a ``PrefixStore`` of the pool's store until its parent goes away; a rank
whose call raised reports, then exits (its peers fail fast). Every call runs in the test's context, undone after
it, and the state a test may change (RNGs, default dtype and device, grad mode, thread count, debug level,
environment, cwd, warnings filters, subgroups) is reset after it. A user's own ``init_process_group`` /
``destroy_process_group`` (``mp.spawn`` style) is served on the pool's store. Design record: docs/design/ranks.md.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import faulthandler
import importlib.abc
import importlib.util
import linecache
import multiprocessing
import os
import pickle
import random
import signal
import sys
import traceback
import types
import warnings
from datetime import timedelta
from multiprocessing.connection import Connection

from pytest_distcheck import i18n
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.ranks import rank_warnings
from pytest_distcheck.ranks.module_state import StateWatch, current_test

# What a rank says, in the language the pool gave it for the call (tests import these).
# A store the user passes to init_process_group that the other ranks cannot reach.
USER_HASH_STORE = N_("init_process_group(store=HashStore(...)): a HashStore lives in one process, and each rank is "
                     "a process of its own, so the ranks could never meet on it; pass a FileStore or TCPStore every "
                     "rank opens, or drop store= (dist_world's ranks already share a process group)")
# A user's init_process_group with arguments the pool's group cannot honour: USER_INIT, its {wrong} and {how}
# joined from the texts below.
USER_INIT = N_("init_process_group({wrong}): dist_world already set up the default process group. Remove the "
               "init_process_group call from the function (or pass only arguments that match); {how}.")
WRONG_BACKEND = N_("backend={backend!r} (the group is {group!r})")
HOW_BACKEND = N_("dist_world's ranks run {backend} on this machine's CPU")
HOW_WORLD_SIZE = N_("choose the world size with @pytest.mark.world_size(n) or dist_world.spawn(..., nprocs=n)")
WRONG_RANK = N_("rank={rank!r} (this process is rank {own})")
HOW_RANK = N_("each rank's number comes from the pool (spawn passes it as the first argument)")
NOT_PICKLED = N_("the return value could not be pickled: {error}")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _format_traceback(exc: BaseException, origin: str) -> str:
    """The traceback text, with the file name and source line of code that travelled by value."""
    tb = traceback.TracebackException.from_exception(exc)
    for te in _chain(tb):
        # The kit's own frame (this module, calling fn) says nothing about the test: start at fn.
        te.stack = traceback.StackSummary.from_list([fs for fs in te.stack if fs.filename != __file__])
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


@contextlib.contextmanager
def subgroup_timeout(dist, seconds: float):
    """While open, a process group made without a timeout gets ``seconds`` (the default group's).

    torch gives ``new_group``, ``new_subgroups``, ``split_group`` and ``DeviceMesh`` groups made without a
    timeout its backend default (30 min for gloo, 10 min for NCCL), not the default group's; so under a
    call timeout above that, gloo's "Timed out waiting" on a subgroup would beat the kit's ``RankTimeout``.
    All of them (and ``monitored_barrier`` without a timeout) ask ``distributed_c10d._get_default_timeout``
    (read in torch 2.13.0's distributed_c10d.py; there since pytorch/pytorch#110947, torch 2.2), which is
    replaced while open; a timeout the user passes is kept.

    Args:
        dist: the imported ``torch.distributed``.
        seconds: the timeout, seconds.
    """
    c10d = dist.distributed_c10d
    torch_default = getattr(c10d, "_get_default_timeout", None)
    if torch_default is None:  # a private name: where it is gone, subgroups keep torch's default
        yield
        return
    timeout = timedelta(seconds=seconds)
    c10d._get_default_timeout = lambda backend: timeout
    try:
        yield
    finally:
        c10d._get_default_timeout = torch_default


def _group_count(dist) -> int | None:
    """How many process groups c10d has named so far (``_world.group_count``, torch 2.5..2.13; None where
    gone). ``new_group`` (without ``use_local_synchronization``) counts on every rank, members or not."""
    return getattr(getattr(dist.distributed_c10d, "_world", None), "group_count", None)


class _RewritingFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules pytest rewrote in the parent through pytest's own assertion rewriting."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def find_spec(self, name, path=None, target=None):
        file = self.paths.get(name)
        if file is None or not os.path.isfile(file):
            return None
        return importlib.util.spec_from_file_location(name, file, loader=self)

    def is_package(self, name: str) -> bool:
        return os.path.basename(self.paths.get(name, "")) == "__init__.py"

    def create_module(self, spec):
        return None

    def get_resource_reader(self, name: str):
        # Without it importlib.resources sees an "orphan" module and cannot read the files beside it.
        from importlib.readers import FileReader

        return FileReader(types.SimpleNamespace(path=self.paths[name]))

    def exec_module(self, module) -> None:
        from _pytest.assertion.rewrite import rewrite_asserts

        file = module.__spec__.origin
        with open(file, "rb") as f:
            source = f.read()
        tree = ast.parse(source, filename=file)
        rewrite_asserts(tree, source, file, None)
        exec(compile(tree, file, "exec", dont_inherit=True), module.__dict__)  # noqa: S102


class NumpyRng:
    """NumPy's global RNG (``numpy.random.seed``, ``rand``...): saved now, put back by :meth:`restore`.

    ``numpy.random.set_state`` costs 35-70 us (measured with numpy 2.4 on the benchmark machine) and ran
    after every call, competing for the 2 cores with the pytest process and the other rank: it alone
    added about 0.1 ms to a call (benchmarks/README.md). So :meth:`restore` first compares the raw bytes
    of the MT19937 state struct (``uint32 key[624]; int pos``, numpy/random/src/mt19937/mt19937.h, at
    ``get_bit_generator().ctypes.state_address``; about 1 us) and calls ``set_state`` only when they
    moved. The layout is checked once against ``get_state``; where it does not match (another numpy, a
    saved state with a cached Gaussian) every restore calls ``set_state``, as before.

    Args:
        numpy: the imported ``numpy`` module.
    """

    _SIZE = 624 * 4 + 4

    def __init__(self, numpy) -> None:
        self.numpy = numpy
        self.saved = numpy.random.get_state()
        self._raw: bytes | None = None
        with contextlib.suppress(Exception):  # any surprise: no fast path
            bitgen = numpy.random.get_bit_generator()  # numpy >= 1.25
            name, key, pos, has_gauss = self.saved[:4]
            expected = numpy.ascontiguousarray(key, dtype=numpy.uint32).tobytes() + int(pos).to_bytes(
                4, sys.byteorder, signed=True)
            raw = ctypes.string_at(bitgen.ctypes.state_address, self._SIZE)
            # A state without a cached Gaussian changes its key or pos whenever a draw fills the cache.
            if name == "MT19937" and not has_gauss and raw == expected:
                self._bitgen, self._address, self._raw = bitgen, bitgen.ctypes.state_address, raw

    def restore(self) -> None:
        """Put the saved state back (a no-op when nothing drew from it or reseeded it)."""
        if (self._raw is not None and self.numpy.random.get_bit_generator() is self._bitgen
                and ctypes.string_at(self._address, self._SIZE) == self._raw):
            return
        self.numpy.random.set_state(self.saved)


class _Rank:
    def __init__(self, conn: Connection, rank: int, world_size: int, backend: str, store_file: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.conn, self.rank, self.world_size, self.backend = conn, rank, world_size, backend
        self.generation: int | None = None
        self.timeout = 0.0  # seconds: the current group's timeout
        self.group_count: int | None = None  # c10d's count of groups made, when the pool made its group
        self.reinits = 0  # groups the user's own init_process_group built during this call
        self.state = StateWatch()
        self.rewriter = _RewritingFinder()
        sys.meta_path.insert(0, self.rewriter)
        self._tolerate_user_init()
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
            NumpyRng(numpy) if numpy is not None else None,
            torch.get_default_dtype(),
            torch.get_default_device(),
            torch.is_grad_enabled(),
            (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
            torch.get_num_threads(),
            self.dist.get_debug_level(),
            dict(os.environ._data),  # raw bytes: compared in microseconds, unlike os.environ
            os.getcwd(),
            list(warnings.filters),
        )

    def _restore(self) -> None:
        torch = self.torch
        rng, py_rng, np_rng, dtype, device, grad, deterministic, threads, debug, env, cwd, filters = self.saved
        torch.set_rng_state(rng)
        random.setstate(py_rng)
        if np_rng is not None:
            np_rng.restore()
        torch.set_default_dtype(dtype)
        if torch.get_default_device() != device:
            torch.set_default_device(None if device.type == "cpu" else device)
        torch.set_grad_enabled(grad)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if self.dist.get_debug_level() != debug:
            self.dist.set_debug_level(debug)
        raw = os.environ._data
        if raw != env:  # only the keys that differ: pytest changes PYTEST_CURRENT_TEST for every test
            for key in [k for k in raw if k not in env]:
                del os.environb[key]  # (os.environb shares the raw mapping and calls unsetenv/putenv)
            for key, value in env.items():
                if raw.get(key) != value:
                    os.environb[key] = value
        os.chdir(cwd)
        warnings.filters[:] = filters

    def _ensure_group(self, generation: int, timeout: float) -> None:
        dist = self.dist
        # The parent bumps the generation whenever a new group is due (timeout raised, group destroyed or
        # subgroups made), so a prefix of the store is never used twice: stale keys would mislead init.
        if self.generation == generation and dist.is_initialized():
            return
        self._drop_group()
        self._init(f"pg/{generation}", timeout)
        self.generation = generation
        self.timeout = timeout

    def _init(self, prefix: str, timeout: float) -> None:
        dist = self.dist
        self._orig_init(self.backend, store=dist.PrefixStore(prefix, self.store), rank=self.rank,
                        world_size=self.world_size, timeout=timedelta(seconds=timeout))
        self.group_count = _group_count(dist)
        # gloo's connect returns on one rank before its peer's has finished: user code that destroys the
        # group at once would close a socket the peer is still connecting ("Gloo connectFullMesh failed
        # ... Connection closed by peer" on the peer, in its set-up, seen in .ci/run).
        self._all_arrive(f"{prefix}/up", timeout)

    def _drop_group(self) -> None:
        with contextlib.suppress(Exception):
            if self.dist.is_initialized():
                self._orig_destroy()
        self.generation = None

    def _tolerate_user_init(self) -> None:
        """Replace ``init_process_group`` (in ``torch.distributed`` and ``distributed_c10d``) for user code."""
        dist = self.dist
        c10d = dist.distributed_c10d
        self._orig_init, self._orig_destroy = c10d.init_process_group, c10d.destroy_process_group
        me = self

        def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                               store=None, group_name="", pg_options=None, device_id=None, **kwargs):
            """The pool's stand-in: the group is the pool's; a second init is a no-op when compatible; a
            user's store is honoured."""
            me.check_user_init(backend, world_size, rank)
            if store is not None:
                me.init_on_user_store(store, timeout)
            elif not dist.is_initialized():  # the user destroyed it earlier in this call: rebuild on our store
                me.reinits += 1
                prefix = f"pg/{me.generation}/user{me.reinits}"
                me._all_arrive(prefix, me.timeout)
                me._init(prefix, me.timeout)

        init_process_group.__wrapped__ = self._orig_init
        dist.init_process_group = c10d.init_process_group = init_process_group

    def _all_arrive(self, prefix: str, timeout: float) -> None:
        """Wait on the store, at most ``timeout`` seconds, until every rank reached ``prefix``: before a rank
        connects a new group (every peer's old one destroyed) and after (every peer connected)."""
        self.store.set(f"{prefix}/arrived/{self.rank}", b"1")
        self.store.wait([f"{prefix}/arrived/{r}" for r in range(self.world_size)], timedelta(seconds=timeout))

    def init_on_user_store(self, store, timeout: timedelta | None) -> None:
        """Replace the group by one on the user's ``store`` (for this call; the next one gets the pool's).

        Raises:
            RuntimeError: ``store`` is a ``HashStore`` (:data:`USER_HASH_STORE`).
        """
        dist = self.dist
        if isinstance(store, dist.HashStore):
            raise RuntimeError(_(USER_HASH_STORE))
        self.reinits += 1
        prefix = f"pg/{self.generation}/user{self.reinits}"
        self._all_arrive(prefix, self.timeout)  # every rank is here: none still uses the group being replaced
        if dist.is_initialized():
            self._orig_destroy()
        self._orig_init(self.backend, store=store, rank=self.rank, world_size=self.world_size,
                        timeout=timeout if timeout is not None else timedelta(seconds=self.timeout))
        self._all_arrive(f"{prefix}/up", self.timeout)  # as _init: no rank runs on before every peer connected

    def check_user_init(self, backend, world_size, user_rank) -> None:
        wrong, how = [], []
        if backend is not None and str(backend).split(":")[-1].lower() not in (self.backend, "undefined"):
            wrong.append(_(WRONG_BACKEND).format(backend=backend, group=self.backend))
            how.append(_(HOW_BACKEND).format(backend=self.backend))
        if world_size not in (None, -1, self.world_size):
            wrong.append(ngettext("world_size={world_size!r} (the group has {n} rank)",
                                  "world_size={world_size!r} (the group has {n} ranks)", self.world_size).format(
                world_size=world_size, n=self.world_size))
            how.append(_(HOW_WORLD_SIZE))
        if user_rank not in (None, -1, self.rank):
            wrong.append(_(WRONG_RANK).format(rank=user_rank, own=self.rank))
            how.append(_(HOW_RANK))
        if wrong:
            raise RuntimeError(_(USER_INIT).format(wrong=", ".join(wrong), how="; ".join(how)))

    def _group_state(self) -> tuple[int | None, bool]:
        """(sequence number of the default group, whether it can be kept for the next call).

        No number (None) once the call made subgroups, on every rank: a member's ``pg_map`` grew, while
        ``new_group`` leaves a non-member's unchanged but still counts the group (``_world.group_count``).
        """
        dist = self.dist
        if not dist.is_initialized() or self.reinits:
            return None, False
        c10d = dist.distributed_c10d
        if len(c10d._world.pg_map) != 1 or _group_count(dist) != self.group_count:
            return None, False  # the test created subgroups: start the next one clean
        try:
            return c10d._get_default_group()._get_sequence_number_for_group(), True
        except Exception:  # noqa: BLE001 - no sequence number: rebuild rather than guess
            return None, False

    def _enter(self, ctx: dict) -> None:
        """Apply the test's context: environment diff, working directory, language, modules to assertion-rewrite."""
        set_, unset = ctx["env"]
        if ctx["lang"] != i18n.language():
            i18n.use(ctx["lang"])
        for key in unset:
            os.environ.pop(key, None)
        os.environ.update(set_)
        os.chdir(ctx["cwd"])
        if ctx.get("rewrite") is not None:
            self.rewriter.paths = ctx["rewrite"]

    def call(self, call_id: int, payload: bytes, generation: int, timeout: float, origin: str, ctx: dict) -> bool:
        """Run one call and send its outcome; False when this rank must now exit (the call raised).

        The outcome's ``phase`` says where an error came from: ``setup`` (the context or the group,
        before any user code: a peer that failed at once makes this rank's group set-up fail) or ``call``.
        """
        import cloudpickle

        outcome: dict = {"rank": self.rank, "status": "ok"}
        result = b""
        wlog: list = []
        phase = "setup"
        self.reinits = 0
        left = self.state.note()  # state an earlier call left, for this call's error
        try:
            self._enter(ctx)
            self._ensure_group(generation, timeout)
            phase = "call"
            fn, args, kwargs = cloudpickle.loads(payload)
            with rank_warnings.recording() as wlog, subgroup_timeout(self.dist, self.timeout):
                value = fn(self.rank, *args, **kwargs) if ctx.get("pass_rank") else fn(*args, **kwargs)
            try:
                result = cloudpickle.dumps(value)
            except Exception as exc:  # noqa: BLE001
                outcome.update(status="error", error=_(NOT_PICKLED).format(error=_describe(exc)))
        except BaseException as exc:  # noqa: BLE001 - SystemExit and pytest outcomes are outcomes too
            outcomes_mod = sys.modules.get("_pytest.outcomes")
            skip = outcomes_mod is not None and isinstance(exc, outcomes_mod.Skipped)
            outcome.update(
                status="skip" if skip else "error",
                error=getattr(exc, "msg", None) or str(exc) if skip else _describe(exc),
                traceback="" if skip else _format_traceback(exc, origin),
                phase=phase,
            )
            if left and not skip:
                outcome["note"] = left
        if outcome["status"] == "error":  # shown with the error; re-issued, they could mask it
            with contextlib.suppress(Exception):
                sys.stderr.write(rank_warnings.as_text(wlog))
        else:
            outcome["warnings"] = rank_warnings.records(wlog)
        with contextlib.suppress(Exception):  # the pool reads the rank's files once the reply is in
            sys.stdout.flush()
            sys.stderr.flush()
        if outcome["status"] == "error":
            self._reply(call_id, outcome, result, None, False)
            return False
        # A group not kept (subgroups, or the user's own init/destroy) is dropped when the next call
        # starts (the parent bumps the generation), not now: only then has every rank replied. Dropped
        # here, it closed sockets a slower peer was still connecting in new_group ("Gloo connectFullMesh
        # failed ... Connection closed by peer", about 1 call in 50 on 2 busy cores).
        seq, keep = self._group_state()
        self.state.after_call(current_test())
        self._reply(call_id, outcome, result, seq, keep)
        self._restore()  # after the reply (off the caller's path), always before the next call is read
        return True

    def _reply(self, *fields) -> None:
        # pickle.dumps and send_bytes: Connection.send's ForkingPickler costs more, for plain data
        self.conn.send_bytes(pickle.dumps(("result", *fields), pickle.HIGHEST_PROTOCOL))

    def serve(self) -> None:
        """Run calls until the parent goes away (it ends ranks with SIGKILL) or a call raised."""
        self.conn.send(("ready", os.getpid()))
        while True:
            try:
                _, call_id, payload, generation, timeout, sys_path, origin, ctx = pickle.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                return
            if sys.path != sys_path:  # pytest inserts test folders as it collects them
                sys.path[:] = sys_path
            if not self.call(call_id, payload, generation, timeout, origin, ctx):
                return


def serve(conn: Connection, rank: int, world_size: int, backend: str, store_file: str, stack_file: str) -> None:
    """Be rank ``rank`` of ``world_size``: open the pool's store, then run calls sent on ``conn``.

    Called in a process just forked from the zygote, with stdout and stderr already on the rank's files.
    The first message (``init``) gives pytest's ``sys.path``, cwd, ``multiprocessing`` authkey (so
    Manager proxies passed as arguments connect as in ``mp.spawn``'s children; the key is never logged) and
    the language the rank's messages speak (:mod:`pytest_distcheck.i18n`).
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
    # pytest's authkey: a multiprocessing Manager proxy passed in a call authenticates with it
    multiprocessing.current_process().authkey = init["authkey"]
    i18n.use(init["lang"])  # the zygote it was forked from never chose a language; each call may change it
    _Rank(conn, rank, world_size, backend, store_file).serve()
    conn.close()
