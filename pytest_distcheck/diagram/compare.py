"""Does a parsed flowchart draw what a TP plan says? Each difference named in words (:func:`compare`).

For every module path of the plan: some node names it; each such node states the plan's style; in a per-rank
diagram it is drawn on every rank 0..N-1; and the data flow around it is right (:mod:`.flow`, read once every layer
is found and no node is ambiguous). Nodes that state a style but name no layer, or name several layers not declared
fused, are reported too. Design record: docs/design/diagram.md.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

from pytest_distcheck.diagram import concepts, labels
from pytest_distcheck.diagram.difference import Difference, style_words
from pytest_distcheck.diagram.flow import flow_diffs
from pytest_distcheck.diagram.graph import Graph
from pytest_distcheck.diagram.layout import Layout
from pytest_distcheck.diagram.mermaid import Flowchart
from pytest_distcheck.diagram.names import Namer
from pytest_distcheck.diagram.plan import LayerNames
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.tp.plan import Style, validate_plan

AMBIGUOUS = N_("node {node} names several layers ({layers}): {lesson}")
OR_FUSED = N_(" (or declare them fused with the plan)")
UNPLANNED = N_("node {node} is drawn {styles} but names no layer of the plan ({layers}): {lesson}")
MISSING = N_("layer {path} missing: no node's label names it (the plan says {style}): {lesson}")
CONFLICTING = N_("{path} (node {node}): its label says {label} but its class says {css}: {lesson}")
NO_STYLE = N_("{path} is drawn without a parallel style ({nodes}): the plan says {style}; write {style} (or a class "
              "name such as {hint}) in its label, on the edge into it or in the title of its subgraph. {lesson}")
WRONG_STYLE = N_("{path} is drawn {drawn} but the plan says {style} ({nodes}): {lesson}")
FOUND_ON = N_("found on rank {ranks}")
FOUND_NOWHERE = N_("found in no rank subgraph")
NOT_ON_RANK = N_("{path} is not drawn on rank {ranks} of {world_size} ({where}); put one node naming it in each "
                 "rank's subgraph (titled 'rank N' or 'GPU N'): {lesson}")
EXTRA_RANK = N_("{path} is drawn on rank {ranks} but the world size is {world_size}: {lesson}")
AND = N_(" and ")


def _ids(nodes: list[str]) -> str:
    return ngettext("node {ids}", "nodes {ids}", len(nodes)).format(ids=", ".join(nodes))


def _layer_ids(layout: Layout, namer: Namer, path: str, nodes: list[str]) -> str:
    """:func:`_ids`, saying which words made them ``path`` when a label names it after other words (in prose)."""
    name = next((n for v in nodes if (n := namer.named_later(layout.graph.nodes[v], path))), "")
    if not name:
        return _ids(nodes)
    return ngettext("node {ids}, whose label names {name}", "nodes {ids}, whose labels name {name}",
                    len(nodes)).format(ids=", ".join(nodes), name=name)


def compare(
    fc: Flowchart,
    plan: Mapping[str, str],
    world_size: int | None = None,
    names: LayerNames | None = None,
) -> list[Difference]:
    """Every difference between a flowchart and a TP plan, in plan order; ``[]`` when it matches.

    Args:
        fc: the parsed flowchart.
        plan: module path -> style name (``colwise``/``rowwise``), as in ``pytest_distcheck.tp.plan``, in forward order.
        world_size: ranks a per-rank diagram must show each layer on; ``None``: the ranks it draws.
        names: aliases, fused groups and residual sublayers declared with the plan.

    Raises:
        ValueError: the plan names an unknown style (from :func:`validate_plan`), or ``names`` does
            not fit the plan (:meth:`LayerNames.validate`).
    """
    styles: dict[str, Style] = validate_plan(plan)
    names = (names or LayerNames()).validate(plan)
    namer = Namer.of(styles, names)
    graph = Graph(fc)
    diffs: list[Difference] = []
    by_layer: dict[str, list[str]] = {path: [] for path in styles}
    layers_of: dict[str, list[str]] = {}
    ambiguous = False
    for vid, text in graph.nodes.items():
        named = namer.layers(text)
        if len(named) > 1 and namer.fused_group(named) is None:
            ambiguous = True
            diffs.append(Difference(
                "ambiguous-node", "",
                _(AMBIGUOUS).format(node=vid, layers=", ".join(named), lesson=concepts.NAMING.lesson)
                + (_(OR_FUSED) if len({plan[p] for p in named}) == 1 else ""),
                concepts.NAMING, node=vid,
            ))
        elif named:
            layers_of[vid] = named
            for path in named:
                by_layer[path].append(vid)
        elif drawn := labels.styles_in_label(text) | labels.styles_in_classes(fc.vertices[vid].classes):
            diffs.append(Difference(
                "unplanned-style", "",
                _(UNPLANNED).format(node=vid, styles=_(AND).join(style_words(s) for s in sorted(drawn)),
                                    layers=", ".join(styles), lesson=concepts.NAMING.lesson),
                concepts.NAMING, node=vid,
            ))
    layout = Layout(graph, styles, by_layer, layers_of, per_rank=any(v in graph.rank for v in layers_of))
    drawn_ranks = {graph.rank[v] for v in layers_of if v in graph.rank}
    ranks = world_size if world_size is not None else (max(drawn_ranks) + 1 if drawn_ranks else 1)
    missing = False
    # A node without a style that names a layer after other words ("g: all-reduce of attn.out's partial sums") is
    # read as that layer, and the no-style finding says why; walking the flow through it would contradict the drawing.
    misread = any(not node_styles(layout, v)[0] and namer.named_later(graph.nodes[v], p)
                  for v, paths in layers_of.items() for p in paths)
    for path, style in styles.items():
        nodes = by_layer[path]
        if not nodes:
            missing = True
            diffs.append(Difference(
                "missing", path,
                _(MISSING).format(path=path, style=style_words(style.name), lesson=concepts.NAMING.lesson),
                concepts.NAMING,
            ))
            continue
        diffs.extend(_style_diffs(layout, namer, path, style, nodes))
        if layout.per_rank:
            diffs.extend(_rank_diffs(graph, path, nodes, ranks))
    if not missing and not ambiguous and not misread:
        diffs.extend(flow_diffs(layout, names))
    return diffs


def node_styles(layout: Layout, vid: str) -> tuple[set[str], str]:
    """The styles a node is drawn with and where they were read: ``label``/``class`` (the node's
    own), ``edge`` (the labels of the edges into it) or ``subgraph`` (the nearest enclosing title
    stating one style); ``(set(), "")`` when none says."""
    graph = layout.graph
    v = graph.fc.vertices[vid]
    own = labels.styles_in_label(v.text) | labels.styles_in_classes(v.classes)
    if own:
        return own, "label"
    on_edges = {s for link in graph.pred.get(vid, []) for s in labels.styles_in_label(link.text)}
    if on_edges:
        return on_edges, "edge"
    for title in graph.enclosing.get(vid, []):
        if len(found := labels.styles_in_label(title)) == 1:
            return found, "subgraph"
    return set(), ""


def _style_diffs(layout: Layout, namer: Namer, path: str, style: Style, nodes: list[str]) -> list[Difference]:
    want = style_words(style.name)
    wrong: dict[str, list[str]] = defaultdict(list)
    out = []
    for vid in nodes:
        v = layout.graph.fc.vertices[vid]
        in_label, in_class = labels.styles_in_label(v.text), labels.styles_in_classes(v.classes)
        if in_label and in_class and in_label != in_class:
            out.append(Difference(
                "conflicting-style", path,
                _(CONFLICTING).format(path=path, node=vid, label=_(AND).join(map(style_words, sorted(in_label))),
                                      css=_(AND).join(map(style_words, sorted(in_class))),
                                      lesson=concepts.STYLE.lesson),
                concepts.STYLE, node=vid,
            ))
            continue
        drawn, _where = node_styles(layout, vid)
        if drawn != {style.name}:
            wrong[_(AND).join(style_words(s) for s in sorted(drawn))].append(vid)
    for drawn_words, vids in wrong.items():
        if not drawn_words:
            out.append(Difference(
                "no-style", path,
                _(NO_STYLE).format(path=path, nodes=_layer_ids(layout, namer, path, vids), style=want,
                                   hint=_CLASS_HINT[style.name],
                                   lesson=concepts.STYLE.lesson[0].upper() + concepts.STYLE.lesson[1:]),
                concepts.STYLE, node=vids[0],
            ))
        else:
            out.append(Difference(
                "style", path, _(WRONG_STYLE).format(path=path, drawn=drawn_words, style=want,
                                                     nodes=_layer_ids(layout, namer, path, vids),
                                                     lesson=concepts.STYLE.lesson), concepts.STYLE, node=vids[0],
            ))
    return out


_CLASS_HINT = {"colwise": "ColumnParallelLinear", "rowwise": "RowParallelLinear"}


def _rank_diffs(graph: Graph, path: str, nodes: list[str], world_size: int) -> list[Difference]:
    drawn = {graph.rank[v] for v in nodes if v in graph.rank}
    missing = [r for r in range(world_size) if r not in drawn]
    extra = sorted(r for r in drawn if r >= world_size)
    out = []
    if missing:
        where = _(FOUND_ON).format(ranks=", ".join(map(str, sorted(drawn)))) if drawn else _(FOUND_NOWHERE)
        out.append(Difference(
            "rank", path,
            _(NOT_ON_RANK).format(path=path, ranks=", ".join(map(str, missing)), world_size=world_size, where=where,
                                  lesson=concepts.EVERY_RANK.lesson),
            concepts.EVERY_RANK, node=nodes[0],
        ))
    if extra:
        out.append(Difference(
            "rank", path, _(EXTRA_RANK).format(path=path, ranks=", ".join(map(str, extra)), world_size=world_size,
                                               lesson=concepts.EVERY_RANK.lesson), concepts.EVERY_RANK,
            node=next(v for v in nodes if graph.rank.get(v, -1) >= world_size),
        ))
    return out
