"""The data flow of a sharding diagram, checked against the plan: what each layer reads and where its output goes.

Every node's output gets a layout (``replicated``, rank r's ``shard``, rank r's ``partial`` sum), propagated along
the edges in topological order as Megatron-LM's f/g operators make it (Shoeybi et al. 2019, arXiv:1909.08053,
sec. 3, Fig. 3). :func:`flow_diffs` names each wrong flow by its kind (:data:`FLOW_MESSAGES`: no input, wrong input,
missing or extra all-reduce, a reduce-scatter's slice read whole, dead end, order, residual). The rules per node and
per kind: docs/design/diagram.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from pytest_distcheck import i18n
from pytest_distcheck.diagram import concepts, labels
from pytest_distcheck.diagram.difference import Difference, style_words
from pytest_distcheck.diagram.graph import Link
from pytest_distcheck.diagram.layout import Layout
from pytest_distcheck.diagram.plan import LayerNames
from pytest_distcheck.i18n import N_


@dataclass(frozen=True)
class Value:
    """The layout of a tensor on an edge: ``kind`` (``replicated``, ``shard``, ``partial``, ``sequence``: the slice
    of the sequence a reduce-scatter leaves), ``rank`` (``None``: any, as in a summary diagram), ``origin`` (the layer
    node that made it; for a ``sequence`` slice, the row-parallel one whose partial sum was reduce-scattered) and
    ``via`` (that reduce-scatter node)."""

    kind: str
    rank: int | None = None
    origin: str = ""
    via: str = ""


REPLICATED = Value("replicated")


@dataclass(frozen=True)
class FlowMessage:
    """How one kind of flow finding is reported: the :class:`Difference` ``kind``, the ``concept`` at fault (its
    lesson ends the message) and the ``template`` of what is drawn (``str.format`` fields: ``styled``, e.g.
    ``attn.out (row-parallel)``, ``path``, and the finding's own, :data:`_FIELDS`)."""

    kind: str
    concept: concepts.Concept
    template: str


# Each finding of the data-flow walk, in the order a layer's differences are reported.
FLOW_MESSAGES: dict[str, FlowMessage] = {
    "no-input": FlowMessage("no-input", concepts.DATA_FLOW, N_("{styled} has no input: no edge goes into {nodes}")),
    "input-replicated": FlowMessage("input", concepts.ROW_INPUT,
                                    N_("{styled} is fed the replicated, unsplit tensor by {where}")),
    "input-rank": FlowMessage("input", concepts.ROW_INPUT, N_("{styled} is fed another rank's shard by {where}")),
    "input-shard": FlowMessage("input", concepts.COLUMN_INPUT,
                               N_("{styled} is fed a sharded tensor by {where}; all-gather the shards first")),
    "no-forward-edge": FlowMessage("missing-all-reduce", concepts.G_AFTER_ROW,
                                   N_("no all-reduce after {styled}: {nodes} {has} no forward edge")),
    "dead-end-layer": FlowMessage("dead-end", concepts.DATA_FLOW,
                                  N_("the output of {styled} goes nowhere: no edge leaves {nodes}")),
    "dead-end": FlowMessage("dead-end", concepts.DATA_FLOW,
                            N_("the sharded output of {styled} goes nowhere: it ends at {nodes} instead of reaching "
                               "the row-parallel layer after it")),
    "missing-all-reduce": FlowMessage("missing-all-reduce", concepts.G_AFTER_ROW,
                                      N_("no all-reduce after {styled}: {nodes} ({label!r}) {reads} its partial sum by "
                                      "{where}")),
    "all-reduce-ranks": FlowMessage("all-reduce-ranks", concepts.G_AFTER_ROW,
                                    N_("the all-reduce after {styled}: {takes}; rank {missing} must go into it too")),
    "all-reduce-split": FlowMessage("all-reduce-ranks", concepts.G_AFTER_ROW,
                                    N_("the all-reduce after {styled}: {takes}; one all-reduce must take every "
                                       "rank's")),
    "sequence-shard": FlowMessage("sequence-shard", concepts.SEQUENCE_SHARD,
                                  N_("no all-gather after the reduce-scatter ({rs}) that follows {styled}: {nodes} "
                                     "({label!r}) {reads} its slice of the sequence by {where}")),
    "sequence-output": FlowMessage("sequence-shard", concepts.SEQUENCE_SHARD,
                                   N_("no all-gather after the reduce-scatter ({rs}) that follows {styled}: the block "
                                      "ends at {nodes} with its slice of the sequence")),
    "extra-all-reduce": FlowMessage("extra-all-reduce", concepts.NO_COLLECTIVE_AFTER_COLUMN,
                                    N_("all-reduce drawn after {styled} at {at}")),
    # Summing a tensor that is whole on every rank makes it world-size times itself (f's all-reduce is backward).
    "whole-all-reduce": FlowMessage("extra-all-reduce", concepts.COLUMN_INPUT,
                                    N_("a forward all-reduce is drawn into {styled} at {at}, on a tensor already "
                                       "whole on every rank")),
    "first": FlowMessage("order", concepts.ORDER,
                         N_("{path} ({nodes}) is drawn first: no layer of the plan comes before it along the edges, "
                            "but the plan starts with {first}")),
    "order": FlowMessage("order", concepts.ORDER,
                         N_("{earlier} (node {w}) comes after {path} (node {v}) along the edges from {v}, but the "
                            "plan puts {earlier} before {path}")),
    "residual": FlowMessage("residual", concepts.RESIDUAL, N_("no residual add after {parent}: nothing after {path} "
                            "({nodes}) and before the next layer adds {parent}'s input back, and the plan declares "
                            "{parent} residual")),
}
# What one all-reduce outside the ranks takes, in the "all-reduce-ranks" messages.
TAKES_PARTIAL = N_("node {node} takes the partial sum of rank {ranks} only")
# Where an edge drawn to a subgraph ends, after the edge as written.
INTO_NODE = N_(" (into node {node})")
INTO_NODE_RANK = N_(" (into node {node}, rank {rank})")


def _where(layout: Layout, links: list[Link]) -> str:
    """``edge ln2 --> down0`` or, when drawn to a subgraph, ``edge x --> gpu0 (into node d0, rank 0)``."""
    parts = []
    for link in dict.fromkeys(links):
        at = ""
        if link.drawn != f"{link.start} --> {link.end}":
            r = layout.graph.rank.get(link.end)
            at = (i18n._(INTO_NODE).format(node=link.end) if r is None
                  else i18n._(INTO_NODE_RANK).format(node=link.end, rank=r))
        parts.append(link.drawn + at)
    parts = list(dict.fromkeys(parts))
    return _edges(parts)


def _edges(drawn: list[str]) -> str:
    """``edge a --> b`` or ``edges a --> b, c --> d``, in the language in use."""
    return i18n.ngettext("edge {edges}", "edges {edges}", len(drawn)).format(edges=", ".join(drawn))


def flow_diffs(layout: Layout, names: LayerNames) -> list[Difference]:
    """The flow differences of a diagram whose layers are all found (see the module docstring),
    in plan order.

    Args:
        layout: the nodes naming each layer, from :func:`.compare.compare`.
        names: the plan's declared residual sublayers (``names.residual``).
    """
    graph = layout.graph
    # nodes that may read partial sums: all-reduces and reduce-scatters
    is_ar = {n: labels.forward_all_reduce(t) or labels.reduce_scatter(t) for n, t in graph.nodes.items()}
    out: dict[str, Value] = {}
    found: dict[tuple[str, str], list] = defaultdict(list)  # (path, kind) -> evidence
    consumed_partial: set[str] = set()
    ar_inputs: list[tuple[str, str, set]] = []  # all-reduce outside the ranks, layer, ranks feeding it

    def transform(v: Value, link: Link) -> Value:
        if labels.forward_all_reduce(link.text):
            if v.kind == "shard" and v.origin in layout.layers_of:
                found[(layout.layers_of[v.origin][0], "extra-all-reduce")].append(link)
                return v  # reported once; read on as if it were not there
            if v.kind == "replicated" and link.end in layout.layers_of:
                found[(layout.layers_of[link.end][0], "whole-all-reduce")].append(link)
            return REPLICATED
        if v.kind in ("shard", "sequence") and labels.all_gather(link.text):
            return REPLICATED
        if v.kind == "replicated" and labels.split(link.text) and not labels.reduce_scatter(link.text):
            return Value("shard", graph.rank.get(link.end), "")
        return v

    for n in graph.order():
        ins = [(link, transform(out.get(link.start, REPLICATED), link)) for link in graph.pred.get(n, [])]
        for link, v in ins:
            if v.kind == "partial" and not is_ar[n] and link.start not in consumed_partial:
                found[(layout.layers_of[v.origin][0], "missing-all-reduce")].append((n, link))
        if any(v.kind == "partial" for _, v in ins) and not is_ar[n]:
            consumed_partial.add(n)
        slices = [(link, v) for link, v in ins if v.kind == "sequence"]
        if n in layout.layers_of or (len(ins) > 1 and not (is_ar[n] or labels.all_gather(graph.nodes[n]))):
            for link, v in slices:  # a layer, or a residual add (any node combining tensors), reads it as whole
                found[(layout.layers_of[v.origin][0], "sequence-shard")].append((n, link, v.via))
            slices = []  # reported once; read on as if it were gathered
        if n in layout.layers_of:
            path, style = layout.layers_of[n][0], layout.style_of(n)
            if not ins:
                found[(path, "no-input")].append(n)
            for link, v in ins:
                if style.input_layout == "replicated" and v.kind == "shard":
                    found[(path, "input-shard")].append(link)
                if style.input_layout != "replicated" and v.kind == "replicated":
                    found[(path, "input-replicated")].append(link)
                if (style.input_layout != "replicated" and v.kind == "shard" and v.rank is not None
                        and graph.rank.get(n) is not None and v.rank != graph.rank[n]):
                    found[(path, "input-rank")].append((link, v.rank))
            kind = "shard" if style.output_layout != "replicated" else "partial"
            out[n] = Value(kind, graph.rank.get(n), n)
        elif is_ar[n] or labels.all_gather(graph.nodes[n]):
            partial_ranks = {v.rank for _, v in ins if v.kind == "partial"}
            if is_ar[n]:
                for _, v in ins:
                    if v.kind == "shard" and v.origin in layout.layers_of:
                        found[(layout.layers_of[v.origin][0], "extra-all-reduce")].append(n)
            if is_ar[n] and layout.per_rank and n not in graph.rank and partial_ranks:
                origin = next(v.origin for _, v in ins if v.kind == "partial")
                ar_inputs.append((n, layout.layers_of[origin][0], partial_ranks))
            if labels.forward_all_reduce(graph.nodes[n]) and ins and all(v.kind == "replicated" for _, v in ins):
                for link in graph.succ.get(n, []):
                    if link.end in layout.layers_of:
                        found[(layout.layers_of[link.end][0], "whole-all-reduce")].append(n)
            shards = [v for _, v in ins if v.kind == "shard"]
            if is_ar[n] and shards and not partial_ranks:
                out[n] = shards[0]  # an all-reduce of shards is reported above; read on as if it were not there
            elif labels.reduce_scatter(graph.nodes[n]) and partial_ranks and not labels.all_gather(graph.nodes[n]):
                origin = next(v.origin for _, v in ins if v.kind == "partial")
                out[n] = Value("sequence", graph.rank.get(n), origin, n)  # whole only after an all-gather
            else:
                out[n] = REPLICATED
        else:
            vals = [v for _, v in ins]
            out[n] = next((v for v in vals if v.kind == "partial"), None) or next(
                (v for v in vals if v.kind == "shard"), None) or next((v for _, v in slices), REPLICATED)
        if not graph.succ.get(n):
            v = out[n]
            if n in layout.layers_of:
                ends = "no-forward-edge" if layout.style_of(n).forward_comm == "all-reduce" else "dead-end-layer"
                found[(layout.layers_of[n][0], ends)].append(n)
            elif v.kind == "shard" and v.origin in layout.layers_of and _row_parallel_after(layout, v.origin):
                found[(layout.layers_of[v.origin][0], "dead-end")].append(n)
            elif v.kind == "sequence":
                found[(layout.layers_of[v.origin][0], "sequence-output")].append((n, v.via))

    for n, path, got in ar_inputs:
        # ranks whose partial sum went nowhere or elsewhere are reported above, at their own node
        strayed = {graph.rank.get(v) for v in layout.by_layer[path]
                   if not graph.succ.get(v) or any(link.end in consumed_partial for link in graph.succ[v])}
        missing = [r for r in sorted({graph.rank.get(v) for v in layout.by_layer[path]} - got - strayed)
                   if r is not None]
        if missing:
            found[(path, "all-reduce-ranks")].append((n, missing, got))
    for path in {p for p, kind in found if kind == "all-reduce-ranks" and len(found[(p, kind)]) > 1}:
        found[(path, "all-reduce-split")] = found.pop((path, "all-reduce-ranks"))
    _order(layout, found)
    _residual(layout, names, found)

    diffs: list[Difference] = []
    fields = _fields(layout)
    for path, style in layout.styles.items():
        styled = f"{path} ({style_words(style.name)})"
        for finding, msg in FLOW_MESSAGES.items():
            if (path, finding) not in found:
                continue
            what = i18n._(msg.template).format(styled=styled, path=path, **fields[finding](found[(path, finding)]))
            lesson = (concepts.lesson(msg.concept, feeder=concepts.row_feeder(layout.styles, path))
                      if msg.concept is concepts.ROW_INPUT else msg.concept.lesson)
            at = _PLACES[finding](found[(path, finding)])
            diffs.append(Difference(msg.kind, path, f"{what}: {lesson}", msg.concept,
                                    node=at if isinstance(at, str) else "",
                                    edge=at.written if isinstance(at, Link) else None))
    return diffs


# Finding -> what it is about, from its evidence (the walk's ``found`` list): a node id or an edge, whose line
# the finding names; the first the message names.
_PLACES: dict[str, Callable[[list], str | Link]] = {
    "no-input": lambda items: items[0],
    "input-replicated": lambda items: items[0],
    "input-shard": lambda items: items[0],
    "input-rank": lambda items: items[0][0],
    "no-forward-edge": lambda items: items[0],
    "dead-end-layer": lambda items: items[0],
    "dead-end": lambda items: items[0],
    "missing-all-reduce": lambda items: items[0][1],  # the edge an all-reduce belongs on
    "all-reduce-ranks": lambda items: items[0][0],
    "all-reduce-split": lambda items: items[0][0],
    "sequence-shard": lambda items: items[0][1],  # the edge an all-gather belongs on
    "sequence-output": lambda items: items[0][0],
    "extra-all-reduce": lambda items: items[0],
    "whole-all-reduce": lambda items: items[0],
    "first": lambda items: items[0],
    "order": lambda items: items[0][1],  # the layer drawn too late
    "residual": lambda items: items[0][1][0],
}


def _node_list(nodes: list[str]) -> str:
    nodes = list(dict.fromkeys(nodes))
    return i18n.ngettext("node {names}", "nodes {names}", len(nodes)).format(names=", ".join(nodes))


def _fields(layout: Layout) -> dict[str, Callable[[list], dict[str, object]]]:
    """Finding -> the template fields of :data:`FLOW_MESSAGES` made from its evidence (the walk's ``found`` list)."""
    graph = layout.graph

    def read(items: list) -> dict[str, object]:
        consumers = list(dict.fromkeys(n for n, _ in items))
        return {"nodes": _node_list(consumers), "label": graph.label(consumers[0]),
                "reads": i18n.ngettext("reads", "read", len(consumers)),
                "where": _where(layout, [lk for _, lk in items])}

    def sliced(items: list) -> dict[str, object]:
        consumers = list(dict.fromkeys(n for n, _, _ in items))
        return {"rs": _node_list([rs for _, _, rs in items]), "nodes": _node_list(consumers),
                "label": graph.label(consumers[0]), "reads": i18n.ngettext("reads", "read", len(consumers)),
                "where": _where(layout, [lk for _, lk, _ in items])}

    def takes(items: list) -> dict[str, object]:
        parts = [i18n._(TAKES_PARTIAL).format(node=n, ranks=", ".join(map(str, sorted(got)))) for n, _, got in items]
        return {"takes": "; ".join(parts), "missing": ", ".join(map(str, items[0][1]))}

    nodes = lambda items: {"nodes": _node_list(items)}  # noqa: E731
    at = lambda items: {"at": _edges([items[0].drawn]) if isinstance(items[0], Link) else items[0]}  # noqa: E731
    where = lambda items: {"where": _where(layout, items)}  # noqa: E731
    return {
        "no-input": nodes, "input-replicated": where, "input-shard": where,
        "input-rank": lambda items: {"where": _where(layout, [link for link, _ in items])},
        "no-forward-edge": lambda items: {**nodes(items), "has": i18n.ngettext("has", "have", len(items))},
        "dead-end-layer": nodes, "dead-end": nodes, "missing-all-reduce": read,
        "all-reduce-ranks": takes, "all-reduce-split": takes, "sequence-shard": sliced,
        "sequence-output": lambda items: {"rs": _node_list([rs for _, rs in items]),
                                          "nodes": _node_list([n for n, _ in items])},
        "extra-all-reduce": at, "whole-all-reduce": at,
        "first": lambda items: {**nodes(items), "first": next(iter(layout.styles))},
        "order": lambda items: dict(zip(("v", "w", "earlier"), items[0], strict=True)),
        "residual": lambda items: {"parent": items[0][0], "nodes": _node_list(items[0][1])},
    }


def _row_parallel_after(layout: Layout, vid: str) -> bool:
    paths = list(layout.styles)
    i = max(paths.index(p) for p in layout.layers_of[vid])
    return any(s.input_layout != "replicated" for s in list(layout.styles.values())[i + 1:])


def _order(layout: Layout, found: dict) -> None:
    paths = list(layout.styles)
    index = {v: min(paths.index(p) for p in ps) for v, ps in layout.layers_of.items()}
    stop = set(layout.layers_of)
    styles = list(layout.styles.values())
    # the plan's leading layers of one style (attn.q, attn.k, attn.v) may all be drawn first
    lead = next((i for i, s in enumerate(styles) if s != styles[0]), len(styles))
    downstream = {w for v in layout.layers_of for w in layout.graph.reachable([v], stop)}
    fed_whole = {link.end for (_, kind), links in found.items() if kind == "input-replicated" for link in links}
    for v in layout.layers_of:
        if v not in downstream and index[v] >= lead and v not in fed_whole:  # the input finding says it
            found[(layout.layers_of[v][0], "first")].append(v)
    for v in layout.layers_of:
        for w in sorted(layout.graph.reachable([v], stop) & stop):
            if w != v and 0 < index[w] < index[v] and not set(layout.layers_of[w]) & set(layout.layers_of[v]):
                found[(layout.name_of(v).split(" + ")[0], "order")].append((v, w, layout.name_of(w)))


def _residual(layout: Layout, names: LayerNames, found: dict) -> None:
    graph = layout.graph
    paths = list(layout.styles)
    stop = set(layout.layers_of)
    for parent in names.residual:
        members = [p for p in paths if p.startswith(parent + ".")]
        last = members[-1]
        missing = []
        for v in layout.by_layer[last]:
            after = graph.reachable([v], stop) - stop
            ok = any(
                not labels.forward_all_reduce(graph.nodes[a])
                and any(link.start not in after and link.start != v and link.start not in stop
                        for link in graph.pred.get(a, []))
                for a in after
            )
            if not ok:
                missing.append(v)
        if missing:
            found[(last, "residual")].append((parent, missing))
