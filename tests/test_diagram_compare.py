"""Flowchart vs TP plan, on graphs built by hand (pytest_distcheck.diagram.compare).

The graphs here stand for what Mermaid's parser returns; test_diagram_check.py runs the real parser.
"""

from __future__ import annotations

import pytest
from diagram_support import flow_text

from pytest_distcheck.diagram import concepts
from pytest_distcheck.diagram.compare import compare
from pytest_distcheck.diagram.flow import TAKES_PARTIAL
from pytest_distcheck.diagram.mermaid import Edge, Flowchart, Subgraph, Vertex
from pytest_distcheck.tp.plan import COLWISE, ROWWISE

PLAN = {"attn.qkv": "colwise", "attn.out": "rowwise"}


def chart(
    qkv: str = "attn.qkv column-parallel",
    out: str = "attn.out row-parallel",
    ar: str = "all-reduce",
    ranks: int = 2,
    extra_edges: tuple[Edge, ...] = (),
    extra_vertices: tuple[Vertex, ...] = (),
    drop_edges: tuple[tuple[str, str], ...] = (),
) -> Flowchart:
    """x -> q{r} -> att{r} -> o{r} -> ar -> y, one subgraph 'rank r' per rank."""
    v = [Vertex("x", "x"), Vertex("ar", ar), Vertex("y", "y")]
    e = []
    subs = []
    for r in range(ranks):
        v += [Vertex(f"q{r}", qkv), Vertex(f"att{r}", "attention"), Vertex(f"o{r}", out)]
        e += [Edge("x", f"q{r}"), Edge(f"q{r}", f"att{r}"), Edge(f"att{r}", f"o{r}"), Edge(f"o{r}", "ar")]
        subs.append(Subgraph(f"s{r}", f"rank {r}", (f"q{r}", f"att{r}", f"o{r}")))
    e.append(Edge("ar", "y"))
    e = [x for x in e if (x.start, x.end) not in drop_edges] + list(extra_edges)
    v += list(extra_vertices)
    return Flowchart({x.id: x for x in v}, tuple(e), tuple(subs))


def messages(fc: Flowchart, plan=PLAN, world_size: int | None = 2) -> list[str]:
    return [d.message for d in compare(fc, plan, world_size)]


def taught(what: str, concept: concepts.Concept, **words: str) -> str:
    """A message as the check writes it: what is drawn, then the concept's lesson."""
    return f"{what}: {concepts.lesson(concept, **words)}"


ROW_FEEDER = concepts.row_feeder({"attn.qkv": COLWISE, "attn.out": ROWWISE}, "attn.out")


def test_a_diagram_that_matches_has_no_differences():
    assert compare(chart(), PLAN, 2) == []


def test_wrong_style_names_layer_drawn_style_and_planned_style():
    [msg] = messages(chart(qkv="attn.qkv row-parallel"))
    assert msg == taught("attn.qkv is drawn row-parallel but the plan says column-parallel (nodes q0, q1)",
                         concepts.STYLE)


def test_style_may_come_from_a_class_but_must_not_contradict_the_label():
    fc = chart(qkv="attn.qkv")
    fc.vertices["q0"] = Vertex("q0", "attn.qkv", classes=("colwise",))
    fc.vertices["q1"] = Vertex("q1", "attn.qkv column-parallel", classes=("rowwise",))
    [msg] = messages(fc)
    assert msg == taught("attn.qkv (node q1): its label says column-parallel but its class says row-parallel",
                         concepts.STYLE)


def test_missing_style():
    [msg] = messages(chart(out="attn.out"))
    assert msg.startswith("attn.out is drawn without a parallel style (nodes o0, o1): the plan says row-parallel")


def test_missing_layer():
    fc = chart(qkv="input projection", extra_edges=())
    assert messages(fc) == [taught("layer attn.qkv missing: no node's label names it (the plan says "
                                   "column-parallel)", concepts.NAMING)]


def test_missing_all_reduce_after_row_parallel():
    [msg] = messages(chart(ar="sum"))
    assert msg == taught("no all-reduce after attn.out (row-parallel): node ar ('sum') reads its partial sum by "
                         "edges o0 --> ar, o1 --> ar", concepts.G_AFTER_ROW)


def test_all_reduce_may_be_an_edge_label():
    fc = chart(ar="join", drop_edges=(("o0", "ar"), ("o1", "ar")),
               extra_edges=(Edge("o0", "ar", "g: all-reduce"), Edge("o1", "ar", "all-reduce")))
    assert messages(fc) == []


def test_a_row_parallel_layer_without_outgoing_edges_has_no_all_reduce():
    fc = chart(drop_edges=(("o1", "ar"),))
    [msg] = messages(fc)
    assert msg == taught("no all-reduce after attn.out (row-parallel): node o1 has no forward edge",
                         concepts.G_AFTER_ROW)


def test_one_path_around_the_all_reduce_is_enough_to_fail():
    fc = chart(extra_edges=(Edge("o0", "y", "shortcut"),))
    [msg] = messages(fc)
    assert msg.startswith(
        "no all-reduce after attn.out (row-parallel): node y ('y') reads its partial sum by edge o0 --> y")


def test_all_reduce_after_column_parallel_is_reported():
    fc = chart(drop_edges=(("q0", "att0"),), extra_vertices=(Vertex("arq", "AllReduce of q, k, v"),),
               extra_edges=(Edge("q0", "arq"), Edge("arq", "att0")))
    [msg] = messages(fc)
    assert msg.startswith("all-reduce drawn after attn.qkv (column-parallel) at arq")


def test_a_backward_all_reduce_after_column_parallel_is_fine():
    fc = chart(drop_edges=(("q0", "att0"),), extra_edges=(Edge("q0", "att0", "all-reduce in backward"),))
    assert messages(fc) == []


def test_invisible_links_are_not_data_flow():
    fc = chart(extra_edges=(Edge("o0", "y", "", "invisible"),))
    assert messages(fc) == []


def test_each_layer_must_be_on_every_rank():
    assert messages(chart(ranks=1)) == [
        taught(f"{path} is not drawn on rank 1 of 2 (found on rank 0); put one node naming it in each rank's "
               "subgraph (titled 'rank N' or 'GPU N')", concepts.EVERY_RANK) for path in ("attn.qkv", "attn.out")
    ]
    assert messages(chart(ranks=1), world_size=None) == []
    assert taught("attn.qkv is drawn on rank 2 but the world size is 2", concepts.EVERY_RANK) in messages(
        chart(ranks=3))


def test_rank_comes_from_the_nearest_titled_ancestor():
    fc = chart()
    subs = tuple(Subgraph(s.id, "", s.members) for s in fc.subgraphs) + (
        Subgraph("outer0", "Rank 0 (GPU 0)", ("s0",)), Subgraph("outer1", "Rank 1 (GPU 1)", ("s1",)))
    assert messages(Flowchart(fc.vertices, fc.edges, subs)) == []


def test_a_node_naming_two_layers_is_ambiguous():
    fc = chart(extra_vertices=(Vertex("both", "attn.qkv and attn.out"),))
    assert messages(fc)[0] == taught("node both names several layers (attn.qkv, attn.out)", concepts.NAMING)


def test_a_styled_node_outside_the_plan_is_reported():
    fc = chart(extra_vertices=(Vertex("g0", "mlp.gate column-parallel"),))
    assert messages(fc) == [taught("node g0 is drawn column-parallel but names no layer of the plan (attn.qkv, "
                                   "attn.out)", concepts.NAMING)]


def test_the_plan_is_read_not_assumed():
    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.gate": "colwise"}
    assert messages(chart(), plan) == [
        taught("layer mlp.gate missing: no node's label names it (the plan says column-parallel)", concepts.NAMING)
    ]
    fc = chart(qkv="attn.qkv row-parallel", out="output projection", ar="sum")
    assert messages(fc, {"attn.qkv": "rowwise"}) == [
        taught("attn.qkv (row-parallel) is fed the replicated, unsplit tensor by edges x --> q0, x --> q1",
               concepts.ROW_INPUT, feeder="its slice of the input, taken by an edge labelled split"),
        taught("no all-reduce after attn.qkv (row-parallel): nodes att0, att1 ('attention') read its partial sum "
               "by edges q0 --> att0, q1 --> att1", concepts.G_AFTER_ROW),
    ]


def test_an_unknown_style_in_the_plan_is_an_error():
    with pytest.raises(ValueError, match="plan entry 'attn.qkv': unknown style 'diagonal'"):
        compare(chart(), {"attn.qkv": "diagonal"})


# ---- data flow (pytest_distcheck.diagram.flow) ------------------------------------------------


def test_edges_to_and_from_a_subgraph_reach_its_entry_and_exit_nodes():
    """Valid Mermaid: `x --> s0` and `s0 --> ar` where s0 is a subgraph (its id is also a vertex)."""
    fc = chart(drop_edges=(("x", "q0"), ("o0", "ar")),
               extra_vertices=(Vertex("s0", "s0"),), extra_edges=(Edge("x", "s0"), Edge("s0", "ar")))
    assert messages(fc) == []


def test_a_row_parallel_layer_fed_the_replicated_input_names_the_edge():
    fc = chart(drop_edges=(("att1", "o1"),), extra_edges=(Edge("x", "o1"),))
    assert messages(fc) == [
        taught(flow_text("dead-end", styled="attn.qkv (column-parallel)", nodes="node att1"), concepts.DATA_FLOW),
        taught(flow_text("input-replicated", styled="attn.out (row-parallel)", where="edge x --> o1"),
               concepts.ROW_INPUT, feeder=ROW_FEEDER),
    ]
    assert ROW_FEEDER == "the output of attn.qkv on the same rank, through element-wise work only"


def test_a_row_parallel_layer_fed_another_ranks_shard():
    fc = chart(drop_edges=(("att1", "o1"),), extra_edges=(Edge("att0", "o1"), Edge("att1", "o0")))
    assert messages(fc) == [
        taught(flow_text("input-rank", styled="attn.out (row-parallel)", where="edges att0 --> o1, att1 --> o0"),
               concepts.ROW_INPUT, feeder=ROW_FEEDER)
    ]


def test_a_column_parallel_layer_fed_a_shard():
    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise"}
    fc = chart(extra_vertices=(Vertex("u0", "mlp.up colwise"), Vertex("u1", "mlp.up colwise")),
               extra_edges=(Edge("att0", "u0"), Edge("ar", "u1"), Edge("u0", "y"), Edge("u1", "y")))
    # u0/u1 stay outside the rank boxes: the rank check reports that, not the flow
    msgs = messages(fc, plan, world_size=None)
    assert taught(flow_text("input-shard", styled="mlp.up (column-parallel)", where="edge att0 --> u0"),
                  concepts.COLUMN_INPUT) in msgs


def test_an_all_reduce_must_take_every_ranks_partial_sum():
    fc = chart(drop_edges=(("o1", "ar"),), extra_vertices=(Vertex("ar1", "all-reduce"),),
               extra_edges=(Edge("o1", "ar1"), Edge("ar1", "y")))
    assert messages(fc) == [
        taught(flow_text("all-reduce-split", styled="attn.out (row-parallel)", takes="; ".join(
            TAKES_PARTIAL.format(node=n, ranks=r) for n, r in (("ar", "0"), ("ar1", "1")))), concepts.G_AFTER_ROW)
    ]
    fc = chart(drop_edges=(("o1", "ar"),), extra_vertices=(Vertex("n1", "norm"),),
               extra_edges=(Edge("o1", "n1"), Edge("n1", "y")))
    assert messages(fc)[0].startswith(flow_text(  # rank 1's partial sum is read unsummed: said once, at its reader
        "missing-all-reduce", styled="attn.out (row-parallel)", nodes="node n1", label="norm", reads="reads",
        where="edge o1 --> n1"))
    assert len(messages(fc)) == 1


def test_per_rank_all_reduce_nodes_are_accepted():
    fc = chart(drop_edges=(("o0", "ar"), ("o1", "ar"), ("ar", "y")),
               extra_vertices=(Vertex("g0", "AllReduce"), Vertex("g1", "AllReduce")),
               extra_edges=(Edge("o0", "g0"), Edge("o1", "g1"), Edge("g0", "y"), Edge("g1", "y")))
    fc = Flowchart(fc.vertices, fc.edges, (Subgraph("s0", "GPU 0", ("q0", "att0", "o0", "g0")),
                                           Subgraph("s1", "GPU 1", ("q1", "att1", "o1", "g1"))))
    assert messages(fc) == []


def test_layers_out_of_plan_order():
    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
    v = {x.id: x for x in (Vertex("x", "x"), Vertex("d", "mlp.down row-parallel"), Vertex("a1", "all-reduce"),
                           Vertex("q", "attn.qkv colwise"), Vertex("o", "attn.out rowwise"),
                           Vertex("a2", "all-reduce"), Vertex("u", "mlp.up colwise"), Vertex("y", "y"))}
    e = (Edge("x", "q"), Edge("q", "o"), Edge("o", "a2"), Edge("a2", "u"), Edge("u", "d"), Edge("d", "a1"),
         Edge("a1", "y"), Edge("a2", "y"))
    assert messages(Flowchart(v, e, ()), plan) == []  # a summary diagram, in order
    e2 = (Edge("x", "u"), Edge("u", "d"), Edge("d", "a1"), Edge("a1", "q"), Edge("q", "o"), Edge("o", "a2"),
          Edge("a2", "y"))
    assert messages(Flowchart(v, e2, ()), plan) == [
        taught(flow_text("first", path="mlp.up", nodes="node u", first="attn.qkv"), concepts.ORDER)
    ]
    e3 = (Edge("x", "q"), Edge("q", "u"), Edge("u", "o"), Edge("o", "a2"), Edge("a2", "d"), Edge("d", "a1"),
          Edge("a1", "y"))
    assert "mlp.up (node u) comes after attn.out (node o)" not in messages(Flowchart(v, e3, ()), plan)
    assert taught(flow_text("order", path="mlp.up", v="u", w="o", earlier="attn.out"),
                  concepts.ORDER) in messages(Flowchart(v, e3, ()), plan)


def test_residual_adds_where_the_plan_declares_them():
    from pytest_distcheck.diagram.plan import LayerNames

    fc = chart(drop_edges=(("ar", "y"),), extra_vertices=(Vertex("add", "+"),),
               extra_edges=(Edge("ar", "add"), Edge("x", "add", "residual"), Edge("add", "y")))
    residual = LayerNames(residual=("attn",))
    assert [d.message for d in compare(fc, PLAN, 2, residual)] == []
    [msg] = [d.message for d in compare(chart(), PLAN, 2, residual)]
    assert msg.startswith(flow_text("residual", parent="attn", path="attn.out", nodes="nodes o0, o1"))


def test_summary_diagrams_skip_the_rank_check():
    v = {x.id: x for x in (Vertex("x", "x"), Vertex("q", "attn.qkv: ColumnParallelLinear"),
                           Vertex("o", "attn.out: RowParallelLinear"), Vertex("g", "g: all-reduce"), Vertex("y", "y"))}
    e = (Edge("x", "q"), Edge("q", "o"), Edge("o", "g"), Edge("g", "y"))
    assert messages(Flowchart(v, e, ()), world_size=2) == []
    e_no_ar = (Edge("x", "q"), Edge("q", "o"), Edge("o", "y"))
    assert messages(Flowchart(v, e_no_ar, ()), world_size=2)[0].startswith(flow_text(
        "missing-all-reduce", styled="attn.out (row-parallel)", nodes="node y", label="y", reads="reads",
        where="edge o --> y"))


def test_style_from_the_edge_into_the_node_or_its_subgraph_title():
    fc = chart(qkv="attn.qkv", out="attn.out", drop_edges=(("x", "q0"), ("x", "q1")),
               extra_edges=(Edge("x", "q0", "ColwiseParallel"), Edge("x", "q1", "ColwiseParallel")))
    fc = Flowchart(fc.vertices, fc.edges, (
        Subgraph("r0", "RowwiseParallel", ("o0",)), Subgraph("r1", "row-parallel", ("o1",)),
        Subgraph("s0", "rank 0", ("q0", "att0", "r0")), Subgraph("s1", "rank 1", ("q1", "att1", "r1"))))
    assert messages(fc, world_size=None) == []


def test_sequence_parallelism_drawn_with_the_residual_adds_on_sequence_shards_is_named():
    """Megatron-LM's sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2) keeps the residual stream in
    sequence shards: reduce-scatter after each row-parallel layer, all-gather before the next column-parallel one.
    A plan has no sequence parallelism (its row-parallel layers end with an all-reduce), so the slice each
    reduce-scatter leaves must not reach a residual add, a layer or the block's output ungathered."""
    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
    ids = ["x", "ag1", "q", "att", "o", "rs1", "add1", "ag2", "u", "act", "d", "rs2", "add2"]
    text = {"ag1": "all-gather", "q": "attn.qkv colwise", "o": "attn.out rowwise", "rs1": "reduce-scatter",
            "add1": "+", "ag2": "all-gather", "u": "mlp.up colwise", "d": "mlp.down rowwise",
            "rs2": "reduce-scatter", "add2": "+"}
    v = {i: Vertex(i, text.get(i, i)) for i in ids}
    e = tuple(Edge(a, b) for a, b in zip(ids, ids[1:], strict=False) if (a, b) != ("add1", "ag2")) + (
        Edge("add1", "ag2"), Edge("x", "add1"), Edge("add1", "add2"))
    found = compare(Flowchart(v, e, ()), plan, 2)
    assert [(d.kind, d.layer, d.edge) for d in found] == [
        ("sequence-shard", "attn.out", ("rs1", "add1")), ("sequence-shard", "mlp.down", ("rs2", "add2"))]
    assert found[1].message == taught(flow_text(
        "sequence-shard", rs="node rs2", styled="mlp.down (row-parallel)", nodes="node add2", label="+",
        reads="reads", where="edge rs2 --> add2"), concepts.SEQUENCE_SHARD)
    # gathered before the adds, the reduce-scatters and all-gathers are the all-reduces they add up to
    e_gathered = tuple(Edge(x.start, x.end, "all-gather") if x.start in ("rs1", "rs2") else x for x in e)
    assert messages(Flowchart(v, e_gathered, ()), plan) == []


def residual_chart(g: str, into_add: str = "") -> Flowchart:
    """chart() with its all-reduce node labelled ``g`` and a residual add after it: ar -> add <- x, add -> y."""
    return chart(ar=g, drop_edges=(("ar", "y"),), extra_vertices=(Vertex("add", "+"),),
                 extra_edges=(Edge("ar", "add", into_add), Edge("x", "add", "residual"), Edge("add", "y")))


def test_a_reduce_scatter_in_place_of_g_is_named_where_its_slice_is_read_whole():
    """The expert review: g replaced by a reduce-scatter, nothing gathering after it, passed as matching the plan."""
    [d] = compare(residual_chart("reduce-scatter of the partial outputs"), PLAN, 2)
    assert (d.kind, d.layer, d.edge, d.concept) == ("sequence-shard", "attn.out", ("ar", "add"),
                                                    concepts.SEQUENCE_SHARD)
    assert d.message == taught(flow_text(
        "sequence-shard", rs="node ar", styled="attn.out (row-parallel)", nodes="node add", label="+",
        reads="reads", where="edge ar --> add"), concepts.SEQUENCE_SHARD)
    # the block's output itself
    [d] = compare(chart(ar="reduce-scatter"), PLAN, 2)
    assert (d.kind, d.node) == ("sequence-shard", "y")
    assert d.message == taught(flow_text("sequence-output", rs="node ar", styled="attn.out (row-parallel)",
                                         nodes="node y"), concepts.SEQUENCE_SHARD)
    # the next layer, which wants its input whole: the reduce-scatter is named, not f's edge
    ids = ["x", "q", "att", "o", "rs", "u", "z"]
    text = {"q": "attn.qkv colwise", "o": "attn.out rowwise", "rs": "reduce-scatter", "u": "mlp.up colwise"}
    fc = Flowchart({i: Vertex(i, text.get(i, i)) for i in ids},
                   tuple(Edge(a, b) for a, b in zip(ids, ids[1:], strict=False)), ())
    assert [(d.kind, d.layer, d.edge) for d in compare(fc, {**PLAN, "mlp.up": "colwise"}, 2)] == [
        ("sequence-shard", "attn.out", ("rs", "u"))]


@pytest.mark.parametrize("g, into_add", [
    ("g: reduce-scatter then all-gather of the partial outputs", ""),  # the pair is an all-reduce
    ("reduce-scatter", "all-gather"),
])
def test_a_reduce_scatter_gathered_before_the_add_passes(g, into_add):
    assert messages(residual_chart(g, into_add)) == []
    # or gathered by a node of its own, after element-wise work on the slices
    fc = chart(ar="reduce-scatter", drop_edges=(("ar", "y"),),
               extra_vertices=(Vertex("drop", "dropout"), Vertex("ag", "all-gather"), Vertex("add", "+")),
               extra_edges=(Edge("ar", "drop"), Edge("drop", "ag"), Edge("ag", "add"), Edge("x", "add"),
                            Edge("add", "y")))
    assert messages(fc) == []


def test_a_forward_all_reduce_on_the_whole_input_of_a_column_parallel_layer_is_named():
    """Where f goes (identity in forward) a forward all-reduce sums a tensor already whole on every rank, world-size
    times it (a Spanish-first learner's walkthrough: a plain 'all-reduce' in f's place passed). f's own label and
    no label at all pass."""
    def into_qkv(label: str) -> Flowchart:
        return chart(drop_edges=(("x", "q0"), ("x", "q1")),
                     extra_edges=(Edge("x", "q0", label), Edge("x", "q1", label)))

    [msg] = messages(into_qkv("all-reduce"))
    assert msg == taught("a forward all-reduce is drawn into attn.qkv (column-parallel) at edge x --> q0, on a "
                         "tensor already whole on every rank", concepts.COLUMN_INPUT)
    assert messages(into_qkv("f: identity, all-reduce in backward")) == []
    assert messages(into_qkv("f: identidad, all-reduce del gradiente en el backward")) == []
    # "backward" before the all-reduce says the same (an expert's "f: fwd identity, bwd all-reduce" got the error)
    assert messages(into_qkv("f: fwd identity, bwd all-reduce")) == []
    assert messages(into_qkv("f: identidad en el forward; en el backward, all-reduce")) == []
    assert messages(into_qkv("g: identidad en el backward, all-reduce"))[0].startswith("a forward all-reduce is drawn")
    assert messages(chart()) == []
    # the same as a node between the input and the layer
    fc = chart(drop_edges=(("x", "q0"), ("x", "q1")), extra_vertices=(Vertex("f", "all-reduce"),),
               extra_edges=(Edge("x", "f"), Edge("f", "q0"), Edge("f", "q1")))
    [msg] = messages(fc)
    assert msg.startswith("a forward all-reduce is drawn into attn.qkv (column-parallel) at f, on a tensor")
