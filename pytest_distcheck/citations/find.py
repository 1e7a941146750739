"""Find where a symbol is defined in an installed distribution, to help a person write a citation."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_distcheck.citations.quote import QUOTE_TO_FILL
from pytest_distcheck.citations.resolver import Installed, Problem, Resolver
from pytest_distcheck.citations.symbols import Span


@dataclass(frozen=True)
class Found:
    """One definition: the distribution, the file relative to its root, and the symbol's span."""

    dist: Installed
    path: str
    span: Span

    def citation(self) -> str:
        """A citation to paste into a note, its quote :data:`~.quote.QUOTE_TO_FILL` for the person to replace."""
        return f'[cite: {self.dist.name} {self.path}::{self.span.name} "{QUOTE_TO_FILL}"]'


def find_symbol(resolver: Resolver, symbol: str, package: str, limit: int = 50) -> list[Found]:
    """Definitions in ``package`` whose dotted name is ``symbol`` or ends with ``.symbol``.

    Files are read as text first and parsed only when the last part of ``symbol`` appears in them,
    so a search of torch's ~2,400 Python files takes a few seconds, not a minute.

    Raises:
        Problem: ``not-installed`` (see :meth:`Resolver.distribution`).
    """
    dist = resolver.distribution(package)
    last = symbol.rsplit(".", 1)[-1]
    probe = re.compile(rf"\b{re.escape(last)}\b")
    found: list[Found] = []
    for rel, text in resolver.texts(dist).items():
        if not probe.search(text):
            continue
        try:
            src = resolver.source(dist.root / rel)
        except Problem:
            continue
        for name, spans in src.spans.items():
            if name == symbol or name.endswith("." + symbol):
                # An @overload stub is not where the symbol is implemented, when an implementation exists.
                kept = [s for s in spans if not s.overload] or spans
                found.extend(Found(dist, rel, span) for span in kept)
        if len(found) >= limit:
            break
    return found[:limit]


def quote_places(resolver: Resolver, dist: Installed, quote: str, limit: int = 4) -> list[str]:
    """Where ``quote`` (normalised) occurs in ``dist``: ``"path::Symbol"`` of the innermost symbol of
    each occurrence (``"path:LINE"`` at module level), at most ``limit + 1`` of them (enough to say
    "more than one"). Files are searched as text for the longest word of the quote first, and parsed
    only when they hold the whole quote.
    """
    probe = max(quote.split(), key=len, default="")
    places: list[str] = []
    for rel, text in resolver.texts(dist).items():
        if probe not in text or quote not in resolver.normalised(dist, rel):
            continue
        try:
            src = resolver.source(dist.root / rel)
        except Problem:
            continue
        for first, last in src.occurrences(quote):
            span = src.innermost(first, last)
            place = f"{rel}::{span.name}" if span else f"{rel}:{first}"
            if place not in places:
                places.append(place)
        if len(places) > limit:
            break
    return places[: limit + 1]
