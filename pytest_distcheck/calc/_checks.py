"""Argument checks shared by the calculators: each raises ValueError naming the argument and its value.

The messages are catalog messages (:mod:`pytest_distcheck.i18n`); an argument's name is an identifier
(``tp``, ``gpus``), shown as it is, or a description marked with ``N_`` (:data:`RANKS_N`) that the caller
speaks (``whole(_(RANKS_N), n)``): an identifier is never looked up in the catalog.
"""

from __future__ import annotations

from pytest_distcheck.i18n import N_, _

WHOLE = N_("{name} must be a whole number >= {minimum}, got {value!r}")
POSITIVE = N_("{name} must be > 0, got {value!r}")
NON_NEGATIVE = N_("{name} must be >= 0, got {value!r}")
FINITE_POSITIVE = N_("{name} must be a finite number > 0, got {value!r}")
FINITE_NON_NEGATIVE = N_("{name} must be a finite number >= 0, got {value!r}")
RANKS_N = N_("number of ranks n")


def whole(name: str, value: int, minimum: int = 1) -> None:
    """Raise ValueError unless ``value`` is an int (not a bool) >= ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(_(WHOLE).format(name=name, minimum=minimum, value=value))


def positive(name: str, value: float) -> None:
    """Raise ValueError unless ``value`` > 0 (NaN fails too)."""
    if not value > 0:
        raise refuse(POSITIVE, name, value)


def refuse(message: str, name: str, value: object) -> ValueError:
    """The ValueError of ``message`` (one of this module's templates) for argument ``name`` and its ``value``."""
    return ValueError(_(message).format(name=name, value=value))
