r"""The citation syntax of Markdown notes, and how a note is split into the statements citations stand in.

A citation is written by hand, inline, where the claim is made::

    [cite: PACKAGE PATH::SYMBOL "QUOTE"]

- PACKAGE: the distribution name as pip knows it (``megatron-core``, ``torch``).
- PATH: the file, relative to where the distribution is installed (site-packages), with ``/``:
  ``megatron/core/tensor_parallel/layers.py``.
- SYMBOL: a class, function or assigned name defined in that file, dotted for members:
  ``ColumnParallelLinear.forward``.
- "QUOTE": optional; a short piece of the symbol's source (12-100 characters, whitespace is
  normalised, so it may cross a line break). Inside it, write ``\"`` for a double quote.

Example: ``[cite: torch torch/distributed/fsdp/api.py::ShardingStrategy "HYBRID_SHARD = auto()"]``.
Wrapping a citation in backticks is fine (it renders as code). A citation may wrap over lines inside
one paragraph or list item. Citations inside fenced code blocks are examples and are ignored.

A note may open with front matter recording the versions it was checked against::

    ---
    checked-against: megatron-core 0.16.1, torch 2.13.0
    ---
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_distcheck.citations.quote import unescape
from pytest_distcheck.errors import ConfigError

FORM = '[cite: PACKAGE PATH::SYMBOL "QUOTE"]'
OPEN = "[cite:"
_CITATION = re.compile(
    r"\[cite:\s+(?P<package>[A-Za-z0-9][A-Za-z0-9._-]*)\s+(?P<path>[^\s\]\"]+?)::(?P<symbol>[A-Za-z_][\w.]*)"
    r'(?:\s+"(?P<quote>(?:[^"\\]|\\.)*)")?\s*\]'
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")


@dataclass(frozen=True)
class Block:
    """A paragraph, list item or heading of a note: the statement a citation in it stands with.

    Attributes:
        line: its first line (1-based).
        text: its lines joined with newlines, as written.
        kind: ``"paragraph"``, ``"list item"`` or ``"heading"``.
    """

    line: int
    text: str
    kind: str

    def own_words(self) -> int:
        """How many words the block says besides its citations (what the decision is stated in)."""
        return len(_WORD.findall(_CITATION.sub(" ", self.text)))


@dataclass(frozen=True)
class Citation:
    """One citation as written in a note.

    Attributes:
        package, path, symbol: as written; ``quote`` unescaped, or None when the citation has none.
        line: the line of the note where it starts (1-based).
        text: the citation exactly as written (for messages).
        block: the paragraph or list item it stands in.
    """

    package: str
    path: str
    symbol: str
    quote: str | None
    line: int
    text: str
    block: Block

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes two citations the same: package, path, symbol and normalised quote."""
        return (self.package.lower(), self.path, self.symbol, " ".join((self.quote or "").split()))


@dataclass(frozen=True)
class Malformed:
    """Text that opens a citation (``[cite:``) but is not of the form :data:`FORM`."""

    line: int
    text: str
    problem: str


@dataclass
class ParsedNote:
    """A note split into its front matter, citations and malformed citations."""

    path: Path
    checked_against: dict[str, str] | None = None  # package -> version; None when not recorded
    citations: list[Citation] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)


def front_matter(lines: list[str], path: Path) -> tuple[dict[str, str], int]:
    """The ``key: value`` pairs of the front matter and the index of the first body line.

    Raises:
        ConfigError: the front matter opens with ``---`` and never closes (names the file, line 1).
    """
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            pairs = {}
            for raw in lines[1:end]:
                key, sep, value = raw.partition(":")
                if sep:
                    pairs[key.strip()] = value.strip()
            return pairs, end + 1
    raise ConfigError(path, "line 1", "front matter opened with '---' is never closed by a '---' line")


def parse_versions(value: str, path: Path, line: int) -> dict[str, str]:
    """``"megatron-core 0.16.1, torch 2.13.0"`` -> ``{"megatron-core": "0.16.1", "torch": "2.13.0"}``.

    Raises:
        ConfigError: an entry is not ``NAME VERSION`` (names the file, line and the entry).
    """
    out: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        parts = entry.split()
        if len(parts) != 2:
            raise ConfigError(path, f"line {line}", f"checked-against entry {entry!r} is not 'PACKAGE VERSION'")
        out[parts[0]] = parts[1]
    return out


def blocks(lines: list[str], first: int) -> list[Block]:
    """The paragraphs, list items and headings of ``lines[first:]``, outside fenced code blocks."""
    out: list[Block] = []
    current: list[str] = []
    start = 0
    kind = "paragraph"
    in_fence = False

    def flush() -> None:
        if current:
            out.append(Block(start + 1, "\n".join(current), kind))
            current.clear()

    for i in range(first, len(lines)):
        line = lines[i]
        if _FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or not line.strip():
            flush()
            continue
        if line.lstrip().startswith("#"):
            flush()
            out.append(Block(i + 1, line, "heading"))
            continue
        if _LIST_ITEM.match(line):
            flush()
            kind = "list item"
        elif not current:
            kind = "paragraph"
        if not current:
            start = i
        current.append(line)
    flush()
    return out


def parse_note(text: str, path: Path) -> ParsedNote:
    """Find every citation of a note, with the block it stands in and the recorded versions.

    Raises:
        ConfigError: the front matter is not closed or its ``checked-against`` entry is malformed.
    """
    path = Path(path)
    lines = text.splitlines()
    pairs, body = front_matter(lines, path)
    note = ParsedNote(path)
    if "checked-against" in pairs:
        line = next(n for n, raw in enumerate(lines, 1) if raw.strip().startswith("checked-against"))
        note.checked_against = parse_versions(pairs["checked-against"], path, line)
    for block in blocks(lines, body):
        matched: list[tuple[int, int]] = []
        for m in _CITATION.finditer(block.text):
            matched.append(m.span())
            note.citations.append(
                Citation(
                    package=m["package"],
                    path=m["path"],
                    symbol=m["symbol"],
                    quote=unescape(m["quote"]) if m["quote"] is not None else None,
                    line=block.line + block.text.count("\n", 0, m.start()),
                    text=" ".join(m[0].split()),
                    block=block,
                )
            )
        for m in re.finditer(re.escape(OPEN), block.text):
            if not any(a <= m.start() < b for a, b in matched):
                fragment = block.text[m.start() :].split("]", 1)[0][:120]
                note.malformed.append(
                    Malformed(
                        line=block.line + block.text.count("\n", 0, m.start()),
                        text=" ".join(fragment.split()) + "]",
                        problem=_why_malformed(block.text[m.start() :]),
                    )
                )
    return note


def _why_malformed(rest: str) -> str:
    """A guess at what is wrong with text that opens ``[cite:`` but does not parse."""
    body = rest[len(OPEN) :]
    words = body.split(None, 2)
    if not words or words[0].startswith("]"):
        return f"empty citation; expected {FORM}"
    if len(words) < 2 or "::" not in words[1]:
        return f"no PATH::SYMBOL after the package name; expected {FORM}"
    if not re.match(r"[^:]+::[A-Za-z_]", words[1]):
        return f"no SYMBOL after '::'; expected {FORM}"
    if '"' in body:
        after = body[body.index('"') + 1 :]
        closed = re.match(r'(?:[^"\\]|\\.)*"\s*(.?)', after)
        if closed is None:
            return f"the quote is never closed with '\"'; expected {FORM}"
        if closed[1] != "]":
            return f"text after the closing '\"' of the quote; expected {FORM}"
    return f"not of the form {FORM} (check the spaces, the '::' and the closing ']')"
