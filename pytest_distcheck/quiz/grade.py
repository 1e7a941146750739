"""Grade one answer: choice letters must match; numbers must be within the item's stated tolerance."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_distcheck.quiz.answers import AnswerError, parse_choice, parse_number
from pytest_distcheck.quiz.bank import LETTERS, ChoiceItem, unit_label
from pytest_distcheck.quiz.draw import DrawnItem


@dataclass(frozen=True)
class Graded:
    """The grade of one answer.

    Attributes:
        item_id: the bank item.
        given: the text the learner typed.
        correct: whether it is right.
        expected: the right answer as text (``B) ...`` or ``16.64 GB``).
        explanation: why, from the bank (numeric: filled in with the parameters and the answer).
        problem: why the given text could not be read as an answer ("" when it could).
        source: where the answer comes from (paper and section), from the bank.
    """

    item_id: str
    given: str
    correct: bool
    expected: str
    explanation: str
    problem: str = ""
    source: str = ""


def within(value: float, expected: float, tolerance: tuple[str, float]) -> bool:
    """|value - expected| <= rel * |expected| (``("rel", r)``) or <= a (``("abs", a)``)."""
    kind, tol = tolerance
    if kind == "abs":
        return abs(value - expected) <= tol + 1e-12
    return math.isclose(value, expected, rel_tol=tol, abs_tol=1e-12)


def passes(correct: int, total: int, pass_mark: float) -> bool:
    """Whether correct/total reaches pass_mark (7/10 passes a 0.7 mark despite floating point)."""
    return total > 0 and correct / total >= pass_mark - 1e-9


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def grade(drawn: DrawnItem, given: str) -> Graded:
    """Grade ``given`` for ``drawn``. Text that is not an answer of the right kind is wrong (``problem`` says why).

    Raises:
        ValueError: only if the calculator rejects the drawn parameters (a bank bug).
    """
    item = drawn.item
    if isinstance(item, ChoiceItem):
        expected = f"{item.answer}) {item.choices[LETTERS.index(item.answer)]}"
        try:
            correct, problem = parse_choice(given, len(item.choices)) == item.answer, ""
        except AnswerError as exc:
            correct, problem = False, str(exc)
        return Graded(item.id, given, correct, expected, item.explanation, problem, item.source)
    answer = item.expected(drawn.params)
    expected = f"{_fmt(answer)}{' ' + unit_label(item.unit) if item.unit else ''}"
    explanation = item.explanation.format(**drawn.params, answer=answer)
    try:
        correct, problem = within(parse_number(given, item.unit), answer, item.tolerance), ""
    except AnswerError as exc:
        correct, problem = False, str(exc)
    return Graded(item.id, given, correct, expected, explanation, problem, item.source)
