"""Does a parsed flowchart draw what a TP plan says? Each difference named in words.

Reads the graph Mermaid parsed (:class:`~pytest_distcheck.diagram.mermaid.Flowchart`) with the
labelling convention of :mod:`pytest_distcheck.diagram.labels`, and checks, for every module path
of the plan (``pytest_distcheck.tp_plan``):

1. some node names it (else ``layer mlp.up missing``);
2. each such node states the style the plan gives it (else ``attn.qkv is drawn row-parallel but the
   plan says column-parallel``);
3. with a world size, it is drawn on every rank 0..N-1 (a node in each ``rank N`` subgraph);
4. the forward collective of its style (``Style.forward_comm``) is drawn: for ``all-reduce`` (row-
   parallel, Megatron-LM's ``g``), every forward path out of the layer passes an all-reduce before it
   reaches another layer of the plan or ends (else ``no all-reduce after mlp.down (row-parallel)``);
   for ``none`` (column-parallel), no forward path out of it reaches an all-reduce before the next
   layer of the plan (Shoeybi et al. 2019, arXiv:1909.08053, sec. 3: the column-parallel output stays
   sharded until the row-parallel layer consumes it).

Nodes that state a style but name no layer of the plan, or name several layers, are reported too.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from pytest_distcheck.diagram import labels
from pytest_distcheck.diagram.mermaid import Edge, Flowchart
from pytest_distcheck.tp_plan import Style, validate_plan


@dataclass(frozen=True)
class Difference:
    """One way the diagram differs from the plan.

    Attributes:
        kind: ``missing``, ``style``, ``no-style``, ``conflicting-style``, ``rank``,
            ``missing-all-reduce``, ``extra-all-reduce``, ``ambiguous-node`` or ``unplanned-style``.
        layer: the plan's module path concerned, or ``""``.
        message: the difference for a person (names the layer, what is drawn, what the plan says).
    """

    kind: str
    layer: str
    message: str

    def __str__(self) -> str:
        return self.message


def style_words(name: str) -> str:
    """How a diagram spells a style: ``column-parallel``, ``row-parallel`` (else the style name)."""
    return labels.STYLE_LABELS.get(name, name)


def _ids(nodes: list[str]) -> str:
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(nodes)


class _Graph:
    """The flowchart as forward adjacency, with the rank of each node."""

    def __init__(self, fc: Flowchart) -> None:
        self.fc = fc
        self.out: dict[str, list[Edge]] = defaultdict(list)
        for e in fc.edges:
            if e.stroke != "invisible":  # ~~~ links only steer the layout
                self.out[e.start].append(e)
        parent: dict[str, str] = {}
        for sg in fc.subgraphs:
            for member in sg.members:
                parent.setdefault(member, sg.id)
        titles = {sg.id: (sg.title or sg.id) for sg in fc.subgraphs}
        self.rank: dict[str, int] = {}
        for vid in fc.vertices:
            cur, seen = parent.get(vid), set()
            while cur is not None and cur not in seen:
                seen.add(cur)
                r = labels.rank_of_title(titles.get(cur, cur))
                if r is not None:
                    self.rank[vid] = r
                    break
                cur = parent.get(cur)

    def text(self, vid: str) -> str:
        v = self.fc.vertices.get(vid)
        if v is not None:
            return v.text
        return next((sg.title for sg in self.fc.subgraphs if sg.id == vid), vid)

    def walk(self, start: str, stops: set[str]) -> tuple[list[str], list[str]]:
        """Forward from ``start`` up to the first all-reduce on each path.

        Returns (all-reduces met, as node ids or ``edge a->b``; where paths ended without one: a node
        of ``stops`` or a node with no forward edge).
        """
        met: list[str] = []
        ends: list[str] = []
        todo, seen = [start], {start}
        while todo:
            node = todo.pop()
            edges = self.out.get(node, [])
            if not edges:
                ends.append(node)
            for e in edges:
                if labels.forward_all_reduce(e.text):
                    met.append(f"edge {e.start}->{e.end}")
                elif labels.forward_all_reduce(self.text(e.end)):
                    met.append(e.end)
                elif e.end in stops:
                    ends.append(e.end)
                elif e.end not in seen:
                    seen.add(e.end)
                    todo.append(e.end)
        return met, ends


def compare(fc: Flowchart, plan: Mapping[str, str], world_size: int | None = None) -> list[Difference]:
    """Every difference between a flowchart and a TP plan, in plan order; ``[]`` when it matches.

    Args:
        fc: the parsed flowchart.
        plan: module path -> style name (``colwise``/``rowwise``), as in ``tp_plan``.
        world_size: number of ranks the diagram must show each layer on; ``None`` skips that check.

    Raises:
        ValueError: the plan names an unknown style (from :func:`validate_plan`).
    """
    styles: dict[str, Style] = validate_plan(plan)
    graph = _Graph(fc)
    diffs: list[Difference] = []
    by_layer: dict[str, list[str]] = {path: [] for path in styles}
    for vid, v in fc.vertices.items():
        named = [path for path in styles if labels.names_layer(v.text, path)]
        if len(named) > 1:
            diffs.append(Difference(
                "ambiguous-node", "",
                f"node {vid} names several layers ({', '.join(named)}); draw each layer as its own node",
            ))
        elif named:
            by_layer[named[0]].append(vid)
        elif drawn := labels.styles_in_label(v.text) | labels.styles_in_classes(v.classes):
            diffs.append(Difference(
                "unplanned-style", "",
                f"node {vid} is drawn {' and '.join(style_words(s) for s in sorted(drawn))} but names no "
                f"layer of the plan ({', '.join(styles)})",
            ))
    layer_nodes = {vid for nodes in by_layer.values() for vid in nodes}
    for path, style in styles.items():
        nodes = by_layer[path]
        want = style_words(style.name)
        if not nodes:
            diffs.append(Difference(
                "missing", path, f"layer {path} missing: no node's label names it (the plan says {want})"
            ))
            continue
        diffs.extend(_style_diffs(fc, path, style, nodes))
        if world_size is not None:
            diffs.extend(_rank_diffs(graph, path, nodes, world_size))
        diffs.extend(_comm_diffs(graph, path, style, nodes, layer_nodes))
    return diffs


def _style_diffs(fc: Flowchart, path: str, style: Style, nodes: list[str]) -> list[Difference]:
    want = style_words(style.name)
    wrong: dict[str, list[str]] = defaultdict(list)
    out = []
    for vid in nodes:
        v = fc.vertices[vid]
        in_label, in_class = labels.styles_in_label(v.text), labels.styles_in_classes(v.classes)
        if in_label and in_class and in_label != in_class:
            out.append(Difference(
                "conflicting-style", path,
                f"{path} (node {vid}): its label says {' and '.join(map(style_words, sorted(in_label)))} "
                f"but its class says {' and '.join(map(style_words, sorted(in_class)))}",
            ))
            continue
        drawn = in_label | in_class
        if drawn != {style.name}:
            wrong[" and ".join(style_words(s) for s in sorted(drawn))].append(vid)
    for drawn_words, vids in wrong.items():
        if not drawn_words:
            out.append(Difference(
                "no-style", path,
                f"{path} is drawn without a parallel style ({_ids(vids)}): the plan says {want}; "
                f"write {want} in its label",
            ))
        else:
            out.append(Difference(
                "style", path, f"{path} is drawn {drawn_words} but the plan says {want} ({_ids(vids)})"
            ))
    return out


def _rank_diffs(graph: _Graph, path: str, nodes: list[str], world_size: int) -> list[Difference]:
    drawn = {graph.rank[v] for v in nodes if v in graph.rank}
    missing = [r for r in range(world_size) if r not in drawn]
    extra = sorted(r for r in drawn if r >= world_size)
    out = []
    if missing:
        where = f"found on rank {', '.join(map(str, sorted(drawn)))}" if drawn else "found in no rank subgraph"
        out.append(Difference(
            "rank", path,
            f"{path} is not drawn on rank {', '.join(map(str, missing))} of {world_size} ({where}); "
            f"put one node naming it in each subgraph titled 'rank N'",
        ))
    if extra:
        out.append(Difference(
            "rank", path, f"{path} is drawn on rank {', '.join(map(str, extra))} but the world size is {world_size}"
        ))
    return out


def _comm_diffs(
    graph: _Graph, path: str, style: Style, nodes: list[str], layer_nodes: set[str]
) -> list[Difference]:
    styled = f"{path} ({style_words(style.name)})"
    if style.forward_comm == "all-reduce":
        for vid in nodes:
            _, ends = graph.walk(vid, layer_nodes - {vid})
            if ends == [vid]:
                return [Difference(
                    "missing-all-reduce", path,
                    f"no all-reduce after {styled}: node {vid} has no forward edge; draw its partial "
                    f"output going into an all-reduce",
                )]
            if ends:
                return [Difference(
                    "missing-all-reduce", path,
                    f"no all-reduce after {styled}: from node {vid} the forward path reaches "
                    f"{ends[0]} ({labels.plain(graph.text(ends[0]))!r}) without one",
                )]
    elif style.forward_comm == "none":
        for vid in nodes:
            met, _ = graph.walk(vid, layer_nodes - {vid})
            if met:
                return [Difference(
                    "extra-all-reduce", path,
                    f"all-reduce drawn after {styled} at {met[0]}, but a {style_words(style.name)} layer "
                    f"needs none in forward: its output stays sharded until the next layer consumes it",
                )]
    return []
