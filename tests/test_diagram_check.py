"""The real Mermaid parser, whole pages against the plan, the skeleton and the SVG stamp.

Uses mermaidx (real Mermaid in QuickJS): one parser for the module, ~0.3-1 s per diagram.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diagram_support import right_diagram

from pytest_distcheck.diagram.check import check_page, source_digest, svg_state, write_svg
from pytest_distcheck.diagram.markdown import mermaid_blocks
from pytest_distcheck.diagram.mermaid import MermaidParser, MermaidSyntaxError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "diagrams"
DOC = ROOT / "solutions" / "docs" / "tp-sharding.md"


@pytest.fixture(scope="module")
def plan():
    """The lab's plan, as the workspace names it (the single source the diagram must follow)."""
    from pytest_distcheck.diagram.config import load_plan

    return load_plan("experiments.tp_inference.plan:BLOCK_PLAN", ROOT, ROOT / "checks/distcheck.toml", "plan")


@pytest.fixture(scope="module")
def parser():
    with MermaidParser() as p:
        yield p


def findings(path: Path, plan, parser) -> list[str]:
    result = check_page(path.read_text(encoding="utf-8"), plan, 2, parser)
    return [f"{path.name}:{f.line}: {f.message}" for f in result.findings]


# ---- the real parser ---------------------------------------------------------------------------


def test_parser_gives_vertices_edges_and_subgraphs(parser):
    parsed = parser.parse(
        'flowchart TD\n  subgraph r0["rank 0"]\n    a["attn.qkv<br/>colwise"]:::colwise\n  end\n'
        '  a -- "partial sum" --> b(("all-reduce"))\n  b -.-> c\n'
    )
    fc = parsed.flowchart
    assert parsed.type == "flowchart-v2"
    assert fc.vertices["a"].text == "attn.qkv<br/>colwise"
    assert fc.vertices["a"].classes == ("colwise",)
    assert fc.vertices["b"].shape == "circle"
    assert [(e.start, e.end, e.text, e.stroke) for e in fc.edges] == [
        ("a", "b", "partial sum", "normal"), ("b", "c", "", "dotted")
    ]
    assert [(s.id, s.title, s.members) for s in fc.subgraphs] == [("r0", "rank 0", ("a",))]


def test_other_diagram_types_parse_without_a_graph(parser):
    parsed = parser.parse("sequenceDiagram\n  A->>B: hi\n")
    assert parsed.type == "sequence" and parsed.flowchart is None


@pytest.mark.parametrize(
    "source, line, words",
    [
        ("flowchart TD\n  A[x --> B\n", 4, "got the end of the diagram"),  # unclosed: a line past the end
        ("flowchart TD\n  A --> B\n  B -=> C\n", 3, "got 'NODE_STRING'"),  # not an arrow
        ("flowgraph TD\n  A --> B\n", None, "No diagram type detected"),  # unknown type
    ],
)
def test_syntax_errors_come_from_mermaid_with_the_line(parser, source, line, words):
    with pytest.raises(MermaidSyntaxError) as info:
        parser.parse(source)
    assert info.value.line == line
    assert words in info.value.summary


# ---- whole pages -------------------------------------------------------------------------------


def test_the_committed_diagram_matches_the_plan(plan, parser):
    result = check_page(DOC.read_text(encoding="utf-8"), plan, 2, parser)
    assert result.findings == []
    assert result.diagram is not None and result.diagram.source.startswith("flowchart TD")


# The fixture pages (wrong and right) are checked table-driven in test_diagram_corpus.py.

G_MLP = '  ar2(["g: all-reduce, sum of the partial outputs<br/>[B, T, d], replicated again"])'
F_EDGE = '"f: identity (all-reduce in backward)"'


def test_a_reduce_scatter_in_place_of_the_mlp_g_is_named_at_the_residual_add(plan, parser):
    """The expert review: the committed diagram with its second g a reduce-scatter, nothing gathering after it,
    was reported as matching the plan."""
    from diagram_support import flow_text

    from pytest_distcheck.diagram.concepts import SEQUENCE_SHARD

    page = DOC.read_text(encoding="utf-8")
    assert G_MLP in page
    wrong = page.replace(G_MLP, '  ar2(["reduce-scatter of the partial outputs"])')
    [f] = check_page(wrong, plan, 2, parser).findings
    assert f.message == flow_text("sequence-shard", rs="node ar2", styled="mlp.down (row-parallel)",
                                  nodes="node add2", label="+", reads="reads",
                                  where="edge ar2 --> add2") + ": " + SEQUENCE_SHARD.lesson
    assert wrong.splitlines()[f.line - 1].strip() == "ar2 --> add2"
    # the pair that adds up to the all-reduce
    both = page.replace(G_MLP, '  ar2(["g: reduce-scatter then all-gather of the partial outputs"])')
    assert check_page(both, plan, 2, parser).findings == []


@pytest.mark.parametrize("f_label", [
    "f: fwd identity, bwd all-reduce",
    "f (backward: all-reduce)",
    "f: identity in forward; its backward is an all-reduce",
    "f: identidad en el forward; en el backward, all-reduce",
    "f (en el backward: all-reduce del gradiente)",
    "f: identidad; su backward es un all-reduce",
])
def test_f_labelled_with_backward_before_its_all_reduce_matches(plan, parser, f_label):
    """Each was read as a forward all-reduce on a tensor already whole, and a right diagram failed."""
    page = DOC.read_text(encoding="utf-8")
    assert page.count(F_EDGE) == 4
    assert check_page(page.replace(F_EDGE, f'"{f_label}"'), plan, 2, parser).findings == []


def test_a_page_without_mermaid(plan, parser):
    result = check_page("# nothing here\n", plan, 2, parser)
    assert [f.message for f in result.findings] == ["no ```mermaid block on the page"]


def test_a_page_whose_diagrams_name_no_layer(plan, parser):
    result = check_page("# x\n\n```mermaid\nflowchart LR\n  A --> B\n```\n", plan, 2, parser)
    [(line, message)] = [(f.line, f.message) for f in result.findings]
    assert line == 3
    assert message.startswith(
        "no Mermaid flowchart on the page names a layer of the plan; looked for attn.qkv (qkv_proj, c_attn, "
        "query_key_value, ...); attn.out (o_proj, out_proj, c_proj, ...); mlp.up (up_proj, c_fc, fc1, ...); "
        "mlp.down (down_proj, c_proj, fc2, ...)"
    )
    assert message.endswith("; labels found: 'A', 'B'. Name each layer by its module path in its node's label, "
                            "or declare an alias with the plan")


def test_when_nothing_matches_the_closest_labels_are_named(plan, parser):
    page = ("```mermaid\nflowchart LR\n  A[attn_qkv colwise] --> B[attention] --> C[att.out]\n"
            "  C --> D[MLP up] --> E[GeLU] --> F[mlp_down]\n```\n")
    [f] = check_page(page, plan, 2, parser).findings
    assert ("closest labels: 'attn_qkv colwise' for attn.qkv, 'att.out' for attn.out, 'MLP up' for "
            "mlp.up, 'mlp_down' for mlp.down; labels found: 'attn_qkv colwise', 'attention', 'att.out', "
            "'MLP up', 'GeLU', 'mlp_down'.") in f.message


def test_every_block_must_parse_and_close(plan, parser):
    good = right_diagram(plan, 2)
    page = f"# x\n\n```mermaid\n{good}```\n\n```mermaid\nsequenceDiagram\n  A-=>B\n```\n\n```mermaid\npie\n"
    result = check_page(page, plan, 2, parser)
    messages = [f.message for f in result.findings]
    assert messages[0].startswith(f"Mermaid syntax error in the block at line {good.count(chr(10)) + 6}")
    assert messages[1].startswith("the ```mermaid block opened at line")
    assert len(messages) == 2  # the unclosed pie chart parses; the flowchart matches


def test_a_subgraph_without_its_end_is_named_at_its_own_line(plan, parser):
    """A bad-input walkthrough: the reference diagram without attn_rank0's `end` was a syntax error at the last
    line of the block, blaming an unclosed bracket or quote."""
    from pytest_distcheck.diagram.check import SUBGRAPH_NOT_CLOSED

    lines = DOC.read_text(encoding="utf-8").splitlines(keepends=True)
    opened = next(n for n, ln in enumerate(lines, start=1) if ln.strip().startswith("subgraph attn_rank0"))
    first_end = next(n for n in range(opened, len(lines) + 1) if lines[n - 1].strip() == "end")
    del lines[first_end - 1]
    result = check_page("".join(lines), plan, 2, parser)
    assert [(f.line, f.message) for f in result.findings] == [
        (opened, SUBGRAPH_NOT_CLOSED.format(title='attn_rank0["rank 0"]', line=opened))]


# A node given its label on a later line than the edges drawing it; g1 names attn.out in prose, after other words.
LATE_LABELS = """# The block

```mermaid
flowchart LR
  x(["x, replicated"]) --> qkv --> sdpa["attention on this rank's heads"] --> out
  out -- "partial sum" --> g1 --> y(["y, replicated"])

  qkv["attn.qkv: column-parallel"]
  out["attn.out: row-parallel"]
  g1["g: all-reduce (sum of the partial outputs of attn.out)"]
```
"""


def test_a_finding_names_the_line_of_its_node_or_edge(parser):
    from pytest_distcheck.diagram.compare import NO_STYLE
    from pytest_distcheck.diagram.concepts import STYLE

    result = check_page(LATE_LABELS, {"attn.qkv": "colwise", "attn.out": "rowwise"}, None, parser)
    # g1 is read as attn.out, and that one finding says why; the data flow is not walked through the misread node
    # (an init-workspace learner got four findings contradicting what was drawn)
    [(line, message)] = [(f.line, f.message) for f in result.findings]
    assert line == 10  # where g1 gets its label, not the fence (line 3) nor the edges drawing g1 (line 5)
    assert message == NO_STYLE.format(path="attn.out", nodes="node g1, whose label names attn.out",
                                      style="row-parallel", hint="RowParallelLinear",
                                      lesson=STYLE.lesson[0].upper() + STYLE.lesson[1:])
    no_g = LATE_LABELS.replace("g: all-reduce (sum of the partial outputs of attn.out)", "sum")
    [(flow_line, flow)] = [(f.line, f.message) for f in check_page(
        no_g, {"attn.qkv": "colwise", "attn.out": "rowwise"}, None, parser).findings]
    assert (flow_line, flow.split(":")[0]) == (6, "no all-reduce after attn.out (row-parallel)")  # edge out --> g1


def test_the_spanish_finding_says_why_the_node_is_that_layer(parser):
    from pytest_distcheck import i18n

    i18n.use("es")
    [f] = check_page(LATE_LABELS, {"attn.qkv": "colwise", "attn.out": "rowwise"}, None, parser).findings
    assert f.line == 10
    assert f.message.startswith("attn.out está dibujada sin estilo de paralelismo (nodo g1, cuya etiqueta nombra "
                                "attn.out): el plan dice row-parallel")


def test_a_layer_missing_from_the_drawing_is_named_at_the_block(parser):
    result = check_page(LATE_LABELS, {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise"}, None,
                        parser)
    assert [f.line for f in result.findings if f.message.startswith("layer mlp.up missing")] == [3]


# ---- right diagrams of other plans (tests/diagram_support.py draws them) ---------------------


@pytest.mark.parametrize(
    "extra_plan, world_size",
    [
        ({}, 1),
        ({}, 2),
        ({"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.gate": "colwise",
          "mlp.down": "rowwise"}, 2),
        ({"lm_head": "colwise"}, 2),
        ({"mlp.down": "rowwise"}, 2),
    ],
)
def test_a_right_diagram_of_any_plan_matches_it(plan, parser, extra_plan, world_size):
    the_plan = extra_plan or plan
    source = right_diagram(the_plan, world_size)
    result = check_page(f"```mermaid\n{source}```\n", the_plan, world_size, parser)
    assert result.findings == []
    for path in the_plan:  # every layer of the plan is drawn, once per rank
        assert source.count(f'["{path}<br/>') == world_size


# ---- the skeleton `distcheck diagram` prints ---------------------------------------------------


def test_the_skeleton_names_each_layer_on_each_rank_and_decides_nothing(plan, parser):
    from pytest_distcheck.diagram.skeleton import skeleton

    source = skeleton(plan, 2)
    fc = parser.parse(source).flowchart
    assert fc.edges == ()  # the edges are the drawing's
    labels = [v.text for v in fc.vertices.values()]
    for path in plan:
        assert labels.count(path) == 2  # the module path alone: no style, no shard
    assert [s.title for s in fc.subgraphs] == ["rank 0", "rank 1"]
    assert not any(w in source.lower() for w in ("parallel", "all-reduce", "shard", "colwise", "rowwise"))


def test_the_undrawn_skeleton_says_what_to_decide_and_nothing_else(plan, parser):
    from pytest_distcheck.diagram.skeleton import DECISIONS, UNDRAWN, skeleton

    page = f"# Mine\n\n```mermaid\n{skeleton(plan, 2)}```\n"
    result = check_page(page, plan, 2, parser)
    assert result.undrawn
    assert [f.message for f in result.findings] == [UNDRAWN.format(line=3)]
    assert DECISIONS in UNDRAWN
    renamed = page.replace("n_rank_0", "first").replace("n_attn_qkv_r0", "q0").replace("\n  ", "\n\n    ")
    assert check_page(renamed, plan, 2, parser).undrawn  # ids and spacing do not make it drawn


def test_a_skeleton_begun_is_checked_concept_by_concept(plan, parser):
    from pytest_distcheck.diagram import concepts
    from pytest_distcheck.diagram.skeleton import skeleton

    begun = skeleton(plan, 2).replace('["attn.qkv"]', '["attn.qkv: column-parallel"]')
    result = check_page(f"```mermaid\n{begun}```\n", plan, 2, parser)
    assert not result.undrawn
    taught = {f.concept for f in result.findings}
    assert {concepts.STYLE, concepts.DATA_FLOW} <= taught


def test_the_english_skeleton_page_is_as_it_was_printed():
    """The page in English, byte for byte (its words are catalog messages now; tests/test_i18n_diagram.py)."""
    from pytest_distcheck.diagram.skeleton import skeleton_page

    page = skeleton_page("experiments.tp_inference.plan:BLOCK_PLAN", {"attn.qkv": "colwise", "mlp.down": "rowwise"},
                         1, "tp-sharding.svg")
    assert page == (
        "<!-- A skeleton printed by `distcheck diagram` from experiments.tp_inference.plan:BLOCK_PLAN on 1 ranks. "
        "Decide\n     for each layer, whether it is column- or row-parallel and what each rank holds of its weight; "
        "where f and g sit; and the edges: what feeds each layer and where its output goes.\n"
        '     The labels the check reads and the steps: lab 02, "Draw the block" (docs/lab/02-tp-inference-cloud.md).\n'
        "     Then: distcheck diagram --check, distcheck diagram --render, and commit the page and its SVG. -->\n\n"
        "```mermaid\nflowchart TD\n"
        "  %% The layers of the plan on each rank, and the tensors entering and leaving the block.\n"
        "  %% Yours to draw: styles, what each rank holds, f and g, the work between layers, the edges.\n"
        '  x(["x: the hidden states entering the block [B, T, d]"])\n'
        '  subgraph n_rank_0["rank 0"]\n    n_attn_qkv_r0["attn.qkv"]\n    n_mlp_down_r0["mlp.down"]\n  end\n'
        '  y(["y: the hidden states leaving the block [B, T, d]"])\n'
        "```\n\n![The same diagram, rendered](tp-sharding.svg)\n"
    )


def test_the_skeleton_rejects_a_bad_world_size(plan):
    from pytest_distcheck.diagram.skeleton import skeleton

    with pytest.raises(ValueError, match="world_size must be >= 1, got 0"):
        skeleton(plan, 0)


# ---- the rendered SVG --------------------------------------------------------------------------


def test_the_committed_svg_is_current_and_linked(plan, parser):
    markdown = DOC.read_text(encoding="utf-8")
    block = check_page(markdown, plan, 2, parser).diagram
    assert svg_state(markdown, "docs/tp-sharding.md", DOC.with_suffix(".svg"), block).state == "ok"


def test_svg_states(tmp_path, plan):
    source = right_diagram(plan, 1)
    page = tmp_path / "page.md"
    markdown = f"# d\n\n```mermaid\n{source}```\n"
    page.write_text(markdown)
    [block] = mermaid_blocks(markdown)
    svg = tmp_path / "page.svg"
    state = svg_state(markdown, "docs/page.md", svg, block)
    assert (state.state, state.message) == ("missing", "docs/page.svg not found (the rendered diagram of docs/page.md)")
    written = write_svg(page, block)
    assert written == svg
    text = svg.read_text()
    assert text.startswith("<!-- distcheck diagram: page.md, Mermaid block at line 3, rendered by mermaidx ")
    assert f"source sha256 {source_digest(block)} -->\n<svg" in text
    state = svg_state(markdown, "docs/page.md", svg, block)
    assert (state.state, state.message) == (
        "unlinked", "docs/page.md does not link docs/page.svg: add ![...](page.svg) to the page"
    )
    linked = markdown + "\n![the diagram](page.svg)\n"
    assert svg_state(linked, "docs/page.md", svg, block).state == "ok"
    [edited] = mermaid_blocks(linked.replace("LayerNorm", "LayerNorm ln"))
    state = svg_state(linked, "docs/page.md", svg, edited)
    assert (state.state, state.message) == (
        "stale", "docs/page.svg was rendered from another version of the Mermaid block at docs/page.md:3"
    )
    svg.write_text(text.split("\n", 1)[1])
    assert svg_state(linked, "docs/page.md", svg, block).state == "unstamped"


def test_an_engine_failure_is_a_clear_error(parser, monkeypatch):
    from pytest_distcheck.diagram.mermaid import MermaidEngineError

    def broken(source):
        raise RuntimeError("ReferenceError: __resetDocument is not defined")

    monkeypatch.setattr(parser, "_parse_on_worker", broken)
    with pytest.raises(MermaidEngineError, match=r"the embedded Mermaid failed \(RuntimeError: ReferenceError: "
                                                 r"__resetDocument is not defined\); pytest-distcheck needs "
                                                 r"mermaidx==0\.10\.1, found 0\.10\.1"):
        parser.parse("flowchart TD\n  A --> B\n")
