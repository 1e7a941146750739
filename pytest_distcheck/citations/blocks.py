"""A note's statements as a reader sees them: paragraphs, list items, table rows and headings, parsed
with markdown-it-py (CommonMark plus tables).

Only what renders counts: HTML, fenced and indented code and link targets are left out; inline code,
backslash escapes and emphasis markers are kept as written (the citation grammar reads them). Each
table row is a statement of its own; a heading is never a decision. Why, and the fixture that pins
each: docs/design/citations.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

# text_join would fold escapes into plain text and lose the backslash the quote grammar needs.
_MD = MarkdownIt("commonmark").enable("table").disable("text_join")


@dataclass(frozen=True)
class Block:
    """A statement of a note: a paragraph, list item, table row or heading.

    Attributes:
        line: its first line in the note (1-based); ``end``: the line after its last.
        text: what renders, as written: hidden parts left out, inline code and escapes kept.
        kind: ``"paragraph"``, ``"list item"``, ``"table row"`` or ``"heading"``.
        source: its source lines (list markers and indentation stripped), to find the line of a
            citation inside it.
    """

    line: int
    text: str
    kind: str
    end: int = 0
    source: str = ""


def render(children: list[Token]) -> str:
    """The text an inline token renders, with escapes, entities and emphasis markers as written."""
    out: list[str] = []
    for tok in children:
        if tok.type in ("text", "code_inline"):
            out.append(tok.content)
        elif tok.type == "text_special":  # an escape or entity, kept as typed
            out.append(tok.markup)
        elif tok.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif tok.type in ("em_open", "em_close", "strong_open", "strong_close"):
            out.append(tok.markup)
        elif tok.type == "image":
            out.append(render(tok.children or []))  # its alt text renders where the image cannot
        # html_inline (comments, tags) and link_open/close (targets) render no text.
    return "".join(out)


def blocks(text: str) -> list[Block]:
    """The statements of Markdown ``text`` in order; line numbers count from the first line of ``text``."""
    tokens = _MD.parse(text)
    lines = text.split("\n")
    out: list[Block] = []
    containers: list[str] = []
    kind = ""
    row: list[str] | None = None
    row_map: list[int] = [0, 0]
    for tok in tokens:
        if tok.type in ("list_item_open", "blockquote_open"):
            containers.append(tok.type)
        elif tok.type in ("list_item_close", "blockquote_close"):
            containers.pop()
        elif tok.type == "heading_open":
            kind = "heading"
        elif tok.type == "paragraph_open":
            kind = "list item" if containers and containers[-1] == "list_item_open" else "paragraph"
        elif tok.type == "tr_open":
            row, row_map = [], tok.map or [0, 0]
        elif tok.type == "tr_close" and row is not None:
            out.append(
                Block(row_map[0] + 1, " | ".join(row), "table row", row_map[1] + 1,
                      "\n".join(lines[row_map[0] : row_map[1]]))
            )
            row = None
        elif tok.type == "inline":
            if row is not None:
                row.append(render(tok.children or []))
            elif kind and tok.map:
                out.append(Block(tok.map[0] + 1, render(tok.children or []), kind, tok.map[1] + 1, tok.content))
            kind = ""
    return out
