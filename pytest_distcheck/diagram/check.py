"""Check a Markdown page's sharding diagram against a plan, and keep its rendered SVG in step.

The page's Mermaid blocks must all parse (the real Mermaid parser, :mod:`.mermaid`). The *diagram*
is its first block that is a flowchart naming a layer of the plan; it is compared with the plan
(:func:`.compare.compare`). The SVG beside the page is that block rendered by
:func:`write_svg`, which stamps the SHA-256 of the block's source into the file so that a later edit
of the block shows as stale without re-rendering.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Mapping

from pytest_distcheck.diagram import places
from pytest_distcheck.diagram.compare import Difference, compare
from pytest_distcheck.diagram.concepts import SYNTAX, Concept
from pytest_distcheck.diagram.graph import Graph
from pytest_distcheck.diagram.labels import plain as labels_plain
from pytest_distcheck.diagram.markdown import MermaidBlock, links_to, mermaid_blocks
from pytest_distcheck.diagram.mermaid import (
    MermaidParser,
    MermaidSyntaxError,
    ParsedDiagram,
    TooManyEdges,
    render_svg,
)
from pytest_distcheck.diagram.names import Namer
from pytest_distcheck.diagram.plan import LayerNames
from pytest_distcheck.diagram.skeleton import UNDRAWN, is_skeleton
from pytest_distcheck.i18n import N_, _

NO_BLOCK = N_("no ```mermaid block on the page")
NEVER_CLOSED = N_("the ```mermaid block opened at line {line} is never closed")
SYNTAX_ERROR = N_("Mermaid syntax error in the block at line {line}: {summary} (the line where Mermaid's parser "
                  "stopped: an unclosed bracket or quote may be on an earlier line)")
# A syntax error at the end of a block with more `subgraph` lines than `end` lines: the one left open.
SUBGRAPH_NOT_CLOSED = N_("the subgraph {title!r} opened at line {line} is never closed: add a line `end` where it ends "
                         "(Mermaid's parser ran on to the end of the block)")
NOTHING_NAMES_PLAN = N_("no Mermaid flowchart on the page names a layer of the plan; looked for {looked_for}")
NO_LABELS = N_("; the page's flowcharts have no node labels")
CLOSEST = N_("; closest labels: {labels}")
LABEL_FOR = N_("{label!r} for {path}")
AND_MORE = N_(" (and {n} more)")
LABELS_FOUND = N_("; labels found: {labels}{more}. Name each layer by its module path in its node's label, or declare "
                  "an alias with the plan")
SVG_MISSING = N_("{svg} not found (the rendered diagram of {page})")
SVG_UNLINKED = N_("{page} does not link {svg}: add ![...]({name}) to the page")
SVG_UNSTAMPED = N_("{svg} has no 'distcheck diagram' stamp: it was not written by distcheck diagram --render")
SVG_STALE = N_("{svg} was rendered from another version of the Mermaid block at {page}:{line}")
TOO_MANY_EDGES = N_("the Mermaid block at line {line} draws at least {edges} edges, more than Mermaid draws (its "
                    "maxEdges, {limit}): not checked; one sharded block needs a few dozen")


@dataclass(frozen=True)
class Finding:
    """One problem on the page: its 1-based ``line`` (of the node or edge a plan difference is about, else of the
    block or the line Mermaid stopped at), the ``message`` for a person and the ``concept`` at fault
    (:mod:`.concepts`; ``None`` for what the page lacks: no block, nothing naming the plan, an undrawn skeleton)."""

    line: int
    message: str
    concept: Concept | None = None


@dataclass
class PageCheck:
    """What :func:`check_page` found.

    Attributes:
        blocks: every Mermaid block of the page.
        diagram: the block compared with the plan, or ``None`` when there is none.
        findings: syntax errors, then differences from the plan; empty when the page is right.
        differences: the plan differences alone (also in ``findings``).
        undrawn: the diagram is still the skeleton ``distcheck diagram`` printed (the one finding says
            what to decide).
        per_rank: the compared diagram draws rank subgraphs (``rank N``); else it is read as a summary.
    """

    blocks: list[MermaidBlock]
    diagram: MermaidBlock | None = None
    findings: list[Finding] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    undrawn: bool = False
    per_rank: bool = False


def check_page(
    markdown: str,
    plan: Mapping[str, str],
    world_size: int | None,
    parser: MermaidParser,
    names: LayerNames | None = None,
) -> PageCheck:
    """Parse every Mermaid block of a page and compare its diagram with ``plan``.

    Args:
        markdown: the page's text.
        plan: module path -> style name.
        world_size: ranks a per-rank diagram must draw each layer on, or ``None``: the ranks it draws.
        parser: a started :class:`MermaidParser`.
        names: aliases, fused groups and residual sublayers declared with the plan.

    Raises:
        ValueError: the plan names an unknown style, or ``names`` does not fit it.
    """
    namer = Namer.of(plan, names)
    seen_labels: list[str] = []
    result = PageCheck(blocks=mermaid_blocks(markdown))
    if not result.blocks:
        result.findings.append(Finding(1, _(NO_BLOCK)))
        return result
    syntax_ok = True
    for block in result.blocks:
        if not block.closed:
            result.findings.append(Finding(block.fence_line, _(NEVER_CLOSED).format(line=block.fence_line)))
        try:
            parsed = parser.parse(block.source)
        except TooManyEdges as exc:
            syntax_ok = False
            result.findings.append(Finding(block.fence_line, _(TOO_MANY_EDGES).format(
                line=block.fence_line, edges=exc.edges, limit=exc.limit), SYNTAX))
            continue
        except MermaidSyntaxError as exc:
            syntax_ok = False
            line = block.page_line(exc.line)
            open_subgraph = unclosed_subgraph(block.source)
            if open_subgraph is not None and line == block.page_line(block.source.count("\n") + 1):
                at, title = open_subgraph
                result.findings.append(Finding(block.page_line(at), _(SUBGRAPH_NOT_CLOSED).format(
                    title=title, line=block.page_line(at)), SYNTAX))
                continue
            result.findings.append(Finding(
                line, _(SYNTAX_ERROR).format(line=block.fence_line, summary=exc.summary), SYNTAX))
            continue
        if parsed.flowchart is not None:
            seen_labels += [v.text for v in parsed.flowchart.vertices.values()]
        if result.diagram is None and _names_plan(parsed, namer):
            result.diagram = block
            if is_skeleton(block.source, plan, world_size or 2):
                result.undrawn = True
                result.findings.append(Finding(block.fence_line, _(UNDRAWN).format(line=block.fence_line)))
                continue
            result.differences = compare(parsed.flowchart, plan, world_size, names)  # type: ignore[arg-type]
            result.per_rank = bool(Graph(parsed.flowchart).rank)  # type: ignore[arg-type]
            result.findings.extend(Finding(_line(block, d), d.message, d.concept) for d in result.differences)
    if result.diagram is None and syntax_ok:
        result.findings.append(Finding(result.blocks[0].fence_line, _nothing_matches(namer, seen_labels)))
    return result


def unclosed_subgraph(source: str) -> tuple[int, str] | None:
    """The ``subgraph`` of a Mermaid flowchart ``source`` left open when its ``end`` lines are matched in order, as
    (1-based line in the block, its title or id); None when every one is closed."""
    stack: list[tuple[int, str]] = []
    for n, raw in enumerate(source.splitlines(), start=1):
        text = raw.split("%%", 1)[0].strip().rstrip(";").strip()
        if text.startswith("subgraph ") or text == "subgraph":
            stack.append((n, text[len("subgraph"):].strip()))
        elif text == "end" and stack:
            stack.pop()
    return stack[-1] if stack else None


def _line(block: MermaidBlock, d: Difference) -> int:
    """The page line of what ``d`` is about: the line writing its edge or defining its node
    (:mod:`.places`); the block's fence line when it is about nothing drawn or the source does not show it."""
    if d.edge:
        at = places.edge_line(block.source, *d.edge)
    else:
        at = places.node_line(block.source, d.node) if d.node else None
    return block.page_line(at) if at else block.fence_line


def _names_plan(parsed: ParsedDiagram, namer: Namer) -> bool:
    fc = parsed.flowchart
    return fc is not None and any(namer.layers(v.text) for v in fc.vertices.values())


def _nothing_matches(namer: Namer, seen: list[str]) -> str:
    """What was looked for, which labels came closest and which were found."""
    msg = _(NOTHING_NAMES_PLAN).format(looked_for=namer.looked_for())
    shown = list(dict.fromkeys(t for t in (labels_plain(x) for x in seen) if t))
    if not shown:
        return msg + _(NO_LABELS)
    close = namer.closest(shown)
    if close:
        msg += _(CLOSEST).format(labels=", ".join(_(LABEL_FOR).format(label=label, path=path) for path, label in close))
    more = _(AND_MORE).format(n=len(shown) - 8) if len(shown) > 8 else ""
    return msg + _(LABELS_FOUND).format(labels=", ".join(repr(t) for t in shown[:8]), more=more)


# ---- the rendered SVG -------------------------------------------------------------------------

_STAMP = re.compile(r"<!-- distcheck diagram: .*?source sha256 ([0-9a-f]{64}) -->")


def source_digest(block: MermaidBlock) -> str:
    """SHA-256 (hex) of a block's source, as stamped into its SVG."""
    return hashlib.sha256(block.source.encode("utf-8")).hexdigest()


def write_svg(page: Path, block: MermaidBlock, svg_path: Path | None = None) -> Path:
    """Render ``block`` of ``page`` to SVG beside the page (``.svg``) and return the file written.

    The file starts with an XML comment naming the page, the block's line, the renderer and the
    SHA-256 of the block's source (read back by :func:`svg_state`).

    Raises:
        MermaidSyntaxError: Mermaid rejected the block.
    """
    import mermaidx

    svg_path = svg_path or page.with_suffix(".svg")
    svg = render_svg(block.source)
    stamp = (
        f"<!-- distcheck diagram: {page.name}, Mermaid block at line {block.fence_line}, rendered by "
        f"mermaidx {mermaidx.__version__}; source sha256 {source_digest(block)} -->\n"
    )
    svg_path.write_text(stamp + svg + "\n", encoding="utf-8")
    return svg_path


@dataclass(frozen=True)
class SvgState:
    """Whether the SVG beside a page is present, linked and rendered from the current block.

    Attributes:
        state: ``ok``, ``missing``, ``unlinked``, ``unstamped`` or ``stale``.
        message: what was expected and found (``""`` when ok).
    """

    state: str
    message: str = ""


def svg_state(markdown: str, page_rel: str, svg_path: Path, block: MermaidBlock) -> SvgState:
    """Check the rendered SVG of ``block``.

    Args:
        markdown: the page's text.
        page_rel: the page's path relative to the workspace root (POSIX).
        svg_path: where the SVG must be (absolute).
        block: the page's diagram block.
    """
    page = PurePosixPath(page_rel)
    svg_rel = page.with_suffix(".svg")
    if not svg_path.is_file():
        return SvgState("missing", _(SVG_MISSING).format(svg=svg_rel, page=page_rel))
    if not links_to(markdown, page, svg_rel):
        return SvgState("unlinked", _(SVG_UNLINKED).format(page=page_rel, svg=svg_rel, name=svg_rel.name))
    head = svg_path.read_text(encoding="utf-8", errors="replace")[:1000]
    match = _STAMP.search(head)
    if match is None:
        return SvgState("unstamped", _(SVG_UNSTAMPED).format(svg=svg_rel))
    if match.group(1) != source_digest(block):
        return SvgState("stale", _(SVG_STALE).format(svg=svg_rel, page=page_rel, line=block.fence_line))
    return SvgState("ok")
