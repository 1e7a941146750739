"""Where each symbol of a Python source file is defined: dotted names and line spans, found with ``ast``.

A symbol is a class, a function or method (at any depth: ``Class.method``, ``outer.inner``), or a name
assigned at module or class level (``CONSTANT``, ``Class.attr``); a function's local variables are
not. Its span runs from its first decorator to its last line, so a quote from a decorator belongs to
the function it decorates. An ``@overload`` stub is marked, so hints point at the implementation.
Names imported into the file are kept apart (:attr:`SourceFile.imports`), to follow a symbol cited
where it is only imported to where it is defined.
"""

from __future__ import annotations

import ast
import bisect
import tokenize
from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.citations.quote import normalise


@dataclass(frozen=True)
class Span:
    """One definition of a symbol.

    Attributes:
        name: dotted name inside the file (``ColumnParallelLinear.forward``).
        start, end: first and last line, 1-based and inclusive.
        text: the source lines of the span, whitespace-normalised (see :func:`quote.normalise`).
        overload: an ``@overload`` stub (typing), not the implementation.
    """

    name: str
    start: int
    end: int
    text: str
    overload: bool = False


class SourceFile:
    """A parsed Python file: its lines and the spans of every symbol defined in it.

    Raises:
        SyntaxError: the file is not valid Python for this interpreter.
        OSError: the file cannot be read.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with tokenize.open(self.path) as fh:  # honours a PEP 263 encoding line
            source = fh.read()
        # ast counts lines at newlines only (splitlines would also split at form feeds).
        self.lines = source.split("\n")
        self._word_at: list[int] = []  # offset in ``text`` of each word
        self._word_line: list[int] = []  # and its line
        offset = 0
        for number, line in enumerate(self.lines, 1):
            for word in line.split():
                self._word_at.append(offset)
                self._word_line.append(number)
                offset += len(word) + 1
        self.text = normalise(source)
        self.spans: dict[str, list[Span]] = {}
        self.imports: dict[str, tuple[str, str, int]] = {}  # local name -> (module, name, level)
        self._walk(ast.parse(source, filename=str(self.path)).body, "", in_function=False)

    def _add(self, name: str, start: int, end: int, overload: bool = False) -> None:
        text = normalise("\n".join(self.lines[start - 1 : end]))
        # A name defined twice (property setter, overloads, if/else) keeps every definition.
        self.spans.setdefault(name, []).append(Span(name, start, end, text, overload))

    def _walk(self, body: list[ast.stmt], prefix: str, in_function: bool) -> None:
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + node.name
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                self._add(name, start, node.end_lineno or node.lineno, any(map(_is_overload, node.decorator_list)))
                self._walk(node.body, name + ".", in_function or not isinstance(node, ast.ClassDef))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not in_function:
                # Module and class attributes are symbols; a function's local variables are not.
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self._add(prefix + target.id, node.lineno, node.end_lineno or node.lineno)
            elif isinstance(node, ast.ImportFrom) and not prefix:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module or "", alias.name, node.level)
            elif isinstance(node, ast.Import) and not prefix:
                for alias in node.names:
                    self.imports[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0], "", 0
                    )
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                # Definitions under ``if TYPE_CHECKING:``, ``try: import`` and the like keep their prefix.
                for part in ("body", "orelse", "finalbody"):
                    self._walk(getattr(node, part, []), prefix, in_function)
                for handler in getattr(node, "handlers", []):
                    self._walk(handler.body, prefix, in_function)

    def occurrences(self, quote: str) -> list[tuple[int, int]]:
        """``(first line, last line)`` of every occurrence of ``quote`` (normalised) in the file."""
        out = []
        at = self.text.find(quote)
        while at >= 0 and quote:
            first = self._word_line[bisect.bisect_right(self._word_at, at) - 1]
            last = self._word_line[bisect.bisect_right(self._word_at, at + len(quote) - 1) - 1]
            out.append((first, last))
            at = self.text.find(quote, at + 1)
        return out

    def innermost(self, first: int, last: int) -> Span | None:
        """The smallest span holding lines ``first``..``last``, or None (module level)."""
        best: Span | None = None
        for spans in self.spans.values():
            for span in spans:
                if span.start <= first and last <= span.end and (
                    best is None or span.end - span.start < best.end - best.start
                ):
                    best = span
        return best


def _is_overload(decorator: ast.expr) -> bool:
    return (isinstance(decorator, ast.Name) and decorator.id == "overload") or (
        isinstance(decorator, ast.Attribute) and decorator.attr == "overload"
    )
