"""Find where a symbol is defined in an installed distribution, to help a person write a citation."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_distcheck.citations.resolver import Installed, Problem, Resolver
from pytest_distcheck.citations.symbols import Span


@dataclass(frozen=True)
class Found:
    """One definition: the distribution, the file relative to its root, and the symbol's span."""

    dist: Installed
    path: str
    span: Span

    def citation(self) -> str:
        """A citation to paste into a note, with the quote left to fill in."""
        return f'[cite: {self.dist.name} {self.path}::{self.span.name} "..."]'


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
    for rel in sorted(f for f in dist.files if f.endswith(".py")):
        path = dist.root / rel
        try:
            if not probe.search(path.read_text(encoding="utf-8", errors="replace")):
                continue
            src = resolver.source(path)
        except (OSError, Problem):
            continue
        for name, spans in src.spans.items():
            if name == symbol or name.endswith("." + symbol):
                found.extend(Found(dist, rel, span) for span in spans)
        if len(found) >= limit:
            break
    return found[:limit]
