"""Take the phase quiz in the terminal; the attempt is appended to the workspace's quiz log.

  distcheck quiz 35               a new attempt (random seed, printed so it can be replayed)
  distcheck quiz 35 --seed 1234   replay the attempt drawn with seed 1234

Bank, log, pass mark and items per attempt come from [quiz] of the workspace file. The log is checked
before the first question (as the quiz-passed DoD check reads it): a bad line is reported with its line
number, to be fixed or removed by hand, and nothing is asked. Ctrl-C quits without writing anything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.errors import DistcheckError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("bank", metavar="BANK", help="the quiz to take (the bank id, e.g. 35)")
    parser.add_argument("--seed", type=int, help="seed of the draw (default: random, printed)")
    add_config_argument(parser)


def _ask(prompt: str) -> str:
    return input(prompt)


def _say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    import secrets

    from pytest_distcheck.quiz.bank import load_bank
    from pytest_distcheck.quiz.config import quiz_config
    from pytest_distcheck.quiz.grade import passes
    from pytest_distcheck.quiz.log import append_attempt, check_appendable
    from pytest_distcheck.quiz.regrade import regrade_log
    from pytest_distcheck.quiz.session import run_attempt, summary
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(Path(args.config))
    cfg = quiz_config(ws)
    bank = load_bank(cfg.bank_path)
    if args.bank != bank.id:
        raise DistcheckError(f"no quiz {args.bank!r}: {args.config} [quiz] has bank {bank.id!r} ({cfg.bank_rel})")
    # Refuse before asking: an attempt appended after a bad line would never count for the DoD check.
    regrade_log(bank, cfg.log_path, cfg.items_per_attempt)
    check_appendable(cfg.log_path)
    seed = args.seed if args.seed is not None else secrets.randbelow(1_000_000)
    try:
        record, graded = run_attempt(bank, seed, cfg.items_per_attempt, _ask, _say,
                                     replay_command=f"distcheck quiz {bank.id} --seed {seed}")
    except (KeyboardInterrupt, EOFError) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "input ended"
        print(f"\ndistcheck quiz: {why}; nothing written to {cfg.log_rel}", file=sys.stderr)
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    line = append_attempt(cfg.log_path, record)
    _say(f"\n{summary(graded, cfg.pass_mark)}")
    _say(f"attempt appended to {cfg.log_rel} (line {line}); `pytest -m local` re-grades it for the DoD.")
    if passes(sum(g.correct for g in graded), len(graded), cfg.pass_mark):
        # The CI gate re-grades the committed log, not the working copy.
        _say(f"passed: commit the log so the CI gate sees it: git add {cfg.log_rel} && git commit -m "
             f"\"quiz {bank.id}: passing attempt\" -- {cfg.log_rel}")
    return 0
