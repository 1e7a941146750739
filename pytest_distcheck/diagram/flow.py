"""The data flow of a sharding diagram, checked against the plan: what each layer reads and where its
output goes.

Every node's output gets a *layout*, propagated along the edges in topological order (Megatron-LM,
Shoeybi et al. 2019, arXiv:1909.08053, sec. 3, Fig. 3; ``pytest_distcheck.tp.plan``):

- a node with no input, LayerNorms, adds and the like: ``replicated`` (every rank holds it whole);
- a column-parallel layer on rank r: ``shard`` of rank r (its output is split on the last dim);
- a row-parallel layer on rank r: ``partial`` sum of rank r;
- an all-reduce node, or an edge labelled all-reduce: ``replicated`` (the ``g`` operator);
- an all-gather (gather, concat) node or edge: ``replicated``;
- a reduce-scatter node (sequence parallelism): rank r's ``shard`` of the summed tensor, from every
  rank's partial sum;
- an edge labelled split/slice/scatter: rank r's ``shard`` of a replicated tensor;
- any other node: its inputs' layout (element-wise work keeps a shard a shard).

In a summary diagram (no rank subgraphs) every node has the same unknown rank. Then, for each
planned layer node, and each message naming the edge or node at fault:

- ``no-input``: a layer node with no edge into it;
- ``input``: a column-parallel layer must read a replicated tensor (through ``f``), not a shard; a
  row-parallel layer must read its own rank's shard (the same rank's column-parallel output,
  possibly through element-wise nodes, or a split), not the replicated, unsplit tensor;
- ``missing-all-reduce``: a partial sum read by anything but an all-reduce, or going nowhere;
- ``all-reduce-ranks``: an all-reduce outside the rank subgraphs must take every rank's partial sum;
- ``extra-all-reduce``: an all-reduce fed a column-parallel shard (none is needed in forward);
- ``dead-end``: a layer's output, or a shard a later row-parallel layer needs, that goes nowhere;
- ``order``: following the edges from one layer reaches a layer the plan puts earlier (other than
  the plan's first layer, which starts the next block);
- ``residual``: for a sublayer the plan declares residual, some node after its last layer adds in a
  tensor that does not come from that layer (the sublayer's input).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pytest_distcheck.diagram import concepts, labels
from pytest_distcheck.diagram.difference import Difference, style_words
from pytest_distcheck.diagram.graph import Link
from pytest_distcheck.diagram.layout import Layout
from pytest_distcheck.diagram.plan import LayerNames


@dataclass(frozen=True)
class Value:
    """The layout of a tensor on an edge: ``kind`` (``replicated``, ``shard``, ``partial``),
    ``rank`` (``None``: any, as in a summary diagram) and ``origin`` (the layer node that made it)."""

    kind: str
    rank: int | None = None
    origin: str = ""


REPLICATED = Value("replicated")


def _where(layout: Layout, links: list[Link]) -> str:
    """``edge ln2 --> down0`` or, when drawn to a subgraph, ``edge x --> gpu0 (into node d0, rank 0)``."""
    parts = []
    for link in dict.fromkeys(links):
        at = "" if link.drawn == f"{link.start} --> {link.end}" else f" (into node {link.end}"
        if at:
            r = layout.graph.rank.get(link.end)
            at += f", rank {r})" if r is not None else ")"
        parts.append(link.drawn + at)
    parts = list(dict.fromkeys(parts))
    return ("edge " if len(parts) == 1 else "edges ") + ", ".join(parts)


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
                found[(layout.layers_of[v.origin][0], "extra-all-reduce")].append(f"edge {link.drawn}")
                return v  # reported once; read on as if it were not there
            return REPLICATED
        if v.kind == "shard" and labels.all_gather(link.text):
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
            shards = [v for _, v in ins if v.kind == "shard"]
            if is_ar[n] and shards and not partial_ranks:
                out[n] = shards[0]  # an all-reduce of shards is reported above; read on as if it were not there
            elif labels.reduce_scatter(graph.nodes[n]) and partial_ranks:
                out[n] = Value("shard", graph.rank.get(n), "")  # a sequence shard, whole after an all-gather
            else:
                out[n] = REPLICATED
        else:
            vals = [v for _, v in ins]
            out[n] = next((v for v in vals if v.kind == "partial"), None) or next(
                (v for v in vals if v.kind == "shard"), REPLICATED)
        if not graph.succ.get(n):
            v = out[n]
            if n in layout.layers_of:
                found[(layout.layers_of[n][0], "dead-end-layer")].append(n)
            elif v.kind == "shard" and v.origin in layout.layers_of and _row_parallel_after(layout, v.origin):
                found[(layout.layers_of[v.origin][0], "dead-end")].append(n)

    for n, path, got in ar_inputs:
        # ranks whose partial sum went nowhere or elsewhere are reported above, at their own node
        strayed = {graph.rank.get(v) for v in layout.by_layer[path]
                   if not graph.succ.get(v) or any(link.end in consumed_partial for link in graph.succ[v])}
        missing = [r for r in sorted({graph.rank.get(v) for v in layout.by_layer[path]} - got - strayed)
                   if r is not None]
        if missing:
            found[(path, "all-reduce-ranks")].append((n, missing, got))
    _order(layout, found)
    _residual(layout, names, found)

    diffs: list[Difference] = []
    for path, style in layout.styles.items():
        styled = f"{path} ({style_words(style.name)})"
        ev = {kind: items for (p, kind), items in found.items() if p == path}
        row_input = concepts.lesson(concepts.ROW_INPUT, feeder=concepts.row_feeder(layout.styles, path))

        def add(kind: str, concept: concepts.Concept, what: str, lesson: str = "", path: str = path) -> None:
            diffs.append(Difference(kind, path, f"{what}: {lesson or concept.lesson}", concept))

        if "no-input" in ev:
            add("no-input", concepts.DATA_FLOW,
                f"{styled} has no input: no edge goes into {_node_list(ev['no-input'])}")
        if "input-replicated" in ev:
            add("input", concepts.ROW_INPUT, f"{styled} is fed the replicated, unsplit tensor by "
                f"{_where(layout, ev['input-replicated'])}", row_input)
        if "input-rank" in ev:
            links = [link for link, _ in ev["input-rank"]]
            add("input", concepts.ROW_INPUT, f"{styled} is fed another rank's shard by {_where(layout, links)}",
                row_input)
        if "input-shard" in ev:
            add("input", concepts.COLUMN_INPUT, f"{styled} is fed a sharded tensor by "
                f"{_where(layout, ev['input-shard'])}; all-gather the shards first")
        if "dead-end-layer" in ev:
            nodes = ev["dead-end-layer"]
            if style.forward_comm == "all-reduce":
                add("missing-all-reduce", concepts.G_AFTER_ROW, f"no all-reduce after {styled}: "
                    f"{_node_list(nodes)} {'has' if len(nodes) == 1 else 'have'} no forward edge")
            else:
                add("dead-end", concepts.DATA_FLOW, f"the output of {styled} goes nowhere: no edge leaves "
                    f"{_node_list(nodes)}")
        if "dead-end" in ev:
            add("dead-end", concepts.DATA_FLOW, f"the sharded output of {styled} goes nowhere: it ends at "
                f"{_node_list(ev['dead-end'])} instead of reaching the row-parallel layer after it")
        if "missing-all-reduce" in ev:
            consumers = list(dict.fromkeys(n for n, _ in ev["missing-all-reduce"]))
            links = [link for _, link in ev["missing-all-reduce"]]
            first = consumers[0]
            add("missing-all-reduce", concepts.G_AFTER_ROW, f"no all-reduce after {styled}: "
                f"{_node_list(consumers)} ({graph.label(first)!r}) {'reads' if len(consumers) == 1 else 'read'} "
                f"its partial sum by {_where(layout, links)}")
        if "all-reduce-ranks" in ev:
            parts = [f"node {n} takes the partial sum of rank {', '.join(map(str, sorted(got)))} only"
                     for n, _, got in ev["all-reduce-ranks"]]
            missing = ev["all-reduce-ranks"][0][1]
            add("all-reduce-ranks", concepts.G_AFTER_ROW, f"the all-reduce after {styled}: {'; '.join(parts)}; "
                + (f"rank {', '.join(map(str, missing))} must go into it too"
                   if len(parts) == 1 else "one all-reduce must take every rank's"))
        if "extra-all-reduce" in ev:
            add("extra-all-reduce", concepts.NO_COLLECTIVE_AFTER_COLUMN,
                f"all-reduce drawn after {styled} at {ev['extra-all-reduce'][0]}")
        if "first" in ev:
            add("order", concepts.ORDER, f"{path} ({_node_list(ev['first'])}) is drawn first: no layer of the "
                f"plan comes before it along the edges, but the plan starts with {next(iter(layout.styles))}")
        if "order" in ev:
            v, w, earlier = ev["order"][0]
            add("order", concepts.ORDER, f"{earlier} (node {w}) comes after {path} (node {v}) along the edges "
                f"from {v}, but the plan puts {earlier} before {path}")
        if "residual" in ev:
            parent, nodes = ev["residual"][0]
            add("residual", concepts.RESIDUAL, f"no residual add after {parent}: nothing after {path} "
                f"({_node_list(nodes)}) and before the next layer adds {parent}'s input back, and the plan "
                f"declares {parent} residual")
    return diffs


def _node_list(nodes: list[str]) -> str:
    nodes = list(dict.fromkeys(nodes))
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(nodes)


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
