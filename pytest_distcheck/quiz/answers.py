"""Parse what a learner types: numbers in forgiving formats, and choice letters.

Numbers: ``0.375``, ``37.5%`` (unitless items), ``3/8``, ``1.2e9``, ``1.2 x 10^9``, ``1,024``, ``2_000``,
optionally followed by a unit of the item's kind, converted to the item's unit: counts take K, M, B
(billion), T and their words (an item in billions reads ``2.12``, ``2.12B`` and ``2.12e9`` alike: a
bare number of a million or more is a plain count), bytes take B, KB..TB and KiB..TiB, times s, ms, us,
ns, rates B/s..TB/s; ``x`` marks a factor (``1.5x``); a leading ``$`` is ignored.
A decimal comma is read where it cannot group thousands (``0,375``, ``37,5%``, ``2,5e9``, ``0,250``); a
comma before three digits after a leading 1-999 groups thousands in every language (``1,024`` is 1024), so
the same text always grades alike; a Spanish attempt asks again instead (:func:`comma_is_ambiguous`).
Choices: a letter (``b``, ``B)``, ``(b)``) or its 1-based number (``2``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from pytest_distcheck.i18n import N_, _

_SPLIT = re.compile(r"^(.*?)\s*([A-Za-zµ×/$]*)$")
_COUNT = {"": 1.0, "x": 1.0, "×": 1.0, "flop": 1.0, "flops": 1.0, "k": 1e3, "thousand": 1e3, "m": 1e6,
          "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9, "t": 1e12, "trillion": 1e12}
_BYTES = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30, "tib": 2.0**40}
# kind -> (unit -> its size in the kind's base unit); the item's unit picks the kind (B is bytes in a GB item)
UNITS: dict[str, dict[str, float]] = {
    "count": _COUNT,
    "bytes": _BYTES,
    "time": {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0},
    "rate": {f"{u}/s": v for u, v in _BYTES.items() if u not in ("byte", "bytes")},
    "money": {"usd": 1.0, "$": 1.0},
}
_SCI = re.compile(r"^([+-]?[\d.,]+)\s*[x×*]\s*10\s*\^\s*([+-]?\d+)$")
_THOUSANDS = re.compile(r"^[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d*)?$")
_DECIMAL_COMMA = re.compile(r"^[+-]?\d*,\d+(?:[eE][+-]?\d+)?$")
_AMBIGUOUS = re.compile(r"(?<![\d,.])[1-9]\d{0,2},\d{3}(?![\d,.])")  # 1,024: thousands or a decimal comma

NO_ANSWER = N_("no answer given")
NOT_A_NUMBER = N_("{text!r} is not a number (try 0.375, 37.5%, 3/8 or 1.2e9)")
NOT_FINITE = N_("{text!r} is not a finite number")
NOT_FINITE_IN = N_("{text!r} is not a finite number in {unit}")
PERCENT_BUT = N_("{text!r}: a percentage, but this item asks for {wanted}")
NOT_A_UNIT = N_("{text!r}: {typed!r} is not a unit this item takes; give {wanted}")
NUMBER_IN = N_("a number in {unit}")
NUMBER_IN_OR = N_("a number in {unit} (or with {shown})")
NUMBER_NO_UNIT = N_("a number without a unit")
NUMBER_NO_UNIT_OR = N_("a number without a unit (or with {shown})")
LETTER = N_("answer with a letter {first}-{last} (or 1-{n})")
AMBIGUOUS_COMMA = N_("{text!r}: the comma could group thousands or be a decimal comma; type {whole} or {decimal}")


class AnswerError(ValueError):
    """The text is not an answer of the expected kind; the message says what would be."""


def _plain(text: str) -> float:
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    elif _DECIMAL_COMMA.match(text):
        text = text.replace(",", ".")
    text = text.replace("_", "")
    sci = _SCI.match(text)
    if sci:
        return _plain(sci.group(1)) * 10.0 ** int(sci.group(2))
    if "/" in text:
        num, _, den = text.partition("/")
        value = Fraction(_plain(num.strip())) / Fraction(_plain(den.strip()))
        return float(value)
    return float(text)


def unit_kind(unit: str) -> tuple[str, float]:
    """(kind, size in the kind's base unit) of an item's ``unit``; unknown units are their own kind."""
    key = unit.strip().lower()
    for kind in ("count", "bytes", "time", "rate", "money"):  # "B" alone is a count (billion)
        if key in UNITS[kind]:
            return kind, UNITS[kind][key]
    return key, 1.0


def _kind_words(kind: str, unit: str) -> str:
    if kind not in UNITS:
        return _(NUMBER_IN).format(unit=unit) if unit else _(NUMBER_NO_UNIT)
    shown = {"count": "K, M, B, T", "bytes": "B, KB, MB, GB, TB, KiB..TiB", "time": "s, ms, us, ns",
             "rate": "MB/s, GB/s, TB/s", "money": "USD"}[kind]
    return _(NUMBER_IN_OR).format(unit=unit, shown=shown) if unit else _(NUMBER_NO_UNIT_OR).format(shown=shown)


def comma_is_ambiguous(text: str) -> str | None:
    """None, or what to type instead when ``text`` holds a number like ``1,024``: thousands to
    :func:`parse_number`, one point zero two four to a reader of Spanish (the session asks again)."""
    found = _AMBIGUOUS.search(text)
    if found is None:
        return None
    number = found.group(0)
    return _(AMBIGUOUS_COMMA).format(text=text.strip(), whole=number.replace(",", ""),
                                     decimal=number.replace(",", "."))


def parse_number(text: str, unit: str = "") -> float:
    """The number in ``text``, in the item's ``unit`` (see the module docstring for the formats).

    Args:
        text: what the learner typed.
        unit: the item's unit (``GB``, ``ms``, ``billion``, ``""``...); a unit typed after the number
            must be of the same kind and is converted (``3750 MB`` is 3.75 for a GB item).

    Raises:
        AnswerError: empty, not a number, a zero denominator, not finite (also once converted to the
            item's unit), or a unit of another kind (the message names the unit expected).
    """
    value = text.strip().removeprefix("$").strip()
    if not value:
        raise AnswerError(_(NO_ANSWER))
    percent = value.endswith("%")
    if percent:
        value = value[:-1].strip()
    number_text, typed = _SPLIT.match(value).groups()  # type: ignore[union-attr]
    try:
        number = _plain(number_text.strip())
    except OverflowError:  # 1 x 10^400, inf/2, 1e308/1e-308: past what a float holds
        number = math.inf
    except (ValueError, ZeroDivisionError):
        raise AnswerError(_(NOT_A_NUMBER).format(text=text.strip())) from None
    if not math.isfinite(number):
        raise AnswerError(_(NOT_FINITE).format(text=text.strip()))
    kind, size = unit_kind(unit)
    if percent:
        if unit or typed:
            raise AnswerError(_(PERCENT_BUT).format(text=text.strip(), wanted=_kind_words(kind, unit)))
        return number / 100
    if not typed:
        if kind == "count" and size > 1 and abs(number) >= size / 1e3:
            return number / size  # a plain count (2.12e9, 2123382784) for an item in billions
        return number
    table = UNITS.get(kind, {kind: 1.0})
    key = typed.lower()
    if key not in table:
        raise AnswerError(_(NOT_A_UNIT).format(text=text.strip(), typed=typed, wanted=_kind_words(kind, unit)))
    number = number * table[key] / size
    if not math.isfinite(number):  # 1e308 TB in an item in bytes
        raise AnswerError(_(NOT_FINITE_IN).format(text=text.strip(), unit=unit) if unit else
                          _(NOT_FINITE).format(text=text.strip()))
    return number


def parse_choice(text: str, n_choices: int) -> str:
    """The letter A.. of the choice ``text`` names, given ``n_choices`` choices.

    Raises:
        AnswerError: not a letter or number of one of the choices.
    """
    letters = "ABCDEF"[:n_choices]
    value = text.strip().strip("()").rstrip(").").strip().upper()
    if len(value) == 1 and value in letters:
        return value
    if value.isdecimal() and len(value) <= 2 and 1 <= int(value) <= n_choices:  # not isdigit(): int() refuses "²"
        return letters[int(value) - 1]
    raise AnswerError(_(LETTER).format(first=letters[0], last=letters[-1], n=n_choices))
