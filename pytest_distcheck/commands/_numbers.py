"""Argument types shared by the calculator commands: counts such as 7.5B or 175e9 (not a command)."""

from __future__ import annotations

import argparse


def count(text: str) -> float:
    """A positive count: ``7.5e9``, ``7.5B``, ``175b``, ``350M``, ``1T``, ``1_000`` (read as the quiz reads them).

    Raises:
        argparse.ArgumentTypeError: not such a number.
    """
    from pytest_distcheck.quiz.answers import AnswerError, parse_number

    try:
        number = parse_number(text)
    except AnswerError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (e.g. 7.5e9, 7.5B, 350M)") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return number


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value
