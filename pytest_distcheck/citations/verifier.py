"""Verify the citations of a note against the installed sources and count its cited design decisions.

A citation *resolves* when its package is one the notes cite (``[notes] packages``, when given) and
is installed, its file belongs to that package, its symbol is
defined in the file and its quote (whitespace-normalised, 12-100 characters) occurs inside that
symbol's span. It *counts* when, in addition, it has a quote, is not a duplicate of an earlier
citation in the note, and stands in a paragraph or list item that states the decision in at least
:data:`MIN_DECISION_WORDS` words of its own. The note's score is the number of distinct paragraphs
or list items (design decisions) with at least one counted citation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from pytest_distcheck.citations.quote import MAX_QUOTE_CHARS, MIN_QUOTE_CHARS, nearest, normalise
from pytest_distcheck.citations.resolver import Installed, Problem, Resolver
from pytest_distcheck.citations.symbols import Span
from pytest_distcheck.citations.syntax import Citation, Malformed, parse_note
from pytest_distcheck.errors import ConfigError

# A decision is stated in words: "Megatron splits the weight by columns, so ..." has well over eight.
MIN_DECISION_WORDS = 8


class Status(enum.Enum):
    """What became of one citation."""

    COUNTED = "ok"  # resolves and supports a stated design decision
    UNCOUNTED = "not counted"  # resolves, but is a duplicate, has no quote, or states no decision
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
    """

    citation: Citation
    status: Status
    code: str = ""
    reason: str = ""
    span: Span | None = None
    version: str | None = None


@dataclass
class NoteReport:
    """Everything verified about one note."""

    path: Path
    label: str = ""  # how messages name the note (a path relative to the workspace); defaults to ``path``
    results: list[CitationResult] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)
    checked_against: dict[str, str] | None = None
    installed: dict[str, str] = field(default_factory=dict)  # cited package -> installed public version
    warnings: list[str] = field(default_factory=list)

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
    """Resolve one citation (not counting: see :func:`verify_note`). Never raises for a bad citation.

    ``packages``: the distributions the notes may cite (``[notes] packages``); when not empty, a
    citation of any other name fails with code ``unknown-package`` (a typo such as ``megatron`` for
    ``megatron-core`` is a broken citation, not a package to install).
    """
    dist: Installed | None = None
    if packages and canonicalize_name(cit.package) not in {canonicalize_name(p) for p in packages}:
        return CitationResult(
            cit, Status.FAILED, "unknown-package",
            f"unknown package {cit.package!r} (the notes cite: {', '.join(packages)})",
        )
    try:
        dist = resolver.distribution(cit.package)
        dist, src, spans = resolver.symbol(cit.package, cit.path, cit.symbol)
    except Problem as exc:
        version = dist.public_version if dist else None
        return CitationResult(cit, Status.FAILED, exc.code, exc.message, version=version)
    version = dist.public_version
    if cit.quote is None:
        return CitationResult(
            cit, Status.UNCOUNTED, "no-quote", "has no quote, so it proves no place in the symbol", spans[0], version
        )
    quote = normalise(cit.quote)
    if len(quote) > MAX_QUOTE_CHARS or len(quote) < MIN_QUOTE_CHARS:
        what = "long" if len(quote) > MAX_QUOTE_CHARS else "short"
        return CitationResult(
            cit, Status.FAILED, f"quote-too-{what}",
            f"quote is {len(quote)} characters; {MIN_QUOTE_CHARS} to {MAX_QUOTE_CHARS} pin a place", version=version,
        )
    for span in spans:
        if quote in span.text:
            return CitationResult(cit, Status.COUNTED, span=span, version=version)
    return CitationResult(cit, Status.FAILED, "quote-not-in-symbol", _quote_miss(src, spans, quote), version=version)


def _quote_miss(src, spans: list[Span], quote: str) -> str:
    where = ", ".join(f"lines {s.start}-{s.end}" for s in spans)
    msg = f"quote not in {spans[0].name} ({where})"
    elsewhere = src.innermost_containing(quote)
    if elsewhere is not None:
        return f"{msg}; it is in {elsewhere.name} (lines {elsewhere.start}-{elsewhere.end})"
    if quote in src.text:
        return f"{msg}; it is in the file but outside any symbol"
    span = spans[0]
    near = nearest(quote, src.lines[span.start - 1 : span.end], span.start)
    if near is not None:
        return f"{msg}; nearest at line {near[0]}: {near[1]!r}"
    return msg


def verify_note(
    path: Path, resolver: Resolver | None = None, label: str = "", packages: tuple[str, ...] = ()
) -> NoteReport:
    """Verify every citation of the Markdown note at ``path``; ``label`` names it in messages;
    ``packages`` are the distributions the notes may cite (see :func:`check_citation`; empty: any).

    Raises:
        ConfigError: the note cannot be read, or its front matter is malformed (names file and line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "", f"cannot read the note: {exc}") from None
    parsed = parse_note(text, path)
    resolver = resolver or Resolver()
    report = NoteReport(path, label, malformed=parsed.malformed, checked_against=parsed.checked_against)
    seen: dict[tuple[str, str, str, str], int] = {}
    for cit in parsed.citations:
        res = check_citation(resolver, cit, packages)
        if res.version is not None:
            report.installed[cit.package] = res.version
        if res.status is Status.COUNTED:
            if cit.key in seen:
                res = CitationResult(
                    cit, Status.UNCOUNTED, "duplicate", f"same citation as line {seen[cit.key]}; counted once",
                    res.span, res.version,
                )
            elif cit.block.kind == "heading" or cit.block.own_words() < MIN_DECISION_WORDS:
                res = CitationResult(
                    cit, Status.UNCOUNTED, "no-decision",
                    f"the {cit.block.kind} at line {cit.block.line} states no design decision "
                    f"({_words(cit.block.own_words())} besides citations, at least {MIN_DECISION_WORDS}); "
                    "put the citation in the sentence or bullet that says what was decided and why",
                    res.span, res.version,
                )
            else:
                seen[cit.key] = cit.line
        report.results.append(res)
    report.warnings = version_warnings(report)
    return report


def _words(n: int) -> str:
    return f"{n} word" + ("" if n == 1 else "s")


def version_warnings(report: NoteReport) -> list[str]:
    """Where the recorded ``checked-against`` versions and the installed ones disagree."""
    record = f"run `distcheck cite --record {report.label}` once every citation resolves"
    if report.checked_against is None:
        if not report.installed:
            return []
        return [f"{report.label}: no checked-against front matter records the versions cited; {record}"]
    out = []
    recorded = {k.lower(): (k, v) for k, v in report.checked_against.items()}
    for package, version in sorted(report.installed.items()):
        name, want = recorded.get(package.lower(), (package, None))
        if want is None:
            out.append(f"{report.label}: checked-against does not list {package} (installed {version}); {record}")
        elif want != version:
            out.append(
                f"{report.label}: checked against {name} {want}, but {version} is installed; "
                f"quotes may have moved: re-check, then {record}"
            )
    return out
