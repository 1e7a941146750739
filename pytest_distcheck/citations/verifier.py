"""Verify the citations of a note against the installed sources and count its cited design decisions.

A citation *resolves* when its package is installed (and one the notes cite, ``[notes] packages``), its
file belongs to that package, its symbol is defined there and its quote occurs inside the symbol's span.
It *counts* when its quote pins one place in the package, the place is not test code, no earlier
citation of the note cited the same place, and its statement states a decision (:mod:`.decision`);
each miss is reported "not counted" with its reason. The note's score is the number of distinct
statements with a counted citation. What "one place" is: docs/design/citations.md.
"""

from __future__ import annotations

import difflib
import enum
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name

from pytest_distcheck.citations.decision import decision_problem
from pytest_distcheck.citations.quote import MAX_QUOTE_CHARS, MIN_QUOTE_CHARS, QUOTE_TO_FILL, nearest, normalise
from pytest_distcheck.citations.resolver import (
    DID_YOU_MEAN,
    OR,
    Installed,
    Problem,
    Resolver,
    is_test_code,
    suggestible,
)
from pytest_distcheck.citations.symbols import SourceFile, Span
from pytest_distcheck.citations.syntax import CITATION, EXPECTED, FORM, Citation, Malformed, github_path, parse_note
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.textfile import NOTE, PAGE_BYTES, read_text

__all__ = ["CitationResult", "NoteReport", "Place", "Status", "check_citation", "verify_note"]

NEAR_MISS_FIRST = 0.8  # a near-miss this close (difflib ratio) is named before an exact match elsewhere
URL_LINE_IS_IN = N_("; line {line} of the installed {dist} {version} file is in {symbol}, which may not be the line "
                    "the URL meant: [cite: {dist} {path}::{symbol} \"...\"]")
DEFINED_THERE = N_("{head}; did you mean {files}? {name} is defined there (lines {start}-{end})")
UNKNOWN_PACKAGE = N_("unknown package {package!r} (the notes cite: {packages})")
NO_QUOTE = N_("has no quote, so it proves no place in the symbol")
# The notes' template shows the form itself (FORM) as its example: left in a copy, it is no citation yet.
TEMPLATE_EXAMPLE = N_("is the template's example of the form: replace it with a citation of your own")
_EXAMPLE = CITATION.fullmatch(FORM).group("package", "path", "symbol", "quote")
QUOTE_LENGTH = N_("quote is {n} characters; {low} to {high} pin a place")
QUOTE_NOT_FILLED = N_('the quote is still the placeholder "{placeholder}" that `distcheck cite --find` printed: '
                      "replace it with {low} to {high} characters copied from {path}, inside {symbol} "
                      "(lines {start}-{end})")
TEST_CODE = N_("test code: {path} is under a test folder; cite the library code it tests")
NOT_UNIQUE = N_("the quote occurs in {n} places of {dist} ({shown}), so it pins no place; quote more of the line, up "
                "to {high} characters")
NOT_UNIQUE_MANY = N_("the quote occurs in more than {n} places of {dist} ({shown}), so it pins no place; quote more of "
                     "the line, up to {high} characters")
DUPLICATE = N_("same place as line {earlier} ({path}::{symbol}, line {line}); counted once")
NO_DECISION = N_("{kind} at line {line} states no design decision ({problem}); put the citation in the sentence or "
                 "bullet that says what was decided and why")
A_HEADING = N_("a heading")
# What a statement is, as NO_DECISION names it (Block.kind -> words for the reader).
KINDS = {"paragraph": N_("the paragraph"), "list item": N_("the list item"), "table row": N_("the table row"),
         "heading": N_("the heading")}
RECORD_HINT = N_("run `distcheck cite --record {note}` once every citation resolves")
NO_FRONT_MATTER = N_("{note}: no checked-against front matter records the versions cited; {record}")
NOT_LISTED = N_("{note}: checked-against does not list {package} (installed {version}); {record}")
# Why a quote is not in the cited symbol (:func:`_quote_miss`), piece by piece.
QUOTE_NOT_IN = N_("quote not in {symbol} ({where})")
LINES = N_("lines {start}-{end}")
NEAREST_AT = N_("; nearest at line {line}: {text!r}")
EXACT_ELSEWHERE = N_(" (the exact text is in {symbol}, lines {start}-{end})")
IT_IS_IN = N_("; it is in {symbol} (lines {start}-{end})")
OUTSIDE_ANY_SYMBOL = N_("; it is in the file but outside any symbol")
BACKTICKS = N_("backticks")
DOUBLE_BACKTICKS = N_("double backticks")
LOST_BACKTICKS = N_("; Markdown read the backticks of the quote as code and dropped them: wrap the whole citation in "
                    "{what} ({fence}[cite: ...]{fence}) so that Markdown keeps them")
BACKSLASH_N = N_("; a \\n in a quote is read as the letter n: whitespace, line breaks included, is normalised to one "
                 "space, so write a line break as a space")
CHECKED_OTHER = N_("{note}: checked against {name} {want}, but {version} is installed; quotes may have moved: "
                   "re-check, then {record}")


@dataclass(frozen=True)
class Place:
    """What a citation pins: distribution (PEP 503 name), file, innermost symbol and quoted lines."""

    package: str
    path: str
    symbol: str
    first: int
    last: int

    def same(self, other: Place) -> bool:
        """One place: same file and symbol, and the quoted lines overlap."""
        return (self.package, self.path, self.symbol) == (other.package, other.path, other.symbol) and (
            self.first <= other.last and other.first <= self.last
        )


class Status(enum.Enum):
    """What became of one citation."""

    COUNTED = "ok"  # resolves and supports a stated design decision
    UNCOUNTED = "not counted"  # resolves, but: no quote, quote not unique, test code, same place, no decision
    FAILED = "FAILED"  # does not resolve


@dataclass(frozen=True)
class CitationResult:
    """The verdict on one citation.

    Attributes:
        citation: the citation as written.
        status: see :class:`Status`.
        code: ``""`` when counted; else a stable code (``symbol-not-found``, ``duplicate``...).
        reason: what was expected and what was found, for a person; ``""`` when counted.
        span: the symbol's definition it resolved to, when it resolved.
        version: the installed version of the cited package, when installed.
        place: where the quote is (see :class:`Place`), when it resolved.
        package: the distribution's PEP 503 name, when installed.
    """

    citation: Citation
    status: Status
    code: str = ""
    reason: str = ""
    span: Span | None = None
    version: str | None = None
    place: Place | None = None
    package: str | None = None


@dataclass
class NoteReport:
    """Everything verified about one note."""

    path: Path
    label: str = ""  # how messages name the note (a path relative to the workspace); defaults to ``path``
    results: list[CitationResult] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)
    checked_against: dict[str, str] | None = None
    installed: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> installed public version
    warnings: list[str] = field(default_factory=list)
    unseen: int = 0  # citations in HTML comments or code: a reader does not see them, so they never count

    def __post_init__(self) -> None:
        self.label = self.label or str(self.path)

    @property
    def failures(self) -> list[CitationResult]:
        """The citations that do not resolve."""
        return [r for r in self.results if r.status is Status.FAILED]

    @property
    def cited_statements(self) -> int:
        """Distinct paragraphs or list items (statements of a decision) with at least one counted citation."""
        return len({r.citation.block.line for r in self.results if r.status is Status.COUNTED})

    @property
    def ok(self) -> bool:
        """True when every citation resolves and nothing is malformed."""
        return not self.failures and not self.malformed


def check_citation(resolver: Resolver, cit: Citation, packages: tuple[str, ...] = ()) -> CitationResult:
    """Resolve one citation (duplicates and decisions are counted by :func:`verify_note`). Never
    raises for a bad citation.

    ``packages``: the distributions the notes may cite (``[notes] packages``); when not empty, a
    citation of any other name fails with code ``unknown-package`` (a typo such as ``megatron`` for
    ``megatron-core`` is a broken citation, not a package to install).
    """
    dist: Installed | None = None
    if (cit.package, cit.path, cit.symbol, cit.quote) == _EXAMPLE:
        return CitationResult(cit, Status.UNCOUNTED, "template-example", _(TEMPLATE_EXAMPLE))
    if packages and canonicalize_name(cit.package) not in {canonicalize_name(p) for p in packages}:
        return CitationResult(
            cit, Status.FAILED, "unknown-package",
            _(UNKNOWN_PACKAGE).format(package=cit.package, packages=", ".join(packages)),
        )
    try:
        dist = resolver.distribution(cit.package)
        dist, src, spans = resolver.symbol(cit.package, cit.path, cit.symbol)
    except Problem as exc:
        version = dist.public_version if dist else None
        reason = _more_hint(resolver, dist, cit, exc) if dist else exc.message
        return CitationResult(cit, Status.FAILED, exc.code, reason, version=version, package=dist and dist.key)
    version, key = dist.public_version, dist.key
    rel = src.path.relative_to(dist.root).as_posix()
    if cit.quote is None:
        return CitationResult(
            cit, Status.UNCOUNTED, "no-quote", _(NO_QUOTE), spans[0],
            version, package=key,
        )
    quote = normalise(cit.quote)
    if quote == QUOTE_TO_FILL:  # pasted from `cite --find` as it is: say what to put there, not just "3 characters"
        return CitationResult(
            cit, Status.FAILED, "quote-too-short",
            _(QUOTE_NOT_FILLED).format(placeholder=QUOTE_TO_FILL, low=MIN_QUOTE_CHARS, high=MAX_QUOTE_CHARS, path=rel,
                                       symbol=spans[0].name, start=spans[0].start, end=spans[0].end),
            version=version, package=key,
        )
    if len(quote) > MAX_QUOTE_CHARS or len(quote) < MIN_QUOTE_CHARS:
        what = "long" if len(quote) > MAX_QUOTE_CHARS else "short"
        return CitationResult(
            cit, Status.FAILED, f"quote-too-{what}",
            _(QUOTE_LENGTH).format(n=len(quote), low=MIN_QUOTE_CHARS, high=MAX_QUOTE_CHARS),
            version=version, package=key,
        )
    for span in spans:
        if quote in span.text:
            break
    else:
        return CitationResult(
            cit, Status.FAILED, "quote-not-in-symbol", _quote_miss(src, spans, quote, cit), version=version, package=key
        )
    first, last = next(
        ((a, b) for a, b in src.occurrences(quote) if span.start <= a and b <= span.end), (span.start, span.end)
    )
    inner = src.innermost(first, last) or span
    place = Place(key, rel, inner.name, first, last)

    def uncounted(code: str, reason: str) -> CitationResult:
        return CitationResult(cit, Status.UNCOUNTED, code, reason, span, version, place, key)

    if is_test_code(rel):
        return uncounted("test-code", _(TEST_CODE).format(path=rel))
    from pytest_distcheck.citations.find import quote_places

    # A copy of the same symbol elsewhere (vendored code) is the same place, not another one.
    places = [p for p in quote_places(resolver, dist, quote) if not _same_name(p.partition("::")[2], inner.name)]
    places = [f"{rel}::{inner.name}", *places]
    if len(places) > 1:
        shown = ", ".join(places[:3]) + (", ..." if len(places) > 3 else "")
        template = NOT_UNIQUE_MANY if len(places) > 4 else NOT_UNIQUE
        return uncounted("quote-not-unique", _(template).format(n=min(len(places), 4), dist=dist.name, shown=shown,
                                                                high=MAX_QUOTE_CHARS))
    return CitationResult(cit, Status.COUNTED, span=span, version=version, place=place, package=key)


def _same_name(a: str, b: str) -> bool:
    """``a`` and ``b`` name the same symbol (``X.f`` and ``outer.X.f``); a bare ``f`` is not ``X.f``."""
    short, long = sorted((a, b), key=len)
    return bool(short) and (short == long or ("." in short and long.endswith("." + short)))


def _more_hint(resolver: Resolver, dist: Installed, cit: Citation, exc: Problem) -> str:
    """The message of a failed resolution, with what a search of the whole package adds."""
    if exc.code == "url":
        return exc.message + _url_symbol(resolver, dist, cit.path)
    if exc.code not in ("symbol-not-found", "not-in-package") or "imported there" in exc.message:
        return exc.message
    from pytest_distcheck.citations.find import find_symbol

    cited = str(PurePosixPath(cit.path.replace("\\", "/")))
    # Only the exact dotted name: a suffix match (any ``X.forward`` for ``forward``) would mislead.
    found = [
        f for f in find_symbol(resolver, cit.symbol, cit.package, limit=20)
        if f.path != cited and f.span.name == cit.symbol and suggestible(f.path)
    ][:3]
    if not found:
        return exc.message
    head = exc.message.split(_(DID_YOU_MEAN).split("{")[0])[0]
    files = _(OR).join(dict.fromkeys(f.path for f in found))
    span = found[0].span
    return _(DEFINED_THERE).format(head=head, files=files, name=span.name, start=span.start, end=span.end)


def _url_symbol(resolver: Resolver, dist: Installed, url: str) -> str:
    """``"; around line N of the installed FILE is SYMBOL"`` for a GitHub URL with a line anchor."""
    where = github_path(url)
    if where is None or where[1] is None or where[0] not in dist.files:
        return ""
    path, line = where
    try:
        src = resolver.source(dist.root / path)
    except Problem:
        return ""
    span = src.innermost(line, line)
    if span is None:
        return ""
    return _(URL_LINE_IS_IN).format(line=line, dist=dist.name, version=dist.public_version, symbol=span.name,
                                    path=path)


def _url_malformed(resolver: Resolver, bad: Malformed) -> Malformed:
    """A malformed citation that gives a URL, with the symbol at its line anchor when it is installed."""
    words = bad.text.split()
    if len(words) < 3 or "://" not in words[2]:
        return bad
    try:
        dist = resolver.distribution(words[1])
    except Problem:
        return bad
    more = _url_symbol(resolver, dist, words[2].rstrip("]"))
    # before EXPECTED's "; expected {form}", in the language in use
    expected = _(EXPECTED)
    sep = expected[expected.index("{problem}") + len("{problem}"):expected.index("{form}")].rstrip()
    if not more:
        return bad
    return Malformed(bad.line, bad.text, bad.problem.replace(sep, more + sep, 1) if sep else bad.problem + more)


def _quote_miss(src: SourceFile, spans: list[Span], quote: str, cit: Citation) -> str:
    span = spans[0]  # the implementation when the others are @overload stubs
    where = ", ".join(_(LINES).format(start=s.start, end=s.end) for s in spans if not s.overload or s is span)
    msg = _(QUOTE_NOT_IN).format(symbol=span.name, where=where)
    inner = [src.innermost(a, b) for a, b in src.occurrences(quote)]
    elsewhere = next((s for s in inner if s is not None), None)
    near = nearest(quote, src.lines[span.start - 1 : span.end], span.start)
    ratio = difflib.SequenceMatcher(None, quote, near[1]).ratio() if near else 0.0
    if near is not None and (elsewhere is None or ratio >= NEAR_MISS_FIRST):
        msg += _(NEAREST_AT).format(line=near[0], text=near[1])
        if elsewhere is not None:
            msg += _(EXACT_ELSEWHERE).format(symbol=elsewhere.name, start=elsewhere.start, end=elsewhere.end)
    elif elsewhere is not None:
        msg += _(IT_IS_IN).format(symbol=elsewhere.name, start=elsewhere.start, end=elsewhere.end)
    elif inner:
        msg += _(OUTSIDE_ANY_SYMBOL)
    fence = _lost_backticks(spans, quote, cit)
    if fence:
        what = _(BACKTICKS) if fence == "`" else _(DOUBLE_BACKTICKS)
        msg += _(LOST_BACKTICKS).format(what=what, fence=fence)
    if "\\n" in cit.text:
        msg += _(BACKSLASH_N)
    return msg


def _lost_backticks(spans: list[Span], quote: str, cit: Citation) -> str:
    """The backticks to wrap ``cit`` in when Markdown ate the backticks of its quote, else ``""``.

    An unwrapped ``[cite: ... "a ``NAME`` b"]`` renders ``NAME`` as a code span, so the quote loses its
    backticks. Either sign suffices: the citation's source holds more backticks in its quote than the
    rendered quote, or the quote occurs in the symbol once the symbol's backticks are removed. The fence
    is the shortest run of backticks the citation does not hold (CommonMark closes a code span on a run
    of the same length).
    """
    probe = re.compile(r"\[cite:\s+" + re.escape(cit.package) + r"\s+" + re.escape(cit.path) + "::"
                       + re.escape(cit.symbol) + r'\s+"[^\]]*\]?')
    raw = next((m[0] for m in probe.finditer(cit.block.source) if m[0].count("`") > quote.count("`")), "")
    if not raw and not any(quote in normalise(span.text.replace("`", "")) for span in spans):
        return ""
    runs = {len(r) for r in re.findall(r"`+", raw or "``")}
    return "`" * next(n for n in range(1, len(runs) + 2) if n not in runs)


def verify_note(
    path: Path, resolver: Resolver | None = None, label: str = "", packages: tuple[str, ...] = ()
) -> NoteReport:
    """Verify every citation of the Markdown note at ``path``; ``label`` names it in messages;
    ``packages`` are the distributions the notes may cite (see :func:`check_citation`; empty: any).

    Raises:
        ConfigError: the note cannot be read, or its front matter is malformed (names file and line).
    """
    path = Path(path)
    text = read_text(path, NOTE, limit=PAGE_BYTES, encoding="utf-8-sig")
    parsed = parse_note(text, path)
    resolver = resolver or Resolver()
    malformed = [_url_malformed(resolver, m) for m in parsed.malformed]
    report = NoteReport(path, label, malformed=malformed, checked_against=parsed.checked_against,
                        unseen=parsed.unseen)
    seen: list[tuple[Place, int]] = []
    for cit in parsed.citations:
        res = check_citation(resolver, cit, packages)
        if res.version is not None and res.package is not None:
            report.installed[res.package] = res.version
        if res.status is Status.COUNTED and res.place is not None:
            earlier = next((line for place, line in seen if place.same(res.place)), None)
            problem = decision_problem(cit.block.text) if cit.block.kind != "heading" else _(A_HEADING)
            if earlier is not None:
                res = CitationResult(
                    cit, Status.UNCOUNTED, "duplicate",
                    _(DUPLICATE).format(earlier=earlier, path=res.place.path, symbol=res.place.symbol,
                                        line=res.place.first),
                    res.span, res.version, res.place, res.package,
                )
            elif problem:
                res = CitationResult(
                    cit, Status.UNCOUNTED, "no-decision",
                    _(NO_DECISION).format(kind=_(KINDS[cit.block.kind]), line=cit.block.line, problem=problem),
                    res.span, res.version, res.place, res.package,
                )
            else:
                seen.append((res.place, cit.line))
        report.results.append(res)
    report.warnings = version_warnings(report)
    return report


def version_warnings(report: NoteReport) -> list[str]:
    """Where the recorded ``checked-against`` versions and the installed ones disagree."""
    record = _(RECORD_HINT).format(note=report.label)
    if report.checked_against is None:
        if not report.installed:
            return []
        return [_(NO_FRONT_MATTER).format(note=report.label, record=record)]
    out = []
    recorded = {canonicalize_name(k): (k, v) for k, v in report.checked_against.items()}
    for package, version in sorted(report.installed.items()):
        name, want = recorded.get(package, (package, None))
        if want is None:
            out.append(_(NOT_LISTED).format(note=report.label, package=package, version=version, record=record))
        elif want != version:
            out.append(_(CHECKED_OTHER).format(note=report.label, name=name, want=want, version=version, record=record))
    return out
