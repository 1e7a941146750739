"""DoD item quiz-passed: the phase quiz passed with at least the pass mark (70%).

Re-grades every attempt in the workspace's quiz log against the bank; a stored score is never trusted.
Only graded, complete attempts on a seed the log has not seen before count (practice ``--seed``
attempts and abandoned ones do not). The log is typed on the learner's machine, so a pass is
*self-reported* evidence; an attempt under 5 s per item passes, noted as fast for a grader. A passing log must be
committed as it is (the CI gate sees only commits): one with a newer attempt not yet committed is pending.
"""

from __future__ import annotations

import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.evidence import in_the_future
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m
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
    mark = _(m.PASS_MARK).format(mark=f"{cfg.pass_mark:.0%}")
    future = [a for a in attempts if in_the_future(a.finished)]
    if future:
        pytest_distcheck.broken(_(m.QUIZ_IN_THE_FUTURE).format(log=cfg.log_rel, line=future[0].line,
                                                               when=future[0].finished))
    counted = [a for a in attempts if a.counted]
    skipped = [a for a in attempts if not a.counted]
    not_counted = _(m.NOT_COUNTED).format(
        n=len(skipped), attempts=", ".join(_(m.NOT_COUNTED_ONE).format(line=a.line, why=a.not_counted)
                                           for a in skipped[:3]),
        more=", ..." if len(skipped) > 3 else "") if skipped else ""
    if not counted:
        pytest_distcheck.pending(_(m.NO_GRADED_ATTEMPT).format(log=cfg.log_rel, mark=mark, not_counted=not_counted),
                                 item.how)
    best = max(counted, key=lambda a: a.score)
    if not passes(best.correct, best.total, cfg.pass_mark):
        pytest_distcheck.pending(_(m.BELOW_PASS_MARK).format(
            attempts=m.graded_attempts(len(counted)), log=cfg.log_rel, line=best.line, seed=best.seed,
            correct=best.correct, total=best.total, score=f"{best.score:.0%}", mark=mark, not_counted=not_counted),
            item.how)
    require_committed([cfg.log_path], distcheck_workspace.root)
    distcheck_evidence(flags=[provenance.SELF_REPORTED, *([provenance.FAST_QUIZ] if best.too_fast else [])])
    fast = _(m.TOO_FAST).format(seconds=f"{best.seconds:.0f}", total=best.total,
                                minimum=f"{MIN_SECONDS_PER_ITEM:g}") if best.too_fast else ""
    pytest_distcheck.done(_(m.QUIZ_DONE).format(line=best.line, correct=best.correct, total=best.total,
                                                score=f"{best.score:.0%}", fast=fast))
