"""Take the phase quiz in the terminal; the attempt is appended to the workspace's quiz log.

  distcheck quiz 35               a graded attempt (the kit draws the seed)
  distcheck quiz 35 --seed 1234   practice on the draw of seed 1234: logged as practice, never counted
  distcheck quiz 35 --lang es     the attempt in Spanish (the bank's twin checks/quiz/35.es.json)

Bank, log, pass mark and items per attempt come from [quiz] of the workspace file. The log is checked
before the first question (as the quiz-passed DoD check reads it): a bad line is reported with its line
number, to be fixed or removed by hand, and nothing is asked. Right answers and explanations are shown
only after the attempt is in the log. Ctrl-C or the end of input after the first answer logs the attempt
as abandoned (no answers shown); before it, nothing is written. The items are shown in the kit's language
(--lang, $DISTCHECK_LANG, ini distcheck_lang, the locale) when the bank has that translation, else in
English; the log records which (``lang``), and grading never depends on it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _

NO_QUIZ = N_("no quiz {asked!r}: {config} [quiz] has bank {bank!r} ({path})")
NOT_TRANSLATED = N_("{path} does not exist: the items are shown in English")
INTERRUPTED, INPUT_ENDED = N_("interrupted"), N_("input ended")
LOGGED_ABANDONED = N_("attempt logged as abandoned in {log} (line {line}); it does not count and its answers are "
                      "not shown")
NOTHING_WRITTEN = N_("nothing written to {log}")
APPENDED = N_("attempt appended to {log} (line {line}).")
PRACTICE_DONE = N_("practice (--seed {seed}): logged, never counted for the DoD; `distcheck quiz {bank}` takes a "
                   "graded attempt.")
REGRADED = N_("`pytest -m local` re-grades it for the DoD.")
COMMIT_IT = N_("passed: commit the log so the CI gate sees it: {command}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("bank", metavar="BANK", help="the quiz to take (the bank id, e.g. 35)")
    parser.add_argument("--seed", type=int, help="practice on the draw of this seed (logged as practice, never "
                        "counted; default: a graded attempt with a seed the kit draws)")
    add_config_argument(parser)


def _ask(prompt: str) -> str:
    return input(prompt)


def _say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    import secrets

    from pytest_distcheck import i18n
    from pytest_distcheck.quiz.bank import load_bank
    from pytest_distcheck.quiz.config import quiz_config
    from pytest_distcheck.quiz.grade import passes
    from pytest_distcheck.quiz.log import append_attempt, check_appendable
    from pytest_distcheck.quiz.regrade import regrade_log
    from pytest_distcheck.quiz.session import GRADED, PRACTICE, feedback, run_attempt, summary
    from pytest_distcheck.quiz.translation import translate, translation_path
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(Path(args.config))
    cfg = quiz_config(ws)
    bank = load_bank(cfg.bank_path)
    if args.bank != bank.id:
        raise DistcheckError(_(NO_QUIZ).format(asked=args.bank, config=args.config, bank=bank.id, path=cfg.bank_rel))
    # Refuse before asking: an attempt appended after a bad line would never count for the DoD check.
    regrade_log(bank, cfg.log_path, cfg.items_per_attempt)
    check_appendable(cfg.log_path)
    shown = translate(bank, i18n.language())  # the log is re-graded with `bank` alone, whatever is shown
    if shown is None:
        _say(_(NOT_TRANSLATED).format(path=os.path.relpath(translation_path(bank, i18n.language()))))
        shown = bank
    practice = args.seed is not None
    seed = args.seed if practice else secrets.randbits(32)
    attempt = run_attempt(shown, seed, cfg.items_per_attempt, _ask, _say, mode=PRACTICE if practice else GRADED)
    # The attempt goes into the log before anything keyed is shown: no attempt is previewed without being logged.
    line = append_attempt(cfg.log_path, attempt.record) if attempt.record is not None else None
    if attempt.stopped is not None:
        interrupted = isinstance(attempt.stopped, KeyboardInterrupt)
        why = _(INTERRUPTED if interrupted else INPUT_ENDED)
        done = (_(LOGGED_ABANDONED).format(log=cfg.log_rel, line=line) if line
                else _(NOTHING_WRITTEN).format(log=cfg.log_rel))
        print(f"\ndistcheck quiz: {why}; {done}", file=sys.stderr)
        return 130 if interrupted else 1
    assert attempt.record is not None
    graded = attempt.graded
    _say("\n" + _(APPENDED).format(log=cfg.log_rel, line=line))
    _say(feedback(graded))
    _say(f"\n{summary(graded, cfg.pass_mark)}")
    if practice:
        _say(_(PRACTICE_DONE).format(seed=seed, bank=bank.id))
        return 0
    _say(_(REGRADED))
    if passes(sum(g.correct for g in graded), len(graded), cfg.pass_mark):
        # The CI gate re-grades the committed log, not the working copy.
        from pytest_distcheck.committed import commit_command

        line = commit_command([os.path.relpath(cfg.log_path)], f"quiz {bank.id}: passing attempt")
        _say(_(COMMIT_IT).format(command=line))
    return 0
