"""Benchmark: the same trivial 2-rank gloo all-reduce test, N times, under each way of running it.

Run (from the repository root; about 3 minutes on 2 cores)::

    .venv/bin/python benchmarks/rank_pool.py --out benchmarks/results/rank_pool.json

Each harness runs as its own ``pytest`` session in a fresh process, one after the other, on the same
machine:

- ``pool``: this kit's ``dist_world`` fixture (ranks forked once from a zygote, group kept);
- ``pool-noop``: ``dist_world.run`` of a function that does nothing (the pool's dispatch without the
  test's all-reduce: where the pool's per-test time goes);
- ``pool-noop-bare``: the same in a module that does not import torch (the pytest process never holds it);
- ``pool-fresh``: the same with ``@pytest.mark.fresh_ranks`` on every test (new ranks each test);
- ``spawn``: ``torch.multiprocessing.spawn`` of 2 ranks per test, ``env://`` on a free port;
- ``mptc``: ``torch.testing._internal.common_distributed.MultiProcessTestCase`` (spawn per test);
- ``mpct``: ``MultiProcContinuousTest`` (one pool and group per test class);
- ``mttc``: ``MultiThreadedTestCase`` (threads and the in-process "threaded" group, no gloo);
- ``torch-local``: the same tests without ranks, in a module that imports torch (the session
  ``dist_world``'s start-up is measured against: issue 15's target is at most 0.5 s over it);
- ``trivial``: a test that does nothing, in a module without torch (pytest's own per-test cost);
- ``trivial-torch``: the same in a module that imports torch (pytest's per-test cost in a process that
  holds torch: its logging plugin attaches a handler to each of torch's non-propagating loggers in every
  test phase, and garbage collection walks torch's objects).

Every module of a torch harness imports torch at its top, as a learner's test module does: a session
whose pytest process never imports torch would hide the cost of two torch imports on two cores.
Every test body all-reduces a one-element tensor over 2 ranks and checks the sum, so a test's time
is the harness's overhead. Measured per test: setup + call + teardown as pytest reports them. The
start-up cost is the first test's time minus the median of the others; the session wall time is
the whole ``pytest`` process (interpreter start, imports, collection included). The slow per-test
harnesses run fewer tests (``--slow-tests``); their 100-test suite is extrapolated as
``wall + (100 - n) * median`` and marked so. ``OMP_NUM_THREADS=1`` for every harness.
The torch harnesses need the ``expecttest`` package (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

from pytest_distcheck.phase35.hostinfo import describe_host

SUITE = 100

# The conftest of every session: per-test durations (setup + call + teardown) to a JSON file.
TIMING_CONFTEST = '''
import json, os

_TIMES = {}
_OUTCOMES = {}

def pytest_runtest_logreport(report):
    _TIMES[report.nodeid] = _TIMES.get(report.nodeid, 0.0) + report.duration
    if report.outcome != "passed":
        _OUTCOMES[report.nodeid] = report.outcome
    elif report.when == "call":
        _OUTCOMES.setdefault(report.nodeid, "passed")

def pytest_sessionfinish(session):
    with open(os.environ["BENCH_TIMES"], "w") as f:
        json.dump({"durations_s": list(_TIMES.values()), "outcomes": list(_OUTCOMES.values())}, f)
'''

BODY = '''
def all_reduce_check():
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size()
'''

HARNESSES = {
    "pool": ("dist_world (this kit)", BODY + '''
import pytest
import torch  # noqa: F401 - at the top, as in a learner's module: the pytest process holds torch

@pytest.mark.parametrize("i", range(N))
def test_all_reduce(dist_world, i):
    dist_world.run(all_reduce_check)
'''),
    "pool-noop": ("dist_world, call without a collective", '''
import pytest
import torch  # noqa: F401

def noop():
    return None

@pytest.mark.parametrize("i", range(N))
def test_noop(dist_world, i):
    dist_world.run(noop)
'''),
    "pool-fresh": ("dist_world + @fresh_ranks", BODY + '''
import pytest
import torch  # noqa: F401

@pytest.mark.fresh_ranks
@pytest.mark.parametrize("i", range(N))
def test_all_reduce(dist_world, i):
    dist_world.run(all_reduce_check)
'''),
    "spawn": ("mp.spawn per test", BODY + '''
import os
import socket

import pytest
import torch
import torch.distributed as dist

def _rank(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    all_reduce_check()
    dist.destroy_process_group()

@pytest.mark.parametrize("i", range(N))
def test_all_reduce(i):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_rank, args=(port,), nprocs=2, join=True)
'''),
    "mptc": ("MultiProcessTestCase", BODY + '''
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase

class TestAllReduce(MultiProcessTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def _body(self):
        dist.init_process_group("gloo", store=dist.FileStore(self.file_name, 2), rank=self.rank, world_size=2)
        all_reduce_check()

for _i in range(N):
    setattr(TestAllReduce, f"test_all_reduce_{_i:03d}", TestAllReduce._body)
'''),
    "mpct": ("MultiProcContinuousTest", BODY + '''
try:
    from torch.testing._internal.common_distributed import MultiProcContinuousTest
except ImportError:  # spelled MultiProcContinousTest before torch 2.9 (pytorch PR #160892)
    from torch.testing._internal.common_distributed import MultiProcContinousTest as MultiProcContinuousTest

class TestAllReduce(MultiProcContinuousTest):
    world_size = 2

    @classmethod
    def backend_str(cls):
        return "gloo"

    @classmethod
    def device_type(cls):
        return "cpu"

    def _body(self):
        all_reduce_check()

for _i in range(N):
    setattr(TestAllReduce, f"test_all_reduce_{_i:03d}", TestAllReduce._body)
'''),
    "mttc": ("MultiThreadedTestCase", BODY + '''
from torch.testing._internal.common_distributed import MultiThreadedTestCase

class TestAllReduce(MultiThreadedTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        self._spawn_threads()

    def _body(self):
        all_reduce_check()

for _i in range(N):
    setattr(TestAllReduce, f"test_all_reduce_{_i:03d}", TestAllReduce._body)
'''),
    "torch-local": ("same tests, torch imported, no ranks", BODY + '''
import pytest
import torch

@pytest.mark.parametrize("i", range(N))
def test_all_reduce(i):
    assert torch.ones(1).sum().item() == 1  # the check on one process: no group, no ranks
'''),
    "trivial": ("trivial pytest test", '''
import pytest

@pytest.mark.parametrize("i", range(N))
def test_trivial(i):
    pass
'''),
}
HARNESSES["pool-noop-bare"] = ("dist_world, call without a collective, module without torch", '''
import pytest

def noop():
    return None

@pytest.mark.parametrize("i", range(N))
def test_noop(dist_world, i):
    dist_world.run(noop)
''')
HARNESSES["trivial-torch"] = ("trivial pytest test, module imports torch", '''
import pytest
import torch  # noqa: F401

@pytest.mark.parametrize("i", range(N))
def test_trivial(i):
    pass
''')
SLOW = {"spawn", "mptc"}
# Sessions that load this kit's plugin, as a learner's do (the torch harnesses run without it).
WITH_PLUGIN = {"pool", "pool-noop-bare", "pool-noop", "pool-fresh", "torch-local", "trivial", "trivial-torch"}


def run_harness(name: str, n: int, workdir: Path, timeout_s: float) -> dict:
    """Run one harness's ``n``-test session in a fresh ``pytest`` process; return its measurements.

    Raises:
        RuntimeError: the session failed or a test did not pass (with the session's output tail).
    """
    folder = workdir / name
    folder.mkdir()
    (folder / "conftest.py").write_text(TIMING_CONFTEST)
    source = f"N = {n}\n" + textwrap.dedent(HARNESSES[name][1])
    (folder / f"test_bench_{name.replace('-', '_')}.py").write_text(source)
    times = folder / "times.json"
    env = dict(os.environ, BENCH_TIMES=str(times), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    plugins = [] if name in WITH_PLUGIN else ["-p", "no:distcheck"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins, folder.name]
    load_before = os.getloadavg()[0]
    cpu_before = _cpu_ticks()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder.parent, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    steal = _steal_pct(cpu_before, _cpu_ticks())
    data = json.loads(times.read_text()) if times.exists() else {"durations_s": [], "outcomes": []}
    if proc.returncode != 0 or len(data["durations_s"]) != n or set(data["outcomes"]) != {"passed"}:
        raise RuntimeError(f"{name}: session failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return {**summarise(name, n, data["durations_s"], wall, load_before, os.getloadavg()[0]), "steal_pct": steal}


def _cpu_ticks() -> list[int] | None:
    """The machine's CPU time counters (``/proc/stat``'s ``cpu`` line, USER_HZ ticks), or None off Linux."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def _steal_pct(before: list[int] | None, after: list[int] | None) -> float | None:
    """Percent of all CPU time between two :func:`_cpu_ticks` that the hypervisor gave to other guests
    (steal, the 8th field of ``/proc/stat``'s ``cpu`` line, proc(5)); None where unknown. On a shared VM
    it moves the per-test times more than the load average does."""
    if before is None or after is None:
        return None
    total = sum(after) - sum(before)
    return 100.0 * (after[7] - before[7]) / total if total > 0 else 0.0


@contextlib.contextmanager
def idle_spinners(n: int):
    """``n`` processes that busy-loop at ``SCHED_IDLE`` while open (a diagnostic, not how the kit runs).

    A ``SCHED_IDLE`` process runs only on a CPU nothing else wants (sched(7)), so it takes no time from
    the sessions, but it keeps an idle virtual CPU from halting: a session that is faster with them pays
    for waking halted CPUs (the ranks' and pytest's wake-ups), not for work.
    """
    code = "import os; os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def summarise(name: str, n: int, durations_s: list[float], wall_s: float, load_before: float,
              load_after: float) -> dict:
    """Per-test statistics of one session, in seconds.

    The first test carries the start-up: ``startup_s = first - median(rest)`` (0 when n < 2).
    ``suite100_s`` is the measured wall time when ``n >= 100``, else ``wall + (100 - n) * median``.
    """
    rest = durations_s[1:] or durations_s
    median = statistics.median(rest)
    return {
        "harness": name,
        "label": HARNESSES[name][0],
        "tests": n,
        "per_test_median_s": median,
        "per_test_min_s": min(rest),
        "per_test_max_s": max(rest),
        "first_test_s": durations_s[0],
        "startup_s": max(durations_s[0] - median, 0.0) if len(durations_s) > 1 else 0.0,
        "session_wall_s": wall_s,
        "suite100_s": wall_s if n >= SUITE else wall_s + (SUITE - n) * median,
        "suite100_extrapolated": n < SUITE,
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": load_after,
        "durations_s": durations_s,
    }


def median_round(rounds: list[dict]) -> dict:
    """The round whose session wall is the median one (the lower middle of an even count), with every
    round's session wall and load attached (``session_walls_s``, ``load_avg_1m``)."""
    ordered = sorted(rounds, key=lambda r: r["session_wall_s"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["session_walls_s"] = [r["session_wall_s"] for r in rounds]
    row["load_avg_1m_before"] = min(r["load_avg_1m_before"] for r in rounds)
    row["load_avg_1m_after"] = max(r["load_avg_1m_after"] for r in rounds)
    steals = [r["steal_pct"] for r in rounds if r.get("steal_pct") is not None]
    row["steal_pct_max"] = max(steals) if steals else None
    return row


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}" if seconds < 10 else f"{seconds * 1e3:,.0f}"


def format_table(rows: list[dict]) -> str:
    """A Markdown table of the rows, with ratios of each row to ``pool`` (how many times slower)."""
    pool = next(r for r in rows if r["harness"] == "pool")
    lines = [
        "| harness | tests run | per test median (ms) | min | max | start-up (s) | session wall (s) "
        "| 100-test suite (s) | per test vs pool | suite vs pool |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        suite = f"{r['suite100_s']:.1f}" + (" (extrapolated)" if r["suite100_extrapolated"] else "")
        lines.append(
            f"| {r['label']} | {r['tests']} | {_ms(r['per_test_median_s'])} | {_ms(r['per_test_min_s'])} "
            f"| {_ms(r['per_test_max_s'])} | {r['startup_s']:.2f} | {r['session_wall_s']:.1f} | {suite} "
            f"| {r['per_test_median_s'] / pool['per_test_median_s']:,.1f}x "
            f"| {r['suite100_s'] / pool['suite100_s']:,.1f}x |"
        )
    return "\n".join(lines)


def targets(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """The issue's targets: (what, met, measured)."""
    by = {r["harness"]: r for r in rows}
    pool = by["pool"]
    out = [
        ("pool per-test overhead <= 5 ms (median)", pool["per_test_median_s"] <= 0.005,
         f"{pool['per_test_median_s'] * 1e3:.2f} ms"),
        ("pool start-up <= 2.5 s (2 ranks)", pool["startup_s"] <= 2.5, f"{pool['startup_s']:.2f} s"),
    ]
    if "spawn" in by:
        ratio = by["spawn"]["suite100_s"] / pool["suite100_s"]
        out.append(("100-test suite >= 50x faster than spawn-per-test", ratio >= 50, f"{ratio:.1f}x"))
    if "mttc" in by:
        ratio = by["mttc"]["suite100_s"] / pool["suite100_s"]
        out.append(("100-test suite faster than MultiThreadedTestCase", ratio > 1, f"{ratio:.1f}x"))
    if "torch-local" in by and by["torch-local"]["tests"] == pool["tests"]:
        extra = pool["session_wall_s"] - by["torch-local"]["session_wall_s"]
        out.append(("session overhead <= 0.5 s over the same tests importing torch without ranks", extra <= 0.5,
                    f"{extra:+.2f} s"))
        # Issue 15's own measure: the per-test time the pool and the test's gloo all-reduce add to the same
        # test run without ranks, against that test's time (it measured 0.68 ms against 0.45 ms).
        added = pool["per_test_median_s"] - by["torch-local"]["per_test_median_s"]
        out.append(_within_2x("pool with the test's all-reduce adds <= 2x the same test without ranks", added,
                              by["torch-local"]))
    # The pool's own per-test cost: a call that does nothing, against a test that does nothing in the same
    # kind of module.
    for noop, base, what in (("pool-noop", "trivial-torch", "in a module that imports torch"),
                             ("pool-noop-bare", "trivial", "in a module without torch")):
        if noop in by and base in by:
            added = by[noop]["per_test_median_s"] - by[base]["per_test_median_s"]
            out.append(_within_2x(f"dispatch (a call without a collective) adds <= 2x a trivial pytest test {what}",
                                  added, by[base]))
    return out


def _within_2x(what: str, added_s: float, trivial: dict) -> tuple[str, bool, str]:
    """A target line: ``added_s`` seconds per test at most twice the ``trivial`` row's per-test median."""
    base = trivial["per_test_median_s"]
    return what, added_s <= 2 * base, f"{added_s * 1e3:.2f} ms vs {base * 1e3:.2f} ms"


def _host() -> dict:
    import torch

    return {**describe_host(), "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=SUITE, help="tests per session for the fast harnesses")
    parser.add_argument("--slow-tests", type=int, default=8, help="tests per session for spawn and mptc")
    parser.add_argument("--fresh-tests", type=int, default=30, help="tests per session for pool-fresh")
    parser.add_argument("--only", default=",".join(HARNESSES), help="comma-separated harnesses to run")
    parser.add_argument("--out", help="write the JSON result here")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per session")
    parser.add_argument("--rounds", type=int, default=1,
                        help="sessions per harness, interleaved; each row is the round of median session wall")
    parser.add_argument("--idle-spinners", type=int, default=0, metavar="N",
                        help="diagnostic: N busy processes at SCHED_IDLE during every session (keep idle "
                             "virtual CPUs from halting; see idle_spinners)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(HARNESSES))
    if unknown or "pool" not in names:
        parser.error(f"--only: unknown {unknown}, choose from {sorted(HARNESSES)}; 'pool' is required")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names:
            n = args.slow_tests if name in SLOW else args.fresh_tests if name == "pool-fresh" else args.tests
            print(f"round {r + 1}/{args.rounds}: {name}, {n} tests ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="distcheck-bench-") as tmp, idle_spinners(args.idle_spinners):
                runs[name].append(run_harness(name, n, Path(tmp), args.timeout))
    rows = [median_round(runs[name]) for name in names]
    table = format_table(rows)
    print(table)
    print()
    for what, met, measured in targets(rows):
        print(f"- {'MET   ' if met else 'MISSED'} {what}: {measured}")
    loads = [r["load_avg_1m_before"] for r in rows] + [r["load_avg_1m_after"] for r in rows]
    steals = [r["steal_pct_max"] for r in rows if r.get("steal_pct_max") is not None]
    print(f"\nload average (1 min) during the run: {min(loads):.2f} .. {max(loads):.2f} "
          f"on {os.cpu_count()} logical CPUs" + (f"; steal at most {max(steals):.1f} % of a session's CPU time"
                                                 if steals else "")
          + (f"; {args.idle_spinners} SCHED_IDLE spinners running" if args.idle_spinners else ""))
    if args.out:
        result = {"schema": "distcheck/rank-pool-benchmark/1", "started_utc": started,
                  "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "host": _host(), "args": vars(args), "rows": rows,
                  "targets": [{"target": w, "met": m, "measured": v} for w, m, v in targets(rows)]}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
