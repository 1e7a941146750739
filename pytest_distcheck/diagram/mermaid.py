"""Mermaid's own parser, run offline, and what it says about a flowchart (:class:`MermaidParser`).

Syntax is judged by the real Mermaid (11.16, bundled by ``mermaidx==0.10.1``, run in QuickJS), and the graph
(vertices, edges, subgraphs) is read from the same parse (mermaid ``flowchart/flowDb.ts``). This uses mermaidx's
non-public engine hooks: hence the exact pin, and :class:`MermaidEngineError` should a release lack them. SVGs come
from the public ``mermaidx.render``, byte-for-byte deterministic only with :data:`RENDER_CONFIG`. mermaidx is
imported only when a parser starts or an SVG is rendered. Why not the SVG or another parser: docs/design/diagram.md.
"""

from __future__ import annotations

import atexit
import gc
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from pytest_distcheck.errors import DistcheckError

MERMAIDX_PIN = "0.10.1"

# Handed to mermaid.initialize() for every SVG: a fixed rough.js seed and ids, the classic look.
RENDER_CONFIG: dict[str, Any] = {"look": "classic", "handDrawnSeed": 1, "deterministicIds": True}


def _release_fonts() -> None:
    """Drop mermaidx's module-level font faces before interpreter shutdown.

    mermaidx 0.10.1 keeps two novasvg ``FontFace`` objects (nanobind) in module globals
    (``mermaidx.font_metrics._REGULAR``/``_BOLD``). When torch is loaded too, those globals outlive
    novasvg's own teardown, and nanobind prints a "leaked 2 instances" dump after the DoD table that
    reads like a crash. Harmless, but alarming; freeing them first keeps the end of a run clean.
    """
    fm = sys.modules.get("mermaidx.font_metrics")
    if fm is None:
        return
    cached = getattr(getattr(fm, "Font", None), "_at_size", None)
    if hasattr(cached, "cache_clear"):
        cached.cache_clear()
    for font in (getattr(fm, "_REGULAR", None), getattr(fm, "_BOLD", None)):
        if font is not None:
            font.__dict__.pop("_face", None)
    gc.collect()


atexit.register(_release_fonts)


class MermaidEngineError(DistcheckError):
    """The embedded Mermaid could not be started or did not answer (wrong mermaidx release)."""


class MermaidSyntaxError(DistcheckError):
    """Mermaid rejected the diagram.

    Attributes:
        message: Mermaid's own text (``Parse error on line N: ... Expecting ..., got ...``).
        line: 1-based line within the diagram source where Mermaid stopped, or ``None`` when it names
            none (e.g. an unknown diagram type). May exceed the source's line count when the parser
            hit the end of the text (an unclosed bracket, quote or subgraph).
    """

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    @property
    def summary(self) -> str:
        """Mermaid's message on one line: the expectation and the excerpt where parsing stopped."""
        lines = [ln for ln in self.message.splitlines() if ln.strip()]
        if lines and lines[0].startswith("Parse error on line"):
            excerpt = lines[1].strip() if len(lines) > 1 else ""
            expecting = next((ln for ln in lines[2:] if ln.startswith("Expecting")), "")
            match = _EXPECTING.match(expecting)
            if not match:
                return f"{expecting or 'parse error'} near {excerpt!r}"
            tokens = [t.strip() for t in match.group(1).split(",")]
            shown = ", ".join(tokens[:4]) + (f", ... ({len(tokens)} in all)" if len(tokens) > 4 else "")
            got = "the end of the diagram" if match.group(2) == "'1'" else match.group(2)  # jison: 1 = EOF
            return f"got {got} near {excerpt!r}, expecting {shown}"
        return lines[0] if lines else "Mermaid rejected the diagram"


class TooManyEdges(MermaidSyntaxError):
    """A diagram with more links than Mermaid draws (:data:`MAX_EDGES`), refused before parsing it.

    Attributes:
        edges: the links counted in its source (:func:`links_at_least`), more than ``limit``.
        limit: :data:`MAX_EDGES`.
    """

    def __init__(self, edges: int, limit: int) -> None:
        super().__init__(f"Edge limit exceeded. {edges} edges found, but the limit is {limit}.", None)
        self.edges, self.limit = edges, limit


# Mermaid's default maxEdges (mermaid.js.org/config/schema-docs/config-properties-maxedges.html): its flowchart
# parser refuses more, after minutes in QuickJS for a few thousand; so a larger source is refused before parsing.
MAX_EDGES = 500
# The link tokens of Mermaid's flowchart lexer (flow.jison: LINK, and ~~~), one per edge of a plain chain
# (a & b --> c draws more): the text of labels, strings and comments is removed first.
_LINK = re.compile(r"[xo<]?(?:--+[-xo>]|==+[=xo>]|-?\.+-[xo>]?|~~~+)")
_NOT_LINKS = re.compile(r'"[^"\n]*"|\|[^|\n]*\||%%[^\n]*|^---\n.*?\n---\n', re.DOTALL)


def links_at_least(source: str) -> int:
    """A lower bound on the edges of a Mermaid flowchart's ``source``: its link tokens outside quoted text, edge
    labels (``|...|``), ``%%`` comments and the front matter."""
    return len(_LINK.findall(_NOT_LINKS.sub(" ", source)))


def refuse_too_large(source: str) -> None:
    """Raise :class:`TooManyEdges` when ``source`` has more than :data:`MAX_EDGES` links."""
    edges = links_at_least(source)
    if edges > MAX_EDGES:
        raise TooManyEdges(edges, MAX_EDGES)


@dataclass(frozen=True)
class Vertex:
    """A flowchart node as Mermaid parsed it: ``id``, label ``text`` (raw, may hold ``<br/>`` or
    Markdown), ``shape`` (``square``, ``round``, ``circle``, ...; ``""`` for a bare id) and the CSS
    ``classes`` given by ``:::name`` or ``class id name``."""

    id: str
    text: str
    shape: str = ""
    classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    """A flowchart link from ``start`` to ``end`` (vertex ids) with its label ``text`` and ``stroke``
    (``normal``, ``thick``, ``dotted`` or ``invisible``)."""

    start: str
    end: str
    text: str = ""
    stroke: str = "normal"


@dataclass(frozen=True)
class Subgraph:
    """A flowchart subgraph: ``id``, ``title`` and its direct ``members`` (vertex or subgraph ids)."""

    id: str
    title: str
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Flowchart:
    """The graph of a parsed flowchart, in the order Mermaid lists it."""

    vertices: dict[str, Vertex] = field(default_factory=dict)
    edges: tuple[Edge, ...] = ()
    subgraphs: tuple[Subgraph, ...] = ()


@dataclass(frozen=True)
class ParsedDiagram:
    """A diagram Mermaid accepted: its ``type`` (``flowchart-v2``, ``sequence``, ...) and, for a
    flowchart, its graph (``None`` for other diagram types)."""

    type: str
    flowchart: Flowchart | None = None


# Runs inside the engine's JS context. getDiagramFromText is the step of mermaid.parse and
# mermaid.render that detects the type and runs the parser; it hands back the diagram whose db the
# parser filled.
_PARSE_JS = r"""
globalThis.__dcResult = null; globalThis.__dcError = null;
(async (text) => {
  const d = await mermaid.mermaidAPI.getDiagramFromText(text);
  const db = d.db, out = {type: d.type};
  if (db && db.getVertices && db.getEdges && db.getSubGraphs) {
    const v = db.getVertices();
    out.vertices = [...(v instanceof Map ? v.values() : Object.values(v))].map(x => ({
      id: x.id, text: String(x.text ?? x.id), shape: x.type || "", classes: x.classes || []}));
    out.edges = db.getEdges().map(e => ({
      start: e.start, end: e.end, text: String(e.text ?? ""), stroke: e.stroke || "normal"}));
    out.subgraphs = db.getSubGraphs().map(s => ({id: s.id, title: String(s.title ?? ""), nodes: s.nodes}));
  }
  return JSON.stringify(out);
})(%s).then(r => { globalThis.__dcResult = r; })
  .catch(e => { globalThis.__dcError = String((e && (e.message || e.str)) || e); });
"""
_DONE_JS = "!!globalThis.__dcResult || !!globalThis.__dcError"
_MAX_STEPS = 200_000
_LINE = re.compile(r"Parse error on line (\d+)")
_EXPECTING = re.compile(r"Expecting (.*), got (.*)$")
# Parses by source, for every parser of this process (a parse of a real page takes about 0.5 s in QuickJS,
# most of it Mermaid sanitising each label): a diagram, or the (message, line) Mermaid rejected it with.
_PARSED: dict[str, ParsedDiagram | tuple[str, int | None]] = {}
_PARSED_MAX = 256


class MermaidParser:
    """The real Mermaid parser, offline, in mermaidx's embedded QuickJS engine.

    Use as a context manager (``with MermaidParser() as p: p.parse(src)``) or call :meth:`close`;
    one parser serves any number of diagrams. Not thread-safe beyond what the engine serialises.

    Raises:
        MermaidEngineError: mermaidx is missing, or is a release without the engine hooks used here.
    """

    def __init__(self) -> None:
        try:
            import mermaidx
            from mermaidx.engines.quickjs_engine import Engine
        except ImportError as exc:
            raise MermaidEngineError(
                f"cannot import mermaidx ({exc}); install it with: pip install mermaidx=={MERMAIDX_PIN}"
            ) from None
        self.version = getattr(mermaidx, "__version__", "?")
        self._engine = Engine()  # started at the first parse the cache cannot answer
        for name in ("_executor", "_ctx", "_run_job"):
            if not hasattr(self._engine, name):
                self._engine.close()
                raise MermaidEngineError(
                    f"mermaidx {self.version} has no Engine.{name}; pytest-distcheck needs "
                    f"mermaidx=={MERMAIDX_PIN}"
                )

    def __enter__(self) -> MermaidParser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the engine's worker thread."""
        self._engine.close()

    def parse(self, source: str) -> ParsedDiagram:
        """Parse one diagram; the same ``source`` again is answered from this process's cache.

        Args:
            source: Mermaid text (no Markdown fence).

        Raises:
            TooManyEdges: more links than Mermaid draws, refused before parsing.
            MermaidSyntaxError: Mermaid rejected it (its message, and the line it names).
            MermaidEngineError: the engine gave neither a result nor an error.
        """
        refuse_too_large(source)
        known = _PARSED.get(source)
        if known is None:
            known = self._parse_uncached(source)
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[source] = known
        if isinstance(known, tuple):
            raise MermaidSyntaxError(*known)
        return known

    def _parse_uncached(self, source: str) -> ParsedDiagram | tuple[str, int | None]:
        self._engine.start()  # a no-op once started
        executor = self._engine._executor
        try:
            result, error = executor.submit(self._parse_on_worker, source).result()
        except Exception as exc:  # the JS side of the engine changed under us: say so, not a bare traceback
            raise MermaidEngineError(
                f"the embedded Mermaid failed ({type(exc).__name__}: {exc}); pytest-distcheck needs "
                f"mermaidx=={MERMAIDX_PIN}, found {self.version}"
            ) from exc
        if error is not None:
            match = _LINE.search(error)
            return error, int(match.group(1)) if match else None
        if result is None:
            raise MermaidEngineError("mermaid.parse gave neither a result nor an error")
        return _diagram_from_json(json.loads(result))

    def _parse_on_worker(self, source: str) -> tuple[str | None, str | None]:
        # One context for every parse (building one costs about 0.4 s): a parse fills a new FlowDB and
        # keeps no state a later parse reads (tests/test_diagram_mermaid_reuse.py).
        ctx = self._engine._ctx
        ctx.eval("__resetDocument(); mermaid.initialize({startOnLoad: false});")
        ctx.eval(_PARSE_JS % json.dumps(source))
        for _ in range(_MAX_STEPS):
            if ctx.eval(_DONE_JS):
                break
            if self._engine._run_job():
                continue
            if not ctx.eval("__runNextTimer()"):
                break
        return ctx.eval("__flat(globalThis.__dcResult)"), ctx.eval("__flat(globalThis.__dcError)")


def _diagram_from_json(data: dict[str, Any]) -> ParsedDiagram:
    if "vertices" not in data:
        return ParsedDiagram(type=data.get("type", ""))
    vertices = {
        v["id"]: Vertex(id=v["id"], text=v["text"], shape=v["shape"], classes=tuple(v["classes"]))
        for v in data["vertices"]
    }
    edges = tuple(Edge(e["start"], e["end"], e["text"], e["stroke"]) for e in data["edges"])
    subgraphs = tuple(Subgraph(s["id"], s["title"], tuple(s["nodes"])) for s in data["subgraphs"])
    return ParsedDiagram(type=data["type"], flowchart=Flowchart(vertices, edges, subgraphs))


def render_svg(source: str) -> str:
    """The diagram as SVG text, drawn by mermaidx (the same output as mermaid-cli) with
    :data:`RENDER_CONFIG`, so the same source always gives the same bytes.

    Raises:
        MermaidSyntaxError: Mermaid rejected the diagram (:class:`TooManyEdges`: before drawing it).
        MermaidEngineError: mermaidx is not installed.
    """
    refuse_too_large(source)
    try:
        import mermaidx
        from mermaidx.engines._common import MermaidRenderError
    except ImportError as exc:
        raise MermaidEngineError(
            f"cannot import mermaidx ({exc}); install it with: pip install mermaidx=={MERMAIDX_PIN}"
        ) from None
    try:
        return mermaidx.render(source, config=RENDER_CONFIG).svg()
    except MermaidRenderError as exc:
        match = _LINE.search(str(exc))
        raise MermaidSyntaxError(str(exc), int(match.group(1)) if match else None) from None
