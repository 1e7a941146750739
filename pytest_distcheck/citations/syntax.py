r"""The citation syntax of Markdown notes, and how a note is split into the statements citations stand in.

A citation is written by hand, inline, where the claim is made: ``[cite: PACKAGE PATH::SYMBOL "QUOTE"]``
(:data:`FORM`): PACKAGE the distribution as pip knows it, PATH the file relative to site-packages,
SYMBOL a class, function or assigned name defined there (dotted for members), "QUOTE" optional, 12-100
characters of the symbol's source (``\"`` for a double quote). The grammar is decided on the parsed
text (:mod:`.blocks`), so a citation may wrap over any line; one a reader cannot see is no citation.
A note may open with front matter ``checked-against: megatron-core 0.16.1, torch 2.13.0``. The full
grammar with examples: docs/design/citations.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_distcheck.citations.blocks import Block, blocks
from pytest_distcheck.citations.quote import unescape
from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _, ngettext

FORM = '[cite: PACKAGE PATH::SYMBOL "QUOTE"]'
OPEN = "[cite:"
CITATION = re.compile(
    r"\[cite:\s+(?P<package>[A-Za-z0-9][A-Za-z0-9._-]*)\s+(?P<path>[^\s\]\"]+?)::(?P<symbol>[A-Za-z_][\w.]*)"
    r'(?:\s+"(?P<quote>(?:[^"\\]|\\.)*)")?\s*\]'
)
# A citation whose quote is still open at the end of its statement (it wrapped onto a line that
# Markdown reads as a heading, list item or the like).
_OPEN_QUOTE = re.compile(r'\[cite:\s+\S+\s+\S+::[A-Za-z_][\w.]*\s+"(?:[^"\\]|\\.)*\Z')
# ``[Cite:``, ``[cit:``, ``[cite :``, ``[cita:`` or ``[cite`` before ``PACKAGE PATH::``: meant as a citation.
_MISSPELT = re.compile(r"\[\s*(?i:cit[a-z]*)\s*:?(?=\s+[A-Za-z0-9][\w.-]*\s+[^\s\]\"]+::)")
# A malformed citation as written, up to its ``]`` outside the quote.
_TO_BRACKET = re.compile(r'(?:[^"\]]|"(?:[^"\\]|\\.)*")*\]')
ECHO_CHARS = 200  # a malformed citation longer than this is echoed cut, ending "..."
WRAP_LINES = 5
_CURLY = "\u201c\u201d\u2018\u2019"
_URL = re.compile(r"https?://|(?:www\.)?github\.com/")
UNCLOSED_FRONT_MATTER = N_("front matter opened with '---' is never closed by a '---' line")
NOT_PACKAGE_VERSION = N_("checked-against entry {entry!r} is not 'PACKAGE VERSION'")
_BLOB = re.compile(r"/(?:blob|tree)/[^/]+/(?P<path>[^#\s\]]+)(?:#L(?P<line>\d+))?")

__all__ = ["CITATION", "FORM", "Block", "Citation", "Malformed", "ParsedNote", "parse_note"]


@dataclass(frozen=True)
class Citation:
    """One citation as written in a note.

    Attributes:
        package, path, symbol: as written; ``quote`` unescaped, or None when the citation has none.
        line: the line of the note where it starts (1-based).
        text: the citation exactly as written (for messages).
        block: the paragraph, list item or table row it stands in.
    """

    package: str
    path: str
    symbol: str
    quote: str | None
    line: int
    text: str
    block: Block


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
    unseen: int = 0  # ``[cite:`` a reader does not see (HTML comments, code): never counted, but told


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
    raise ConfigError(path, at_line(1), _(UNCLOSED_FRONT_MATTER))


def parse_versions(value: str, path: Path, line: int) -> dict[str, str]:
    """``"megatron-core 0.16.1, torch 2.13.0"`` -> ``{"megatron-core": "0.16.1", "torch": "2.13.0"}``.

    Raises:
        ConfigError: an entry is not ``NAME VERSION`` (names the file, line and the entry).
    """
    out: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        parts = entry.split()
        if len(parts) != 2:
            raise ConfigError(path, at_line(line), _(NOT_PACKAGE_VERSION).format(entry=entry))
        out[parts[0]] = parts[1]
    return out


def parse_note(text: str, path: Path) -> ParsedNote:
    """Find every citation a reader of the note sees, with the statement it stands in, and the
    recorded versions. A UTF-8 byte-order mark and CRLF line ends are accepted.

    Raises:
        ConfigError: the front matter is not closed or its ``checked-against`` entry is malformed.
    """
    path = Path(path)
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    pairs, body = front_matter(lines, path)
    note = ParsedNote(path)
    if "checked-against" in pairs:
        line = next(n for n, raw in enumerate(lines, 1) if raw.strip().startswith("checked-against"))
        note.checked_against = parse_versions(pairs["checked-against"], path, line)
    # Front matter becomes blank lines, so Markdown line numbers are the note's.
    consumed_to = 0
    for block in blocks("\n" * body + "\n".join(lines[body:])):
        if block.line < consumed_to:
            continue  # its lines carry the end of a quote that wrapped from the block before
        text, source = block.text, block.source
        opened = _OPEN_QUOTE.search(text) if block.kind != "table row" else None
        if opened is not None and not CITATION.match(text, opened.start()):
            extra = _continuation(lines, block.end - 1, text[opened.start() :])
            if extra is not None:
                text += "\n" + "\n".join(lines[block.end - 1 : block.end - 1 + extra])
                source += "\n" + "\n".join(lines[block.end - 1 : block.end - 1 + extra])
                consumed_to = block.end + extra
        _scan(note, block, text, source)
    body_text = "\n".join(lines[body:])
    written = sum(m.text.startswith(OPEN) for m in note.malformed)  # a misspelt opening holds no "[cite:"
    note.unseen = max(0, body_text.count(OPEN) - len(note.citations) - written)
    hiding = _unclosed("\n" * body + body_text)
    if hiding is not None:  # it hides citations: say why
        note.malformed.append(Malformed(hiding[0], lines[hiding[0] - 1].strip(), hiding[1]))
    return note


UNCLOSED_FENCE = N_("this code fence is never closed, so everything below it renders as code and no citation there "
                    "is seen (0 counted); close the block with a line of {fence}")
UNCLOSED_COMMENT = N_("this `<!--` is never closed, so everything below it is hidden ({citations}); close it with "
                      "`-->`")


def _unclosed(text: str) -> tuple[int, str] | None:
    """(1-based line, problem) of a fenced code block or HTML comment that runs unclosed to the end of
    ``text`` and hides a citation, or None."""
    from pytest_distcheck.citations.blocks import _MD

    lines = text.split("\n")
    for tok in _MD.parse(text):
        if tok.type == "fence" and tok.map:
            last = lines[tok.map[1] - 1].strip()
            closed = tok.map[1] - tok.map[0] >= 2 and last.startswith(tok.markup) and set(last) == {tok.markup[0]}
            if not closed and OPEN in "\n".join(lines[tok.map[0] + 1 :]):
                return tok.map[0] + 1, _(UNCLOSED_FENCE).format(fence=tok.markup)
        elif (tok.type == "html_block" and tok.map and tok.content.lstrip().startswith("<!--")
              and "-->" not in tok.content and not "".join(lines[tok.map[1] :]).strip()):
            n = "\n".join(lines[tok.map[0] :]).count(OPEN)  # it runs to the end: everything below is hidden
            if n:
                hidden = ngettext("{n} citation", "{n} citations", n).format(n=n)
                return tok.map[0] + 1, _(UNCLOSED_COMMENT).format(citations=hidden)
    return None


def _continuation(lines: list[str], start: int, opened: str) -> int | None:
    """How many lines from index ``start`` close the citation ``opened``, or None if none within
    :data:`WRAP_LINES` lines (a blank line ends the search)."""
    joined = opened
    for n in range(WRAP_LINES):
        if start + n >= len(lines) or not lines[start + n].strip():
            return None
        joined += "\n" + lines[start + n]
        if CITATION.match(joined):
            return n + 1
    return None


def _line(block: Block, source: str, fragment: str, cursor: list[int]) -> int:
    """The note line where ``fragment`` (the start of a citation as rendered) stands in ``source``."""
    parts = fragment.split()[:3]
    probe = re.compile(r"\s+".join(re.escape(p) for p in parts)) if parts else None
    m = probe.search(source, cursor[0]) if probe else None
    if m is None:
        return block.line
    cursor[0] = m.end()
    return block.line + source.count("\n", 0, m.start())


def _scan(note: ParsedNote, block: Block, text: str, source: str) -> None:
    """Add the citations and malformed citations of one statement to ``note``."""
    matched: list[tuple[int, int]] = []
    cursor = [0]
    opens = [m.start() for m in re.finditer(re.escape(OPEN), text)]
    for start in opens:
        if any(a <= start < b for a, b in matched):
            continue
        m = CITATION.match(text, start)
        line = _line(block, source, text[start : start + 80], cursor)
        if m is not None:
            matched.append(m.span())
            note.citations.append(
                Citation(
                    package=m["package"],
                    path=m["path"],
                    symbol=m["symbol"],
                    quote=unescape(m["quote"]) if m["quote"] is not None else None,
                    line=line,
                    text=" ".join(m[0].split()),
                    block=block,
                )
            )
        else:
            note.malformed.append(Malformed(line, _as_written(text[start:]), _why_malformed(text[start:])))
    for m in _MISSPELT.finditer(text):
        if m[0] != OPEN and not any(a <= m.start() < b for a, b in matched):
            problem = _(EXPECTED).format(problem=_(MISSPELT_OPEN).format(written=m[0]), form=FORM)
            line = _line(block, source, text[m.start() : m.start() + 80], [0])
            note.malformed.append(Malformed(line, _as_written(text[m.start() :]), problem))


def _reach(rest: str) -> str:
    """The text a citation that opens ``rest`` may span: up to the next ``[cite:``."""
    following = rest.find(OPEN, 1)
    return rest if following < 0 else rest[:following]


def _as_written(rest: str) -> str:
    """The malformed citation that opens ``rest``, as written: to its ``]`` outside the quote; without
    one, to the end of its quote, else of its symbol, else of its line. Cut with "..." when long."""
    reach = _reach(rest)
    quoted = re.match(r'[^"]*::[A-Za-z_][\w.]*\s*"(?:[^"\\]|\\.)*"', reach)
    end = _TO_BRACKET.match(reach) or quoted
    if end is None and re.match(r'[^"]*::[A-Za-z_][\w.]*\s*"', reach):  # a quote never closed
        end = re.match(r"[^\]]*\]", reach)
    end = end or re.match(r"\S*\s+\S+\s+\S+::[A-Za-z_][\w.]*", reach) or re.match(r"[^\]\n]*\]?", reach)
    written = " ".join(end[0].split())
    return written if len(written) <= ECHO_CHARS else written[: ECHO_CHARS - 3] + "..."


def github_path(url: str) -> tuple[str, int | None] | None:
    """``(path inside the repository, anchored line or None)`` of a GitHub blob URL, else None."""
    m = _BLOB.search(url)
    if m is None:
        return None
    return m["path"], int(m["line"]) if m["line"] else None


URL_NOT_PATH = N_("a URL is not a PATH: give the file relative to the installed package's root")
URL_WRITE = N_("a URL is not a PATH: write {path}::SYMBOL{anchor}")
URL_ANCHOR = N_(" (the #L{line} anchor points into one version of the repository; line numbers drift between "
                "versions, so cite the symbol defined there instead)")


def url_hint(url: str) -> str:
    """What to write instead of a URL in a citation."""
    where = github_path(url)
    if where is None:
        return _(URL_NOT_PATH)
    path, line = where
    return _(URL_WRITE).format(path=path, anchor=_(URL_ANCHOR).format(line=line) if line else "")


EXPECTED = N_("{problem}; expected {form}")
EMPTY = N_("empty citation")
NO_PATH_SYMBOL = N_("no PATH::SYMBOL after the package name")
NO_SYMBOL = N_("no SYMBOL after '::'")
CURLY_QUOTE = N_("the quote opens with a curly quote {quote!r}: write it between straight double quotes \"...\" "
                 "(editors and word processors curl them)")
SINGLE_QUOTES = N_("the quote is in single quotes: write it between double quotes \"...\" (single quotes may stand "
                   "inside)")
NEVER_CLOSED = N_("the quote is never closed with '\"'")
CURLY_CLOSE = N_("the quote is closed with a curly quote {quote!r}: close it with a straight double quote '\"' "
                 "(editors and word processors curl them)")
TEXT_AFTER_QUOTE = N_("text after the closing '\"' of the quote")
NOT_CLOSED = N_("citation not closed: add `]` after the closing quote")
NOT_CLOSED_AFTER = N_("citation not closed: add `]` after the symbol {symbol}")
MISSPELT_OPEN = N_("{written!r} does not open a citation: write '[cite:' (lowercase, with the colon right after "
                   "'cite')")
NOT_THE_FORM = N_("not of the form {form} (check the spaces, the '::' and the closing ']')")


def _why_malformed(rest: str) -> str:
    """A guess at what is wrong with text that opens ``[cite:`` but does not parse."""
    body = _reach(rest)[len(OPEN) :]
    words = body.split(None, 2)
    after_symbol = words[2].lstrip() if len(words) > 2 else ""
    problem = None
    if not words or words[0].startswith("]"):
        problem = _(EMPTY)
    elif len(words) >= 2 and _URL.match(words[1]):
        problem = url_hint(words[1].rstrip("]"))
    elif len(words) < 2 or "::" not in words[1]:
        problem = _(NO_PATH_SYMBOL)
    elif not re.match(r"[^:]+::[A-Za-z_]", words[1]):
        problem = _(NO_SYMBOL)
    elif after_symbol and after_symbol[0] in _CURLY:  # ("" is in every string)
        problem = _(CURLY_QUOTE).format(quote=after_symbol[0])
    elif after_symbol[:1] == "'":
        problem = _(SINGLE_QUOTES)
    elif after_symbol[:1] == '"':
        quote = body[body.index('"') + 1 :]
        closed = re.match(r'(?:[^"\\]|\\.)*"\s*(.?)', quote)
        curly = re.match(r"[^\]\n]*?([\u201d\u2019])\s*\]", quote)
        if closed is None:
            problem = _(CURLY_CLOSE).format(quote=curly[1]) if curly else _(NEVER_CLOSED)
        elif closed[1] != "]":
            problem = _(TEXT_AFTER_QUOTE) if "]" in quote[closed.start(1) :] else _(NOT_CLOSED)
    elif "]" not in body:
        problem = _(NOT_CLOSED_AFTER).format(symbol=re.match(r"[^:]*::([A-Za-z_][\w.]*)", words[1])[1])
    if problem is None:
        return _(NOT_THE_FORM).format(form=FORM)
    return _(EXPECTED).format(problem=problem, form=FORM)
