"""Quotes: whitespace normalisation, length limits and the nearest near-miss inside a span."""

from __future__ import annotations

import difflib
import re

# A quote pins a place: long enough not to match anywhere by chance, short enough to read in a note.
MIN_QUOTE_CHARS = 12
MAX_QUOTE_CHARS = 100
# The quote of the citation `distcheck cite --find` prints: the learner replaces it, since the kit must not pick the
# evidence.
QUOTE_TO_FILL = "..."


def normalise(text: str) -> str:
    """``text`` with every run of whitespace (spaces, tabs, newlines) made one space, ends stripped."""
    return " ".join(text.split())


def nearest(quote: str, source_lines: list[str], first_line: int) -> tuple[int, str] | None:
    """The stretch of ``source_lines`` most like ``quote``, as (line number, text), or None if none is close.

    Candidates are one to three consecutive lines, normalised and cut to the quote's length plus a
    little, so a typo in a quote that spans a line break is found too. ``first_line`` is the line
    number of ``source_lines[0]``. Uses :func:`difflib.get_close_matches` (ratio >= 0.6).
    """
    stripped = [normalise(line) for line in source_lines]
    candidates: dict[str, int] = {}
    for i in range(len(stripped)):
        joined = ""
        for j in range(i, min(i + 3, len(stripped))):
            joined = normalise(f"{joined} {stripped[j]}")
            if len(joined) >= len(quote):
                break
        for k in range(len(joined)):
            # Start the window at each word of the first line, so the quote may begin mid-line.
            if k == 0 or (joined[k - 1] == " " and k < len(stripped[i])):
                # A word may open with a quote mark or bracket the quote leaves out.
                start = k
                while start < len(joined) - 1 and joined[start] in "\"'([{":
                    start += 1
                window = joined[start : start + len(quote) + 5]
                candidates.setdefault(window, first_line + i)
    match = difflib.get_close_matches(quote, list(candidates), n=1, cutoff=0.6)
    if not match:
        return None
    return candidates[match[0]], match[0]


_ESCAPE = re.compile(r"\\(.)")


def unescape(raw: str) -> str:
    r"""A quote as written between double quotes in a note, with ``\"`` and ``\\`` unescaped."""
    return _ESCAPE.sub(r"\1", raw)
