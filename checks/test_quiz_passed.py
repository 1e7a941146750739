"""DoD item quiz-passed: the phase quiz passed with at least the pass mark (70%).

Re-grades every attempt in the workspace's quiz log against the bank; a stored score is never trusted.
"""

from __future__ import annotations

import pytest

import pytest_distcheck
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.config import quiz_config
from pytest_distcheck.quiz.grade import passes
from pytest_distcheck.quiz.regrade import regrade_log


@pytest.mark.local
@pytest.mark.dod("quiz-passed")
def test_quiz_passed(distcheck_workspace):
    item = distcheck_workspace.item("quiz-passed")
    try:
        cfg = quiz_config(distcheck_workspace)
        bank = load_bank(cfg.bank_path)
        attempts = regrade_log(bank, cfg.log_path, cfg.items_per_attempt)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    mark = f"pass mark {cfg.pass_mark:.0%}"
    if not attempts:
        pytest_distcheck.pending(f"no quiz attempt in {cfg.log_rel} yet (expected one scoring at least the "
                                 f"{mark})", item.how)
    best = max(attempts, key=lambda a: a.score)
    if not passes(best.correct, best.total, cfg.pass_mark):
        pytest_distcheck.pending(
            f"{len(attempts)} attempt(s) in {cfg.log_rel}; the best, line {best.line} (seed {best.seed}), "
            f"re-grades to {best.correct}/{best.total} ({best.score:.0%}), below the {mark}", item.how)
