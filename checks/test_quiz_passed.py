"""DoD item quiz-passed: the phase quiz passed with at least the pass mark (70%).

Re-grades every attempt in the workspace's quiz log against the bank; a stored score is never trusted.
Only graded, complete attempts on a seed the log has not seen before count (practice ``--seed``
attempts and abandoned ones do not). The log is typed on the learner's machine, so a pass is
*self-reported* evidence; an implausibly fast attempt is flagged in the table. A passing log must be
committed as it is (the CI gate sees only commits): one with a newer attempt not yet committed is pending.
"""

from __future__ import annotations

import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.evidence import in_the_future
from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.config import quiz_config
from pytest_distcheck.quiz.grade import passes
from pytest_distcheck.quiz.regrade import MIN_SECONDS_PER_ITEM, regrade_log


@pytest.mark.local
@pytest.mark.dod("quiz-passed")
def test_quiz_passed(distcheck_workspace, distcheck_evidence):
    item = distcheck_workspace.item("quiz-passed")
    try:
        cfg = quiz_config(distcheck_workspace)
        bank = load_bank(cfg.bank_path)
        attempts = regrade_log(bank, cfg.log_path, cfg.items_per_attempt)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    distcheck_evidence(cfg.log_path)
    mark = f"pass mark {cfg.pass_mark:.0%}"
    future = [a for a in attempts if in_the_future(a.finished)]
    if future:
        pytest_distcheck.broken(f"{cfg.log_rel} line {future[0].line}: dated in the future (finished "
                                f"{future[0].finished}); `distcheck quiz` stamps each attempt when it ends")
    counted = [a for a in attempts if a.counted]
    skipped = [a for a in attempts if not a.counted]
    not_counted = (f"; {len(skipped)} not counted ({', '.join(f'line {a.line}: {a.not_counted}' for a in skipped[:3])}"
                   f"{', ...' if len(skipped) > 3 else ''})") if skipped else ""
    if not counted:
        pytest_distcheck.pending(f"no graded attempt in {cfg.log_rel} yet (expected one scoring at least the "
                                 f"{mark}){not_counted}", item.how)
    best = max(counted, key=lambda a: a.score)
    if not passes(best.correct, best.total, cfg.pass_mark):
        pytest_distcheck.pending(
            f"{len(counted)} graded attempt(s) in {cfg.log_rel}; the best, line {best.line} (seed {best.seed}), "
            f"re-grades to {best.correct}/{best.total} ({best.score:.0%}), below the {mark}{not_counted}", item.how)
    require_committed([cfg.log_path], distcheck_workspace.root)
    distcheck_evidence(flags=["self-reported", *(["fast-quiz"] if best.too_fast else [])])
    fast = (f"; flagged: implausibly fast ({best.seconds:.0f} s for {best.total} items, under "
            f"{MIN_SECONDS_PER_ITEM:g} s each)") if best.too_fast else ""
    pytest_distcheck.done(f"evidence checked, self-reported: line {best.line} re-grades to {best.correct}/"
                          f"{best.total} ({best.score:.0%}){fast}")
