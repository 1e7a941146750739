"""The object a test gets from the ``dist_world`` fixture, and the per-session registry of pools."""

from __future__ import annotations

import os
from typing import Any, Callable

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.ranks.errors import RankError, spawn_error
from pytest_distcheck.ranks.pool import RankPool
from pytest_distcheck.ranks.tempdirs import SessionFolder
from pytest_distcheck.ranks.zygote import Zygote

DEBUG_LEVELS = ("OFF", "INFO", "DETAIL")
# spawn's arguments that mp.spawn takes but the pool cannot honour.
NO_JOIN = N_("dist_world.spawn(join=False) is not supported: the call waits for every rank; drop join=False (and "
             "the context's join())")
ARGS_NOT_A_TUPLE = N_("dist_world.spawn(args=...) takes a tuple, as mp.spawn does; got {type}")
BAD_NPROCS = N_("dist_world.spawn(nprocs=...) needs a whole number >= 1, got {nprocs!r}")


class RankGroup:
    """A process group of ``world_size`` ranks that a test runs functions on.

    Attributes:
        world_size: number of ranks.
        backend: the ``torch.distributed`` backend (``gloo`` on CPU).
        timeout: default seconds a ``run`` may take.
        debug: the ranks' ``TORCH_DISTRIBUTED_DEBUG`` level (``OFF``, ``INFO``, ``DETAIL``), or ``None``
            for the session's (the environment pytest started with) unless the test itself set the
            variable (``monkeypatch.setenv``): then each call runs on ranks started with that level.
        fresh: ``@pytest.mark.fresh_ranks``: the first call on each world size and debug level restarts
            that pool's ranks (whatever size ``spawn(nprocs=)`` or level ``monkeypatch`` selects).
        outer: returns pytest-timeout's (``time.monotonic()`` deadline, seconds) for the test, or None;
            read at each call, which is capped before that deadline (``RankPool.run``'s ``outer``).
    """

    def __init__(self, registry: PoolRegistry, world_size: int, backend: str, timeout: float,
                 debug: str | None = None, live: bool = False, nodeid: str = "",
                 check: Callable[[], None] | None = None, fresh: bool = False,
                 outer: Callable[[], tuple[float, float] | None] | None = None) -> None:
        self._registry = registry
        self.world_size = world_size
        self.backend = backend
        self.timeout = timeout
        self.debug = debug
        self._live = live
        self._nodeid = nodeid
        self._check = check
        self._outer = outer
        self._fresh: set[tuple[int, str]] | None = set() if fresh else None  # (size, level) restarted

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank, with ``torch.distributed`` initialised.

        Inside ``fn``, ``torch.distributed.get_rank()`` and ``get_world_size()`` work as under
        torchrun. ``fn`` may be a module-level function, a nested function or a lambda from the test
        module (sent by value); arguments and results travel by pickling, tensors included. The test's
        environment and working directory apply in the ranks for the call
        (:mod:`pytest_distcheck.ranks.context` lists what is carried).

        Args:
            timeout: seconds for this call (default: the fixture's, 60 s unless configured).

        Returns:
            The per-rank return values, in rank order.

        Raises:
            RankError: any rank raised (every rank's outcome, traceback and output in the message).
            RankTimeout: ranks did not finish in time; they were stack-dumped and killed.
            PicklingError: ``fn``, an argument or a result could not be pickled.
        """
        __tracebackhide__ = True
        return self._call(fn, args, kwargs, timeout, self.world_size, pass_rank=False)

    def spawn(self, fn: Callable[..., Any], args: tuple = (), nprocs: int | None = None, join: bool = True,
              daemon: bool = False, start_method: str = "spawn", timeout: float | None = None) -> list[Any]:
        """``torch.multiprocessing.spawn`` on the pool: call ``fn(rank, *args)`` on every rank.

        For suites written for ``mp.spawn``: replace ``mp.spawn(fn, args=..., nprocs=n)`` by
        ``dist_world.spawn(fn, args=..., nprocs=n)``. ``fn``'s own ``init_process_group`` is a no-op on the
        pool's group (compatible arguments) and hard-coded ``MASTER_ADDR``/``MASTER_PORT`` are unused.
        ``daemon`` and ``start_method`` are accepted and ignored (the ranks are the pool's processes).

        Args:
            nprocs: number of ranks (default: the fixture's world size).
            timeout: seconds for the call (default: the fixture's).

        Returns:
            ``fn``'s per-rank return values, in rank order (``mp.spawn`` returns None).

        Raises:
            TypeError: ``join=False`` (the pool always waits) or ``args`` is not a tuple or list.
            RankError, RankTimeout, PicklingError: as :meth:`run`; a ``RankError`` for a rank that raised is
                also a ``torch.multiprocessing.ProcessRaisedException``, as ``mp.spawn`` raises
                (:func:`~pytest_distcheck.ranks.errors.spawn_error`).
        """
        __tracebackhide__ = True
        if not join:
            raise TypeError(_(NO_JOIN))
        if not isinstance(args, (tuple, list)):
            raise TypeError(_(ARGS_NOT_A_TUPLE).format(type=type(args).__name__))
        size = self.world_size if nprocs is None else nprocs
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(_(BAD_NPROCS).format(nprocs=nprocs))
        try:
            return self._call(fn, tuple(args), {}, timeout, size, pass_rank=True)
        except RankError as exc:
            raise spawn_error(exc) from None

    def _call(self, fn, args, kwargs, timeout, size, pass_rank) -> list[Any]:
        __tracebackhide__ = True
        if self._check is not None:
            self._check()
        debug = self.debug
        if debug is None:  # set by the test itself (monkeypatch): ranks that imported torch with it
            env = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
            if env != self._registry.base_env.get("TORCH_DISTRIBUTED_DEBUG") and env:
                debug = env.upper() if env.upper() in DEBUG_LEVELS else None
        if self._fresh is not None:
            key = (size, _level(self._registry.base_env, debug))
            if key not in self._fresh:
                self._fresh.add(key)
                self._registry.restart(size, self.backend, debug)
        pool = self._registry.get(size, self.backend, debug)
        return pool.run(fn, args, kwargs, timeout=self.timeout if timeout is None else timeout,
                        live=self._live, pass_rank=pass_rank, nodeid=self._nodeid,
                        outer=self._outer() if self._outer is not None else None)


def _level(env: dict[str, str], debug: str | None) -> str:
    return (debug or env.get("TORCH_DISTRIBUTED_DEBUG") or "OFF").upper()


class PoolRegistry:
    """One :class:`RankPool` per (world size, backend, debug level) in this pytest process.

    Pools of one debug level fork from one zygote, started with that ``TORCH_DISTRIBUTED_DEBUG`` (torch
    reads it at import) in ``base_env``. Files live in one session folder, locked while this process lives;
    folders of dead sessions (unlocked) are removed when a session first makes its own
    (:mod:`~pytest_distcheck.ranks.tempdirs`).

    Args:
        base_env: the session's environment, which every call's environment is diffed against (the
            plugin takes it at ``pytest_configure``, so a test's ``monkeypatch`` never becomes part of it).
        watch_pid: a process whose end should end the zygotes and ranks at once (the xdist controller).
    """

    def __init__(self, base_env: dict[str, str], watch_pid: int | None = None) -> None:
        self.plain_results = False  # see :meth:`plain_results_only`
        self._pools: dict[tuple[int, str, str], RankPool] = {}
        self._zygotes: dict[str, Zygote] = {}
        self.base_env = base_env
        self._watch_pid = watch_pid
        self._folder: SessionFolder | None = None

    def folder(self) -> str:
        """The session folder (made, locked, and dead sessions' folders swept, on first use)."""
        if self._folder is None:
            self._folder = SessionFolder()
        return self._folder.path

    def zygote(self, debug: str | None = None) -> Zygote:
        """The zygote of this debug level, started (not waited for) if it is not running."""
        level = _level(self.base_env, debug)
        zygote = self._zygotes.get(level)
        if zygote is None or not zygote.alive:
            if zygote is not None:
                self._drop_level(level)
            env = dict(self.base_env, TORCH_DISTRIBUTED_DEBUG=level) if debug else self.base_env
            zygote = self._zygotes[level] = Zygote(os.path.join(self.folder(), f"zygote-{level}.log"),
                                                   env=env, watch_pid=self._watch_pid)
        return zygote

    def plain_results_only(self) -> None:
        """From now on every pool, made or to be made, returns plain data only (``RankPool(plain_results=True)``)."""
        self.plain_results = True
        for pool in self._pools.values():
            pool.plain_results = True

    def get(self, world_size: int, backend: str, debug: str | None = None) -> RankPool:
        level = _level(self.base_env, debug)
        zygote = self.zygote(debug)
        key = (world_size, backend, level)
        pool = self._pools.get(key)
        if pool is None:
            folder = os.path.join(self.folder(), f"pool-{world_size}-{backend}-{level}")
            os.makedirs(folder, exist_ok=True)
            pool = self._pools[key] = RankPool(world_size, backend, zygote=zygote, base_env=self.base_env,
                                               folder=folder, debug_level=level,
                                               plain_results=self.plain_results)
        return pool

    def restart(self, world_size: int, backend: str, debug: str | None = None) -> None:
        """Stop the ranks of this key, if any; the next call forks fresh ones."""
        pool = self._pools.get((world_size, backend, _level(self.base_env, debug)))
        if pool is not None:
            pool.kill()

    def keep_levels(self, debugs: set[str | None]) -> None:
        """Stop the zygotes (and their pools) of debug levels no test in ``debugs`` asks for.

        ``debugs`` holds ``dist_debug`` levels as the tests give them (``None``: the session's own);
        an empty set stops them all and removes the session folder, as :meth:`close` does.
        """
        if not debugs:
            self.close()
            return
        wanted = {_level(self.base_env, d) for d in debugs}
        for level in [lv for lv in self._zygotes if lv not in wanted]:
            self._drop_level(level)

    def close(self) -> None:
        """Stop every rank and zygote, and remove the session folder (end of session; ``get`` starts anew)."""
        for level in list(self._zygotes):
            self._drop_level(level)
        if self._folder is not None:
            self._folder.remove()
            self._folder = None

    def _drop_level(self, level: str) -> None:
        for key in [k for k in self._pools if k[2] == level]:
            self._pools.pop(key).close()
        zygote = self._zygotes.pop(level, None)
        if zygote is not None:
            zygote.close()

