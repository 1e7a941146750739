"""Argument types shared by the calculator commands: counts such as 7.5B or 175e9 (not a command)."""

from __future__ import annotations

import argparse

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def count(text: str) -> float:
    """A positive count: ``7.5e9``, ``7.5B``, ``175b``, ``350M``, ``1T``, ``1_000``.

    Raises:
        argparse.ArgumentTypeError: not such a number.
    """
    value = text.strip().replace("_", "").lower()
    scale = _SUFFIX.get(value[-1:], 1.0)
    if scale != 1.0:
        value = value[:-1]
    try:
        number = float(value) * scale
    except ValueError:
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
