"""benchmarks/rank_pool.py: its statistics, table and targets, and a short real run of the pool harness."""

from __future__ import annotations

import json
import os
import time

import pytest

from benchmarks import rank_pool


def _row(name, durations, wall):
    return rank_pool.summarise(name, len(durations), durations, wall, 1.0, 1.5)


def test_summary_takes_start_up_from_the_first_test_and_extrapolates_short_runs():
    row = _row("spawn", [3.0, 2.0, 2.2, 1.8], wall=12.0)
    assert row["per_test_median_s"] == 2.0 and row["per_test_min_s"] == 1.8 and row["per_test_max_s"] == 2.2
    assert row["startup_s"] == pytest.approx(1.0)
    assert row["suite100_extrapolated"] and row["suite100_s"] == pytest.approx(12.0 + 96 * 2.0)
    full = _row("pool", [1.5] + [0.001] * 99, wall=2.0)
    assert not full["suite100_extrapolated"] and full["suite100_s"] == 2.0


def test_table_ratios_and_targets():
    rows = [_row("pool", [1.5] + [0.001] * 99, wall=2.0), _row("spawn", [2.0] * 4, wall=9.0),
            _row("mttc", [0.003] * 100, wall=4.0)]
    table = rank_pool.format_table(rows).splitlines()
    assert table[0].startswith("| harness |") and len(table) == 5
    assert table[3].split("|")[-3:-1] == [" 2,000.0x ", " 100.5x "]  # spawn: 2 s vs 1 ms; 9 + 96 * 2 s vs 2 s
    met = {what: ok for what, ok, _ in rank_pool.targets(rows)}
    assert met == {
        "pool per-test overhead <= 5 ms (median)": True,
        "pool start-up <= 2.5 s (2 ranks)": True,
        "100-test suite >= 50x faster than spawn-per-test": True,
        "100-test suite faster than MultiThreadedTestCase": True,
    }
    slow_pool = [_row("pool", [3.0] + [0.006] * 99, wall=5.0), rows[2]]
    assert [ok for _, ok, _ in rank_pool.targets(slow_pool)] == [False, False, False]


def test_unknown_harness_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        rank_pool.main(["--only", "pool,nope"])
    assert "unknown ['nope']" in capsys.readouterr().err


def test_a_short_real_run_of_the_pool_harness(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert rank_pool.main(["--only", "pool", "--tests", "4", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["harness"] == "pool" and len(row["durations_s"]) == 4
    assert 0 < row["per_test_min_s"] <= row["per_test_median_s"] <= row["per_test_max_s"]
    assert "| dist_world (this kit) | 4 |" in capsys.readouterr().out


def test_start_up_and_all_reduce_targets_against_the_same_tests_without_ranks():
    pool = _row("pool", [1.5] + [0.0012] * 99, wall=3.0)
    local = _row("torch-local", [0.5] + [0.0005] * 99, wall=2.6)
    met = {what: (ok, measured) for what, ok, measured in rank_pool.targets([pool, local])}
    assert met["session overhead <= 0.5 s over the same tests importing torch without ranks"] == (True, "+0.40 s")
    assert met["pool with the test's all-reduce adds <= 2x the same test without ranks"] == (
        True, "0.70 ms vs 0.50 ms")
    slow = _row("pool", [1.5] + [0.0016] * 99, wall=3.5)
    assert [ok for _, ok, _ in rank_pool.targets([slow, local])][-2:] == [False, False]


def test_the_median_round_is_reported_with_every_round():
    rounds = [_row("pool", [1.0, 0.001], wall=w) for w in (3.0, 1.0, 2.0)]
    row = rank_pool.median_round(rounds)
    assert row["session_wall_s"] == 2.0 and row["session_walls_s"] == [3.0, 1.0, 2.0]


def test_pool_phases_script_runs_and_names_every_phase(capsys):
    from benchmarks import pool_phases
    from pytest_distcheck.ranks import pool

    kit_functions = (pool.dump_call, pool.rewritten_modules)
    assert pool_phases.main(["--calls", "3", "--rounds", "1"]) == 0
    assert (pool.dump_call, pool.rewritten_modules) == kit_functions  # timing wrappers removed again
    out = capsys.readouterr().out
    for phase in ("call, function that does nothing", "the all-reduce inside rank 0", "dump_call", "send",
                  "call_text", "_collect", "rank's state reset after each call", "floor: a byte to 2 plain processes",
                  *(label for label, _, _ in pool_phases.WAKEUPS)):
        assert phase in out


def test_every_wake_up_path_reports_a_median_and_p90_per_round():
    from benchmarks import pool_phases

    rows = pool_phases.wakeup_paths(20, 2, busy_s=0.0, child_s=0.0)
    assert [r["label"] for r in rows] == [label for label, _, _ in pool_phases.WAKEUPS]
    for r in rows:
        assert len(r["medians_s"]) == len(r["p90s_s"]) == 2
        assert all(0 < m <= p < 1.0 for m, p in zip(r["medians_s"], r["p90s_s"], strict=True))


def test_round_trip_floor_returns_after_reaping_its_processes():
    from benchmarks import pool_phases

    assert 0 < pool_phases.round_trip_floor(20) < 1.0  # (it waits for both echo processes to exit)


def test_dispatch_targets_against_a_trivial_test_in_the_same_kind_of_module():
    pool = _row("pool", [1.5] + [0.0011] * 99, wall=3.0)
    noop = _row("pool-noop", [1.5] + [0.0008] * 99, wall=2.9)
    bare = _row("pool-noop-bare", [1.5] + [0.0007] * 99, wall=2.0)
    trivial = _row("trivial", [0.01] + [0.0002] * 99, wall=0.9)
    trivial_torch = _row("trivial-torch", [0.01] + [0.0004] * 99, wall=2.5)
    met = {what: (ok, measured) for what, ok, measured in rank_pool.targets([pool, noop, bare, trivial, trivial_torch])}
    assert met["dispatch (a call without a collective) adds <= 2x a trivial pytest test in a module that imports "
               "torch"] == (True, "0.40 ms vs 0.40 ms")
    assert met["dispatch (a call without a collective) adds <= 2x a trivial pytest test in a module without "
               "torch"] == (False, "0.50 ms vs 0.20 ms")


def test_steal_is_the_share_of_all_cpu_time_between_two_readings():
    before = [100, 0, 50, 800, 0, 0, 0, 10]
    after = [150, 0, 60, 900, 0, 0, 0, 50]  # 200 ticks in all, 40 of them stolen
    assert rank_pool._steal_pct(before, after) == pytest.approx(20.0)
    assert rank_pool._steal_pct(None, after) is None and rank_pool._steal_pct(before, before) == 0.0
    ticks = rank_pool._cpu_ticks()
    assert ticks is None or (len(ticks) == 8 and all(t >= 0 for t in ticks))


def test_idle_spinners_run_at_idle_priority_and_are_gone_after():
    import psutil

    me = psutil.Process()
    before = {c.pid for c in me.children()}  # a zygote an earlier dist_world test left in this process
    with rank_pool.idle_spinners(2):
        children = [c for c in me.children() if c.pid not in before]
        assert len(children) == 2
        deadline = time.monotonic() + 10
        while any(os.sched_getscheduler(c.pid) != os.SCHED_IDLE for c in children):
            assert time.monotonic() < deadline, "a spinner never switched to SCHED_IDLE"
    assert not any(c.is_running() for c in children)
