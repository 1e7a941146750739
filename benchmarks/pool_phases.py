"""Where one ``dist_world.run`` call spends its time: the pool's phases, timed in-process, no pytest.

Run (from the repository root; about 20 seconds)::

    .venv/bin/python benchmarks/pool_phases.py

Starts a 2-rank :class:`~pytest_distcheck.ranks.pool.RankPool` and prints medians of ``--calls`` calls:

- the whole call, for a function that does nothing and for the benchmark's all-reduce check;
- the all-reduce itself, timed inside rank 0 (gloo between two processes: the test's own work);
- the pytest process's own phases (pickling the call, the environment diff, sending, reading the
  ranks' output files, unpickling results), timed by wrapping the pool's functions; what is left of
  ``_collect`` is waiting for the ranks (their work plus waking up processes on the shared cores);
- a rank's ``_restore`` (the per-call state reset, after the reply, off the caller's path but on
  the same 2 cores), timed inside the rank;
- the floor under any design that keeps rank processes: one byte written to each of 2 plain forked
  processes and one read back from each (``os.write``/``os.read`` on pipes, no Python objects sent),
  after 0.3 ms of busy work in this process, as pytest does between tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any, Callable
from unittest import mock

from pytest_distcheck.ranks import pool as pool_mod


def noop() -> None:
    return None


def all_reduce_check() -> None:
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size()


def timed_all_reduce() -> float:
    import torch
    import torch.distributed as dist

    t0 = time.perf_counter()
    t = torch.ones(1)
    dist.all_reduce(t)
    return time.perf_counter() - t0


def timed_restore(n: int) -> float:
    """Median seconds of the rank's own per-call state reset (found among the rank's live objects)."""
    import gc

    rank = next(o for o in gc.get_objects() if type(o).__name__ == "_Rank")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        rank._restore()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _echo_byte(r: int, w: int) -> None:
    while os.read(r, 1):
        os.write(w, b"x")
    os._exit(0)


def round_trip_floor(n: int, busy_s: float = 0.0003) -> float:
    """Median seconds of one fan-out/fan-in of a byte to 2 forked processes, after ``busy_s`` of work."""
    ends: list[tuple[int, int, int]] = []
    for _ in range(2):
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        pid = os.fork()
        if pid == 0:
            # the parent's ends (also of an earlier child's pipes) held open here: no EOF, no exit
            for fd in (from_parent, to_parent, *(fd for _, w, r in ends for fd in (w, r))):
                os.close(fd)
            _echo_byte(to_child, from_child)
        os.close(to_child)
        os.close(from_child)
        ends.append((pid, from_parent, to_parent))
    times = []
    for _ in range(n):
        end = time.perf_counter() + busy_s
        while time.perf_counter() < end:
            pass
        t0 = time.perf_counter()
        for _, w, _ in ends:
            os.write(w, b"x")
        for _, _, r in ends:
            os.read(r, 1)
        times.append(time.perf_counter() - t0)
    for pid, w, r in ends:
        os.close(w)
        os.close(r)
        os.waitpid(pid, 0)
    return statistics.median(times)


def _median_ms(pool: pool_mod.RankPool, fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        pool.run(fn, (), {}, 60)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _wrap(stack: ExitStack, obj: Any, name: str, into: dict[str, list[float]]) -> None:
    """Time ``obj.name`` into ``into[name]`` until ``stack`` closes (then the original is back: the
    script also runs inside the test suite, whose later tests must see the kit's own functions)."""
    inner = getattr(obj, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            into.setdefault(name, []).append(time.perf_counter() - t0)

    stack.enter_context(mock.patch.object(obj, name, timed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per measurement")
    args = parser.parse_args(argv)
    n = args.calls
    pool = pool_mod.RankPool(2)
    try:
        t0 = time.perf_counter()
        pool.run(noop, (), {}, 60)
        print(f"first call (zygote's torch import, fork, group set-up): {time.perf_counter() - t0:.2f} s")
        print(f"call, function that does nothing: {_median_ms(pool, noop, n):.3f} ms (median of {n})")
        print(f"call, all-reduce check:           {_median_ms(pool, all_reduce_check, n):.3f} ms")
        inside = statistics.median(pool.run(timed_all_reduce, (), {}, 60)[0] for _ in range(n))
        print(f"  the all-reduce inside rank 0:   {inside * 1e3:.3f} ms")
        phases: dict[str, list[float]] = {}
        with ExitStack() as stack:
            for name in ("dump_call", "rewritten_modules"):
                _wrap(stack, pool_mod, name, phases)
            for name in ("_collect", "_finish"):
                _wrap(stack, pool, name, phases)
            _wrap(stack, pool._env, "diff", phases)
            for conn in pool._conns:
                _wrap(stack, conn, "send_bytes", phases)
            for output in pool._outputs:
                _wrap(stack, output, "call_text", phases)
            _median_ms(pool, noop, n)
        print("pytest process, per call of the function that does nothing (medians):")
        for name, times in phases.items():
            per_call = len(times) // n
            print(f"  {name:18s} {statistics.median(times) * 1e6:7.1f} us" + (f" x {per_call}" if per_call > 1 else ""))
        restore = pool.run(timed_restore, (4 * n,), {}, 60)
        print(f"rank's state reset after each call: {statistics.median(restore) * 1e6:.1f} us")
        floor = round_trip_floor(n)
        print(f"floor: a byte to 2 plain processes and back, after 0.3 ms busy: {floor * 1e6:.1f} us")
        print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} logical CPUs")
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
