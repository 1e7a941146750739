"""Parse what a learner types: numbers in forgiving formats, and choice letters.

Numbers: ``0.375``, ``37.5%``, ``3/8``, ``1.2e9``, ``1.2 x 10^9``, ``1,024``, ``2_000``, optionally
followed by the item's unit (``16.6 GB``) or ``x`` for a factor (``1.5x``); a leading ``$`` is ignored.
Choices: a letter (``b``, ``B)``, ``(b)``) or its 1-based number (``2``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_SCI = re.compile(r"^([+-]?[\d.]+)\s*[x×*]\s*10\s*\^\s*([+-]?\d+)$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")


class AnswerError(ValueError):
    """The text is not an answer of the expected kind; the message says what would be."""


def _plain(text: str) -> float:
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    text = text.replace("_", "")
    sci = _SCI.match(text)
    if sci:
        return float(sci.group(1)) * 10.0 ** int(sci.group(2))
    if "/" in text:
        num, _, den = text.partition("/")
        value = Fraction(_plain(num.strip())) / Fraction(_plain(den.strip()))
        return float(value)
    return float(text)


def parse_number(text: str, unit: str = "") -> float:
    """The number in ``text`` (see the module docstring for the formats).

    Args:
        text: what the learner typed.
        unit: the item's unit; when ``text`` ends with it (any case) it is ignored.

    Raises:
        AnswerError: empty, not a number, a zero denominator, or not finite.
    """
    value = text.strip().removeprefix("$").strip()
    if not value:
        raise AnswerError("no answer given")
    for suffix in (unit, "x", "×"):
        if suffix and value.lower().endswith(suffix.lower()) and len(value) > len(suffix):
            value = value[: -len(suffix)].strip()
            break
    percent = value.endswith("%")
    if percent:
        value = value[:-1].strip()
    try:
        number = _plain(value)
    except (ValueError, ZeroDivisionError):
        raise AnswerError(f"{text.strip()!r} is not a number (try 0.375, 37.5%, 3/8 or 1.2e9)") from None
    if not math.isfinite(number):
        raise AnswerError(f"{text.strip()!r} is not a finite number")
    return number / 100 if percent else number


def parse_choice(text: str, n_choices: int) -> str:
    """The letter A.. of the choice ``text`` names, given ``n_choices`` choices.

    Raises:
        AnswerError: not a letter or number of one of the choices.
    """
    letters = "ABCDEF"[:n_choices]
    value = text.strip().strip("()").rstrip(").").strip().upper()
    if len(value) == 1 and value in letters:
        return value
    if value.isdigit() and 1 <= int(value) <= n_choices:
        return letters[int(value) - 1]
    raise AnswerError(f"answer with a letter {letters[0]}-{letters[-1]} (or 1-{n_choices})")
