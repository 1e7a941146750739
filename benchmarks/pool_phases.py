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
  after 0.3 ms of busy work in this process, as pytest does between tests;
- the same round trip through each wake-up path a pool could use (:data:`WAKEUPS`: the pool's pipes,
  pipes with a short spin before blocking, a shared-memory word with futex signalling, blocking or after
  a spin), each echo process working 60 us per message as a rank's Python does, in ``--rounds``
  interleaved rounds; the variant to adopt is the one that beats the pipes in every round.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import platform
import select
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


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _read_byte(fd: int, spin_s: float) -> bytes:
    """One byte from the non-blocking ``fd``, polled for ``spin_s`` before blocking in ``select``."""
    end = time.perf_counter() + spin_s
    while True:
        try:
            return os.read(fd, 1)
        except BlockingIOError:
            if time.perf_counter() >= end:
                select.select([fd], [], [])


def _pipe_round_trips(n: int, spin_s: float, busy_s: float, child_s: float) -> list[float]:
    ends: list[tuple[int, int, int]] = []
    for _ in range(2):
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        pid = os.fork()
        if pid == 0:
            # the parent's ends (also of an earlier child's pipes) held open here: no EOF, no exit
            for fd in (from_parent, to_parent, *(fd for _, w, r in ends for fd in (w, r))):
                os.close(fd)
            os.set_blocking(to_child, False)
            while _read_byte(to_child, spin_s):
                _busy(child_s)
                os.write(from_child, b"x")
            os._exit(0)
        os.close(to_child)
        os.close(from_child)
        os.set_blocking(to_parent, False)
        ends.append((pid, from_parent, to_parent))
    times = []
    for _ in range(n):
        _busy(busy_s)
        t0 = time.perf_counter()
        for _, w, _ in ends:
            os.write(w, b"x")
        for _, _, r in ends:
            _read_byte(r, spin_s)
        times.append(time.perf_counter() - t0)
    for pid, w, r in ends:
        os.close(w)
        os.close(r)
        os.waitpid(pid, 0)
    return times


# futex(2) system call numbers; futex(uaddr, FUTEX_WAIT, val) sleeps while *uaddr == val.
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1


def _futex_round_trips(n: int, spin_s: float, busy_s: float, child_s: float) -> list[float]:
    """As :func:`_pipe_round_trips`, through one shared page: a request and a reply word per child, each a
    sequence number the other side waits on (spinning, then ``FUTEX_WAIT``) and wakes (``FUTEX_WAKE``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.mmap(-1, mmap.PAGESIZE, mmap.MAP_SHARED)
    base = ctypes.addressof(ctypes.c_char.from_buffer(page))
    words = [(base + 128 * i, base + 128 * i + 64) for i in range(2)]  # (request, reply), a cache line apart

    def futex(addr: int, op: int, val: int) -> None:
        libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), op, val, None, None, 0)

    def wait_change(addr: int, old: int) -> int:
        word = ctypes.c_int32.from_address(addr)
        end = time.perf_counter() + spin_s
        while (value := word.value) == old:
            if time.perf_counter() >= end:
                futex(addr, _FUTEX_WAIT, old)
        return value

    def post(addr: int, value: int) -> None:
        ctypes.c_int32.from_address(addr).value = value
        futex(addr, _FUTEX_WAKE, 1)

    pids = []
    for req, rep in words:
        pid = os.fork()
        if pid == 0:
            seen = 0
            while (seen := wait_change(req, seen)) >= 0:
                _busy(child_s)
                post(rep, seen)
            os._exit(0)
        pids.append(pid)
    times = []
    for k in range(1, n + 1):
        _busy(busy_s)
        t0 = time.perf_counter()
        for req, _ in words:
            post(req, k)
        for _, rep in words:
            while wait_change(rep, k - 1) != k:
                pass
        times.append(time.perf_counter() - t0)
    for req, _ in words:
        post(req, -1)
    for pid in pids:
        os.waitpid(pid, 0)
    return times


# (label, function, spin seconds before blocking): the pool's pipes first.
WAKEUPS = [
    ("pipes, blocking (the pool's path)", _pipe_round_trips, 0.0),
    ("pipes, spin 20 us then block", _pipe_round_trips, 20e-6),
    ("pipes, spin 100 us then block", _pipe_round_trips, 100e-6),
    ("shared memory + futex, blocking", _futex_round_trips, 0.0),
    ("shared memory + futex, spin 20 us then block", _futex_round_trips, 20e-6),
    ("shared memory + futex, spin 100 us then block", _futex_round_trips, 100e-6),
]


def round_trip_floor(n: int, busy_s: float = 0.0003) -> float:
    """Median seconds of one fan-out/fan-in of a byte to 2 forked processes over pipes, after ``busy_s`` of
    work here and none in them."""
    return statistics.median(_pipe_round_trips(n, 0.0, busy_s, 0.0))


def wakeup_paths(n: int, rounds: int, busy_s: float = 0.0004, child_s: float = 60e-6) -> list[dict]:
    """Each of :data:`WAKEUPS` (futex ones only where the system call number is known), ``rounds`` interleaved
    rounds of ``n`` round trips: ``label``, ``medians_s`` and ``p90s_s`` per round."""
    variants = [v for v in WAKEUPS if v[1] is _pipe_round_trips or _SYS_FUTEX is not None]
    out = [{"label": label, "medians_s": [], "p90s_s": []} for label, _, _ in variants]
    for _ in range(rounds):
        for row, (_, fn, spin) in zip(out, variants, strict=True):
            times = sorted(fn(n, spin, busy_s, child_s))
            row["medians_s"].append(statistics.median(times))
            row["p90s_s"].append(times[int(0.9 * (len(times) - 1))])
    return out


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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the wake-up paths")
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
        print(f"wake-up paths: a byte to 2 processes working 60 us each and back, after 0.4 ms busy "
              f"(median, p90 per round, us; {args.rounds} rounds of {n}):")
        for row in wakeup_paths(n, args.rounds):
            rounds = ", ".join(f"{m * 1e6:.0f}/{p * 1e6:.0f}" for m, p in zip(row["medians_s"], row["p90s_s"],
                                                                             strict=True))
            print(f"  {row['label']:46s} {rounds}")
        print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} logical CPUs")
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
