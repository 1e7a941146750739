"""The Mermaid blocks of a Markdown page, with the lines they sit on.

Fences are found by a CommonMark parser (markdown-it-py), so indented fences, ``~~~`` fences, fences
inside list items and longer backtick runs are read the way GitHub and other renderers read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from markdown_it import MarkdownIt

from pytest_distcheck import textnorm
from pytest_distcheck.i18n import N_


@dataclass(frozen=True)
class MermaidBlock:
    """One fenced block whose info string starts with ``mermaid`` (any case).

    Attributes:
        source: the text between the fences (indentation of an enclosing list item removed).
        fence_line: 1-based line of the opening fence.
        closed: whether a closing fence was found (an unclosed fence runs to the end of the page).
    """

    source: str
    fence_line: int
    closed: bool = True

    @property
    def first_line(self) -> int:
        """1-based page line of the block's first source line."""
        return self.fence_line + 1

    def page_line(self, block_line: int | None) -> int:
        """The page line of a 1-based line of the block, clamped to the block (a parser that ran off
        the end names a line past it)."""
        if block_line is None:
            return self.fence_line
        last = self.fence_line + max(1, self.source.count("\n"))
        return min(self.fence_line + max(block_line, 1), last)


def drawing_key(source: str) -> str:
    """A Mermaid block's source normalised to what it draws, so that two blocks with the same key draw the same
    diagram: the steps of :data:`DRAWING_STEPS`, in order (letters made their look-alike skeleton, comment lines
    and blank lines dropped, node and subgraph ids renamed in order of first appearance, runs of whitespace made
    one space). A diagram copied with its ids renamed, its lines re-spaced or its letters swapped
    for look-alikes has the reference's key. Limit: reordered statements give another key.
    """
    for step in DRAWING_STEPS:
        source = step(source)
    return source


# What drawing_key leaves aside, as a message says it.
DRAWING_ASIDE = N_("comments, spacing, node ids and look-alike letters aside")


def _letters_alike(source: str) -> str:
    """Each letter as its TR39 skeleton (:func:`pytest_distcheck.textnorm.skeleton`: Cyrillic ``а`` is Latin
    ``a``); punctuation, digits and quotes stay, so Mermaid's syntax reads as before."""
    return "".join(textnorm.skeleton(c) if c.isalpha() else c for c in source)


def _drop_comments(source: str) -> str:
    """The lines but ``%%`` comment lines."""
    return "\n".join(line for line in source.split("\n") if not line.lstrip().startswith("%%"))


# Mermaid's own words: never a node id.
_KEYWORDS = frozenset({"flowchart", "graph", "subgraph", "end", "direction", "td", "tb", "bt", "rl", "lr",
                       "class", "classdef", "style", "linkstyle", "click", "default"})
_WORD = re.compile(r"\w+")
_CLOSE = {"[": "]", "(": ")", "{": "}"}


def _skip_label(text: str, i: int) -> int:
    """The index after the label that opens at ``text[i]``: a quoted string, a ``|...|`` edge label, or a bracket
    group (``[...]``, ``(["..."])``, ``{...}``) with the quotes inside it."""
    if text[i] in "\"|":
        end = text.find(text[i], i + 1)
        return len(text) if end < 0 else end + 1
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = text.find('"', i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if c in _CLOSE:
            depth += 1
        elif c in _CLOSE.values():
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _rename_ids(source: str) -> str:
    """Every word outside labels (node, subgraph, edge and class ids) renamed ``n1``, ``n2``, ... in order of first
    appearance; Mermaid's keywords and numbers kept; labels (quoted, bracketed, ``|...|``) kept as written."""
    out: list[str] = []
    names: dict[str, str] = {}
    i = 0
    while i < len(source):
        c = source[i]
        if c in "\"|" or c in _CLOSE:
            end = _skip_label(source, i)
            out.append(source[i:end])
            i = end
        elif match := _WORD.match(source, i):
            word = match.group()
            keep = word.lower() in _KEYWORDS or word.isdigit()
            out.append(word if keep else names.setdefault(word, f"n{len(names) + 1}"))
            i = match.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _collapse_space(source: str) -> str:
    """Runs of whitespace (line breaks and blank lines included) made one space."""
    return " ".join(source.split())


# The steps of drawing_key, in order. Folding confusable characters (a Unicode TR39 skeleton) belongs first, so
# that what the later steps compare is what a reader sees: add it at the head of this tuple.
DRAWING_STEPS: tuple[Callable[[str], str], ...] = (_letters_alike, _drop_comments, _rename_ids, _collapse_space)


def without_mermaid(markdown: str) -> str:
    """``markdown`` with the lines of every Mermaid block, its fences included, left empty (so the text
    around a block stays apart from it and the other lines keep their numbers)."""
    lines = markdown.split("\n")
    for b in mermaid_blocks(markdown):
        last = b.fence_line + b.source.count("\n") + (1 if b.closed else 0)  # 1-based: the closing fence
        for i in range(b.fence_line - 1, min(last, len(lines))):
            lines[i] = ""
    return "\n".join(lines)


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


def mermaid_blocks(markdown: str) -> list[MermaidBlock]:
    """Every Mermaid block of a page, in page order."""
    blocks = []
    for tok in _parser().parse(markdown):
        if tok.type != "fence" or tok.map is None:
            continue
        words = tok.info.split()
        if not words or words[0].lower() != "mermaid":
            continue
        start, end = tok.map
        # markdown-it's map spans the fences too; without a closing fence it spans only fence + body
        closed = end - start == tok.content.count("\n") + 2
        blocks.append(MermaidBlock(source=tok.content, fence_line=start + 1, closed=closed))
    return blocks


def linked_targets(markdown: str) -> list[tuple[str, int]]:
    """The targets of every image and link on the page, with their 1-based line, in page order.

    Fragments (``#...``) and queries are dropped; URLs are returned as written.
    """
    out = []
    for tok in _parser().parse(markdown):
        if tok.type != "inline" or tok.map is None:
            continue
        for child in tok.children or []:
            target = child.attrs.get("src") if child.type == "image" else child.attrs.get("href")
            if child.type in ("image", "link_open") and isinstance(target, str):
                out.append((target.split("#")[0].split("?")[0], tok.map[0] + 1))
    return out


def links_to(markdown: str, page: PurePosixPath, target: PurePosixPath) -> bool:
    """Whether the page (at ``page``, a path relative to some root) links or embeds ``target``
    (relative to the same root) by a relative path."""
    for href, _ in linked_targets(markdown):
        if not href or "://" in href or href.startswith("/"):
            continue
        joined = PurePosixPath(page.parent, href)
        parts: list[str] = []
        for part in joined.parts:
            if part == "..":
                if parts:
                    parts.pop()
            elif part != ".":
                parts.append(part)
        if PurePosixPath(*parts) == target:
            return True
    return False
