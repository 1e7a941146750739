"""Argument types shared by the calculator commands (not a command): every number is checked to be finite,
in its range and, for counts, to carry a known suffix. Each raises ``argparse.ArgumentTypeError``, which
argparse turns into ``distcheck CMD: error: argument --X: ...`` and exit status 2."""

from __future__ import annotations

import argparse
import math
import re

from pytest_distcheck.i18n import N_, _

SUFFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
                    r"\s*([A-Za-z]*)\s*$")
MAX_COUNT = 1e16  # parameters or tokens: 10^16 is far beyond any model; a larger value is a typo
MAX_WHOLE = 10**9
MUST_BE_POSITIVE = N_("{text!r} must be > 0")
NOT_A_COUNT = N_("{text!r} is not a count (e.g. 7.5e9, 7.5B, 350M)")
UNKNOWN_SUFFIX = N_("{text!r}: {suffix!r} is not a known suffix (K, M, B, T; e.g. 7.5B)")
NOT_FINITE = N_("{text!r} is not a finite number")
OVER = N_("{text!r} is over {limit}; is there a typo?")
UNDER_1000 = N_("{text!r} parameters is under 1,000: did you mean {hint}?")
M_OR_B = N_("{digits}M or {digits}B")
NOT_WHOLE = N_("{text!r} is not a whole number")
AT_LEAST_1 = N_("{text!r} must be >= 1")
NOT_A_NUMBER = N_("{text!r} is not a number")
OUTSIDE = N_("{text!r} is outside {interval}")


def count(text: str) -> float:
    """A parameter count: ``7.5e9``, ``7.5B``, ``175b``, ``350M``, ``1T``, ``2K``, ``7_500_000_000``.

    Suffixes K = 1e3, M = 1e6, B (or G) = 1e9, T = 1e12, any case. A plain number under 1,000 is refused
    with "did you mean 7.5B?": nobody trains a model of 7.5 parameters, but people forget the B.

    Raises:
        argparse.ArgumentTypeError: not a number, an unknown suffix, not finite, <= 0, under 1,000
            without a suffix, or over 1e16.
    """
    match = _COUNT.match(text)
    if match is None:
        sign = text.strip()[:1] in "-"
        message = MUST_BE_POSITIVE if sign and text.strip() else NOT_A_COUNT
        raise argparse.ArgumentTypeError(_(message).format(text=text))
    digits, suffix = match.groups()
    if suffix.upper() not in SUFFIXES:
        raise argparse.ArgumentTypeError(_(UNKNOWN_SUFFIX).format(text=text, suffix=suffix))
    number = float(digits.replace("_", "")) * SUFFIXES[suffix.upper()]
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(_(NOT_FINITE).format(text=text))
    if not number > 0:
        raise argparse.ArgumentTypeError(_(MUST_BE_POSITIVE).format(text=text))
    if number > MAX_COUNT:
        raise argparse.ArgumentTypeError(_(OVER).format(text=text, limit=f"{MAX_COUNT:.0e}"))
    if not suffix and number < 1000:
        hint = _(M_OR_B).format(digits=digits) if number >= 100 else f"{digits}B"
        raise argparse.ArgumentTypeError(_(UNDER_1000).format(text=text, hint=hint))
    return number


def positive_int(text: str) -> int:
    """A whole number from 1 to 10^9 (GPUs, layers, micro-batches...).

    Raises:
        argparse.ArgumentTypeError: not a whole number, < 1 or > 10^9.
    """
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(_(NOT_WHOLE).format(text=text)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(_(AT_LEAST_1).format(text=text))
    if value > MAX_WHOLE:
        raise argparse.ArgumentTypeError(_(OVER).format(text=text, limit=f"{MAX_WHOLE:,}"))
    return value


def real(low: float, high: float, *, low_open: bool = False, high_open: bool = False):
    """An argparse type: a finite float in [low, high] (``low_open``/``high_open`` exclude that end).

    The returned function raises argparse.ArgumentTypeError naming the range, for NaN and infinities too.
    """
    def parse(text: str) -> float:
        try:
            value = float(text.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(_(NOT_A_NUMBER).format(text=text)) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(_(NOT_FINITE).format(text=text))
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if too_low or too_high:
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
            raise argparse.ArgumentTypeError(_(OUTSIDE).format(text=text, interval=interval))
        return value

    parse.__name__ = "number"  # argparse names the type in its messages
    return parse
