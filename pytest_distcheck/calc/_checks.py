"""Argument checks shared by the calculators: each raises ValueError naming the argument and its value."""

from __future__ import annotations


def whole(name: str, value: int, minimum: int = 1) -> None:
    """Raise ValueError unless ``value`` is an int (not a bool) >= ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")


def positive(name: str, value: float) -> None:
    """Raise ValueError unless ``value`` > 0 (NaN fails too)."""
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
