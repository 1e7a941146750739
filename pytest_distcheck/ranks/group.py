"""The object a test gets from the ``dist_world`` fixture, and the per-session registry of pools."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable

from pytest_distcheck.ranks.pool import RankPool
from pytest_distcheck.ranks.zygote import Zygote


class RankGroup:
    """A process group of ``world_size`` ranks that a test runs functions on.

    Attributes:
        world_size: number of ranks.
        backend: the ``torch.distributed`` backend (``gloo`` on CPU).
        timeout: default seconds a ``run`` may take.
    """

    def __init__(self, registry: PoolRegistry, world_size: int, backend: str, timeout: float) -> None:
        self._registry = registry
        self.world_size = world_size
        self.backend = backend
        self.timeout = timeout

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank, with ``torch.distributed`` initialised.

        Inside ``fn``, ``torch.distributed.get_rank()`` and ``get_world_size()`` work as under
        torchrun. ``fn`` may be a module-level function, a nested function or a lambda from the test
        module (sent by value); arguments and results travel by pickling, tensors included.

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
        pool = self._registry.get(self.world_size, self.backend)
        return pool.run(fn, args, kwargs, timeout=self.timeout if timeout is None else timeout)


class PoolRegistry:
    """One :class:`RankPool` per (world size, backend) in this pytest process, all forked from one zygote.

    Owned by a session-scoped fixture: the zygote starts (importing torch once) on first use, each pool
    forks its ranks on first use, and everything is closed at session end (and at interpreter exit,
    whatever ended the session).
    """

    def __init__(self) -> None:
        self._pools: dict[tuple[int, str], RankPool] = {}
        self._zygote: Zygote | None = None
        self._dir = tempfile.mkdtemp(prefix="distcheck-zygote-")

    def get(self, world_size: int, backend: str) -> RankPool:
        if self._zygote is None or not self._zygote.alive:
            self._stop()
            os.makedirs(self._dir, exist_ok=True)  # close() removed it
            self._zygote = Zygote(os.path.join(self._dir, "zygote.log"))
        key = (world_size, backend)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = RankPool(world_size, backend, zygote=self._zygote)
        return pool

    def restart(self, world_size: int, backend: str) -> None:
        """Stop the ranks of this key, if any; the next call forks fresh ones."""
        pool = self._pools.get((world_size, backend))
        if pool is not None:
            pool.kill()

    def close(self) -> None:
        """Stop every rank and the zygote, and remove their logs (end of session; ``get`` starts anew)."""
        self._stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _stop(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
