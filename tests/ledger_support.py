"""Ledger helpers for tests that write rows by hand: chain them as the kit would, so that only the
problem a test plants is reported (an edit the chain alone would catch needs no helper)."""

from __future__ import annotations

from pytest_distcheck.budget.ledger import COLUMNS, GENESIS, row_hash


def rechained(text: str) -> str:
    """``text`` with every table row's prev_hash and row_hash recomputed in order (as a forger would).
    A row line with only the 12 data cells gets the two hash cells added."""
    out, prev = [], GENESIS
    for line in text.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None or cells[:2] == list(COLUMNS[:2]) or set("".join(cells)) <= set("-:"):
            out.append(line)
            continue
        data = cells[:len(COLUMNS) - 2] if len(cells) >= len(COLUMNS) else cells
        if len(data) != len(COLUMNS) - 2:
            out.append(line)  # a row the test made malformed on purpose
            continue
        h = row_hash(prev, data)
        out.append("| " + " | ".join([*data, prev, h]) + " |")
        prev = h
    return "\n".join(out)
