"""The terminal dialogue of one attempt: ask each drawn item, re-ask on unreadable input, grade, explain.

Input and output are passed in (``ask(prompt) -> str``, ``say(text)``) so the command wires them to the
terminal and tests can drive them. Nothing is written here: the caller appends the returned record to
the log only after the last item, so Ctrl-C (KeyboardInterrupt) or end of input (EOFError) anywhere
leaves the log unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pytest_distcheck.quiz.answers import AnswerError, parse_choice, parse_number
from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import Graded, grade, passes

SKIP = "skip"


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
    return None


def _ask_one(drawn: DrawnItem, ask: Callable[[str], str], say: Callable[[str], None]) -> str:
    while True:
        text = ask("answer> ").strip()
        if text.lower() == SKIP:
            return ""
        problem = "type an answer, or 'skip'" if not text else _readable(drawn, text)
        if problem is None:
            return text
        say(f"  {problem}; try again ('skip' to leave it unanswered)")


def explain(g: Graded) -> str:
    """The feedback after one answer: right or wrong, the right answer, and why."""
    head = "  correct." if g.correct else f"  wrong{' (skipped)' if not g.given else ''}: the answer is {g.expected}."
    return f"{head}\n  why: {g.explanation}" + (f"\n  source: {g.source}" if g.source else "")


def run_attempt(
    bank: Bank,
    seed: int,
    n_items: int,
    ask: Callable[[str], str],
    say: Callable[[str], None],
    replay_command: str = "",
) -> tuple[dict[str, Any], list[Graded]]:
    """Ask ``n_items`` items drawn from ``bank`` with ``seed``; returns (log record, grades).

    Raises:
        KeyboardInterrupt, EOFError: from ``ask``; nothing has been written.
        ValueError: n_items does not fit the bank.
    """
    drawn = draw_attempt(bank, seed, n_items)
    started = _now()
    say(f"{bank.title}: {n_items} items, seed {seed}" + (f" (replay: {replay_command})" if replay_command else ""))
    say("Answer with a letter for multiple choice. Numbers may be typed as 0.375, 37.5%, 3/8, 1.2e9 or 2.1B,\n"
        "with or without the unit; other units of the same kind are converted (3750 MB for GB).\n"
        "'skip' leaves an item unanswered. Ctrl-C quits without saving.")
    graded: list[Graded] = []
    answers = []
    for i, d in enumerate(drawn, start=1):
        say(f"\n[{i}/{n_items}] ({d.item.topic}) {d.prompt()}")
        given = _ask_one(d, ask, say)
        g = grade(d, given)
        say(explain(g))
        graded.append(g)
        answers.append({"item": d.item.id, "params": d.params, "given": given})
    correct = sum(g.correct for g in graded)
    record = {"bank": bank.id, "seed": seed, "started": started, "finished": _now(), "answers": answers,
              "reported_score": correct / n_items}
    return record, graded


def summary(graded: list[Graded], pass_mark: float) -> str:
    """``score 7/10 (70%): passed (pass mark 70%)`` or ``... : not passed ...``."""
    right, total = sum(g.correct for g in graded), len(graded)
    verdict = "passed" if passes(right, total, pass_mark) else "not passed"
    return f"score {right}/{total} ({right / total:.0%}): {verdict} (pass mark {pass_mark:.0%})"
