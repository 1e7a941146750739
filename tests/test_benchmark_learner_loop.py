"""benchmarks/learner_loop.py: its table rows and targets, and the quiz attempt that completes the free items."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from benchmarks import learner_loop, rank_pool

REPO = Path(__file__).resolve().parents[1]


def _harness(name, per_test_s):
    return rank_pool.summarise(name, 3, [1.0, per_test_s, per_test_s], 2.0, 0.5, 0.75)


def _local(label, wall, done):
    return {"label": label, "wall_s": wall, "load_avg_1m_before": 0.5, "load_avg_1m_after": 0.75,
            "done": ["x"] * done, "not_done": {"tp-speedup-committed": "pending"}}


def test_the_table_rows_give_each_measure_with_its_load_and_the_issues_targets():
    harnesses = [_harness("pool", 0.0005), _harness("pool-noop", 0.0003), _harness("trivial-torch", 0.0004),
                 _harness("mttc", 0.003), _harness("mpct", 0.004)]
    local = [_local("fresh clone, nothing done", 5.5, 1), _local("every free item done, first run", 7.0, 5),
             _local("every free item done, next run (live DDP run reused)", 3.5, 5)]
    lines = learner_loop.table_rows(harnesses, local)
    assert lines[2] == "| per test: dist_world (this kit) | 0.50 ms (min 0.50) | 1.00x | 0.50-0.75 |"
    assert lines[3] == "| per test: dist_world, call without a collective | 0.30 ms (min 0.30) | 0.60x | 0.50-0.75 |"
    assert lines[5] == "| per test: MultiThreadedTestCase | 3.00 ms (min 3.00) | 6.00x | 0.50-0.75 |"
    assert lines[7] == "| `pytest -m local`, fresh clone, nothing done (1/2 done) | 5.50 s | | 0.50-0.75 |"
    assert lines[-4:] == [
        "- MET    dist_world per test <= 1.5x a trivial test in a torch-importing module: 0.50 vs 0.40 ms (1.25x)",
        "- MET    dist_world per test ahead of MultiThreadedTestCase: 0.50 vs 3.00 ms",
        "- MET    `pytest -m local` on a fresh clone <= 8 s: 5.50 s",
        "- (not a target) a dist_world call without a collective against the same trivial test: 0.30 vs 0.40 ms "
        "(0.75x)"]
    local[0]["wall_s"] = 8.5
    assert learner_loop.table_rows(harnesses, local)[-2].startswith("- MISSED `pytest -m local`")


def test_the_synthetic_quiz_attempt_passes_the_quiz_check(tmp_path):
    clone = tmp_path / "clone"
    for sub in ("checks/quiz", "solutions/experiments"):
        (clone / sub).mkdir(parents=True)
    shutil.copy(REPO / "checks" / "solutions.toml", clone / "checks")
    shutil.copy(REPO / "checks" / "quiz" / "35.json", clone / "checks" / "quiz")
    subprocess.run(["git", "init", "-q"], cwd=clone, check=True)
    learner_loop.passing_quiz_log(clone)
    from pytest_distcheck.quiz.bank import load_bank
    from pytest_distcheck.quiz.regrade import regrade_log

    (attempt,) = regrade_log(load_bank(clone / "checks/quiz/35.json"),
                             clone / "solutions/experiments/quiz/35-attempts.jsonl", 10)
    assert (attempt.not_counted, attempt.correct, attempt.total) == ("", 10, 10)
