"""The terminal dialogue of one attempt: ask each drawn item, re-ask on unreadable input, time each answer.

Input and output are passed in (``ask(prompt) -> str``, ``say(text)``). Nothing keyed is shown here; the caller
logs the returned record first and only then shows :func:`feedback`, so no answer is seen before its attempt is
logged. Ctrl-C or end of input after the first answer ends the attempt ``abandoned``; ``seconds`` per answer is
monotonic wall time, re-asks included; ``mode`` is ``graded`` (the kit drew the seed) or ``practice`` (``--seed``,
never counted for the DoD); ``lang`` is the language the bank's text was shown in. Design record: docs/design/quiz.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pytest_distcheck import i18n
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.quiz.answers import AnswerError, comma_is_ambiguous, parse_choice, parse_number
from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import Graded, grade, passes

SKIP = N_("skip")
GRADED, PRACTICE = "graded", "practice"
COMPLETE, ABANDONED = "complete", "abandoned"
# Languages whose readers write a decimal comma: there, 1,024 is asked again rather than read as 1024.
DECIMAL_COMMA = ("es",)

HEADER = N_("{title}: {n} items, {how}")
HOW_GRADED = N_("graded attempt (seed {seed}, drawn by the kit)")
HOW_PRACTICE = N_("practice with seed {seed} (--seed): logged as practice, never counted for the DoD")
INSTRUCTIONS = N_(
    "Answer with a letter for multiple choice. Numbers may be typed as 0.375, 37.5%, 3/8, 1.2e9 or 2.1B,\n"
    "with or without the unit; other units of the same kind are converted (3750 MB for GB).\n"
    "'{skip}' leaves an item unanswered. Right answers and explanations are shown once the attempt is\n"
    "in the log. Ctrl-C or Ctrl-D (end of input) quits: after the first answer the attempt is logged\n"
    "as abandoned: not counted, and no answers are shown.")
PROMPT = N_("answer> ")
TYPE_SOMETHING = N_("type an answer, or '{skip}'")
TRY_AGAIN = N_("  {problem}; try again ('{skip}' to leave it unanswered)")
CORRECT = N_("  correct.")
WRONG = N_("  wrong: the answer is {expected}.")
WRONG_SKIPPED = N_("  wrong (skipped): the answer is {expected}.")
WHY = N_("  why: {explanation}")
SOURCE = N_("  source: {source}")
SCORE = N_("score {right}/{total} ({percent}%): {verdict} (pass mark {mark}%)")
PASSED, NOT_PASSED = N_("passed"), N_("not passed")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _readable(drawn: DrawnItem, text: str) -> str | None:
    """None when ``text`` can be graded, else what to type instead."""
    try:
        if isinstance(drawn.item, ChoiceItem):
            parse_choice(text, len(drawn.item.choices))
        else:
            parse_number(text, drawn.item.unit)
    except AnswerError as exc:
        return str(exc)
    if isinstance(drawn.item, ChoiceItem) or i18n.language() not in DECIMAL_COMMA:
        return None
    return comma_is_ambiguous(text)


def _ask_one(drawn: DrawnItem, ask: Callable[[str], str], say: Callable[[str], None]) -> str:
    skip = _(SKIP)
    while True:
        text = ask(_(PROMPT)).strip()
        if text.lower() in (SKIP, skip.lower()):
            return ""
        problem = _(TYPE_SOMETHING).format(skip=skip) if not text else _readable(drawn, text)
        if problem is None:
            return text
        say(_(TRY_AGAIN).format(problem=problem, skip=skip))


def explain(g: Graded) -> str:
    """The feedback on one answer: right or wrong, the right answer, and why."""
    head = _(CORRECT) if g.correct else _(WRONG if g.given else WRONG_SKIPPED).format(expected=g.expected)
    return "\n".join([head, _(WHY).format(explanation=g.explanation),
                      *([_(SOURCE).format(source=g.source)] if g.source else [])])


@dataclass(frozen=True)
class Attempt:
    """What one sitting produced.

    Attributes:
        record: the log line (``quiz-log.schema.json``); ``None`` when it ended before the first answer.
        graded: the grade of each answered item, in order (never shown before the record is logged).
        stopped: the KeyboardInterrupt or EOFError that ended it early, else ``None``.
    """

    record: dict[str, Any] | None
    graded: list[Graded]
    stopped: BaseException | None = None


def run_attempt(
    bank: Bank,
    seed: int,
    n_items: int,
    ask: Callable[[str], str],
    say: Callable[[str], None],
    mode: str = GRADED,
    clock: Callable[[], float] = time.monotonic,
) -> Attempt:
    """Ask ``n_items`` items drawn from ``bank`` with ``seed``; shows no key. ``mode``: graded or practice.

    Raises:
        ValueError: n_items does not fit the bank.
    """
    drawn = draw_attempt(bank, seed, n_items)
    started = _now()
    how = _(HOW_GRADED if mode == GRADED else HOW_PRACTICE).format(seed=seed)
    say(_(HEADER).format(title=bank.title, n=n_items, how=how))
    say(_(INSTRUCTIONS).format(skip=_(SKIP)))
    graded: list[Graded] = []
    answers: list[dict[str, Any]] = []
    stopped: BaseException | None = None
    for i, d in enumerate(drawn, start=1):
        say(f"\n[{i}/{n_items}] ({d.item.topic}) {d.prompt()}")
        shown = clock()
        try:
            given = _ask_one(d, ask, say)
        except (KeyboardInterrupt, EOFError) as exc:
            stopped = exc
            break
        answers.append({"item": d.item.id, "params": d.params, "given": given,
                        "seconds": round(clock() - shown, 1)})
        graded.append(grade(d, given))
    if not answers:
        return Attempt(None, [], stopped)
    record = {"bank": bank.id, "seed": seed, "mode": mode, "status": ABANDONED if stopped else COMPLETE,
              "started": started, "finished": _now(), "lang": bank.lang, "answers": answers,
              "reported_score": sum(g.correct for g in graded) / n_items}
    return Attempt(record, graded, stopped)


def feedback(graded: list[Graded]) -> str:
    """Every answer's feedback, numbered; shown only after the attempt is in the log."""
    return "\n".join(f"\n[{i}/{len(graded)}] {g.item_id}\n{explain(g)}" for i, g in enumerate(graded, start=1))


def summary(graded: list[Graded], pass_mark: float) -> str:
    """``score 7/10 (70%): passed (pass mark 70%)`` or ``... : not passed ...``."""
    right, total = sum(g.correct for g in graded), len(graded)
    verdict = _(PASSED if passes(right, total, pass_mark) else NOT_PASSED)
    return _(SCORE).format(right=right, total=total, percent=f"{right / total * 100:.0f}", verdict=verdict,
                           mark=f"{pass_mark * 100:.0f}")
