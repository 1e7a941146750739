"""Where in a Mermaid flowchart's source a node is defined or an edge is written, so a finding can name that line.

Mermaid's parse (:mod:`.mermaid`) gives the graph but no lines; the source is read again here, with its labels
(quoted, bracketed, ``|...|``) and ``%%`` comments blanked in place, so that what is left is ids, keywords and links
on their own lines. Limit: an unquoted edge label (``a -- text --> b``) is left as words; a node id that is also
one of its words may be found there.
"""

from __future__ import annotations

import re

from pytest_distcheck.diagram.markdown import _CLOSE, _skip_label
from pytest_distcheck.diagram.mermaid import _LINK

# What follows a node id where a statement defines the node: a label's opening (``id[``, ``id(``, ``id{``,
# ``id>``, ``id@{``) or a class (``id:::name``).
_DEFINES = re.compile(r"\s*(?:[\[({>]|@\{|:::)")
# Statements that name a node without drawing it.
_STYLING = frozenset({"class", "classdef", "style", "linkstyle", "click"})


def _bare(source: str) -> list[str]:
    """The source's lines, each label and ``%%`` comment made spaces (line breaks kept, so lines and columns stay)."""
    out: list[str] = []
    i = 0
    while i < len(source):
        c = source[i]
        if c == "%" and source.startswith("%%", i):
            end = source.find("\n", i)
            end = len(source) if end < 0 else end
        elif c in "\"|" or c in _CLOSE:
            end = _skip_label(source, i)
        else:
            out.append(c)
            i += 1
            continue
        out.append("".join(ch if ch == "\n" else " " for ch in source[i:end]))
        i = end
    return "".join(out).split("\n")


def _spots(line: str, vid: str) -> list[int]:
    """Where ``vid`` stands as a whole id in a bare line."""
    return [m.start() for m in re.finditer(rf"(?<!\w){re.escape(vid)}(?!\w)", line)]


def node_line(source: str, vid: str) -> int | None:
    """The 1-based line of ``source`` that defines node ``vid``: the first one giving it a label or a class
    (``vid[...]``, ``vid(...)``, ``vid{...}``, ``vid@{...}``, ``vid:::name``, also inside an edge), else the first
    one drawing it (``a --> vid``), else the first ``class``/``style`` line naming it; ``None`` when none does."""
    lines = _bare(source)
    drawn = styled = None
    for n, (bare, raw) in enumerate(zip(lines, source.split("\n"), strict=True), start=1):
        spots = _spots(bare, vid)
        if not spots:
            continue
        if any(_DEFINES.match(raw, p + len(vid)) for p in spots):
            return n
        words = bare.split()
        if words and words[0].lower() in _STYLING:
            styled = styled or n
        else:
            drawn = drawn or n
    return drawn or styled


def edge_line(source: str, start: str, end: str) -> int | None:
    """The 1-based line of ``source`` where the edge from ``start`` to ``end`` (ids as written: a subgraph's id for
    an edge drawn to it) is written: the first line with ``start``, then a link, then ``end``; else the line that
    defines ``start`` (:func:`node_line`)."""
    for n, bare in enumerate(_bare(source), start=1):
        ends = _spots(bare, end)
        for p in _spots(bare, start):
            if any(q > p and _LINK.search(bare, p + len(start), q) for q in ends):
                return n
    return node_line(source, start)
