"""The diagram corpus (fixtures/diagrams/): each page, its plan, and the verdict with its messages.

Runs the real Mermaid parser (one for the module, ~0.3 s per page). The ``ok-*`` pages are drawn in
the styles learners meet in public TP diagrams and must pass; the others must fail with exactly the
messages listed (each a prefix of one finding, in order).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from diagram_support import flow_text

from pytest_distcheck.diagram import concepts
from pytest_distcheck.diagram.check import check_page
from pytest_distcheck.diagram.flow import TAKES_PARTIAL
from pytest_distcheck.diagram.mermaid import MermaidParser
from pytest_distcheck.diagram.plan import LayerNames, parse_inline

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "diagrams"

BLOCK = parse_inline("attn.qkv=colwise,attn.out=rowwise,mlp.up=colwise,mlp.down=rowwise")
RESIDUAL = LayerNames(residual=("attn", "mlp"))
LLAMA = parse_inline("attn.qkv=colwise,attn.out=rowwise,mlp.gate=colwise,mlp.up=colwise,mlp.down=rowwise")
LLAMA_NAMES = LayerNames(fused={"gate_up_proj": ("mlp.gate", "mlp.up")}, residual=("attn", "mlp"))
ATTN = parse_inline("attn.qkv=colwise,attn.out=rowwise")
DOWN = parse_inline("mlp.down=rowwise")

LESSON_ROW_INPUT = concepts.ROW_INPUT.lesson.partition("{")[0]  # "a row-parallel layer reads its own rank's shard: "
C = concepts

# page -> (plan, names, world size, expected findings: (message prefix, concept at fault); [] = passes). On the
# code before the flow check, row-parallel-reads-ln2.md, row-parallel-fed-replicated.md, cross-rank-shard.md
# and all-reduce-per-rank-split.md passed, and every ok-* page failed.
CORPUS: dict[str, tuple[dict, LayerNames | None, int | None, list[tuple[str, concepts.Concept]]]] = {
    "ok-gpu-subgraph-edges.md": (BLOCK, RESIDUAL, 2, []),
    "ok-summary-class-names.md": (BLOCK, RESIDUAL, 2, []),
    "ok-summary-vllm-llama.md": (LLAMA, LLAMA_NAMES, 2, []),
    "ok-nested-tp-rank.md": (BLOCK, RESIDUAL, 2, []),
    "ok-megatron-wq-wk-wv.md": (ATTN, None, 2, []),
    "ok-single-row-parallel.md": (DOWN, None, None, []),
    "row-parallel-fed-replicated.md": (DOWN, None, None, [
        (flow_text("input-replicated", styled="mlp.down (row-parallel)", where="edges X --> d0, X --> d1") + ": "
         + LESSON_ROW_INPUT.rstrip(": "), C.ROW_INPUT),
    ]),
    "row-parallel-reads-ln2.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("dead-end-layer", styled="mlp.up (column-parallel)", nodes="nodes up0, up1"), C.DATA_FLOW),
        (flow_text("input-replicated", styled="mlp.down (row-parallel)", where="edges ln2 --> down0, ln2 --> down1")
         + ": " + LESSON_ROW_INPUT + "the output of mlp.up on the same rank", C.ROW_INPUT),
    ]),
    "missing-both-all-reduces.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("missing-all-reduce", styled="attn.out (row-parallel)", nodes="node add1", label="+", reads="reads",
                   where="edges out0 --> add1, out1 --> add1"), C.G_AFTER_ROW),
        (flow_text("missing-all-reduce", styled="mlp.down (row-parallel)", nodes="node add2", label="+", reads="reads",
                   where="edges down0 --> add2, down1 --> add2"), C.G_AFTER_ROW),
    ]),
    "cross-rank-shard.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("input-rank", styled="mlp.down (row-parallel)", where="edges act0 --> down1, act1 --> down0"),
         C.ROW_INPUT),
    ]),
    "all-reduce-per-rank-split.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("all-reduce-split", styled="mlp.down (row-parallel)", takes="; ".join(
            TAKES_PARTIAL.format(node=n, ranks=r) for n, r in (("ar2", "0"), ("ar2b", "1")))), C.G_AFTER_ROW),
    ]),
    "ok-single-column-parallel.md": (parse_inline("mlp.up=colwise"), None, None, []),
    # the first fixtures: the committed diagram broken one way each
    "qkv-row-parallel.md": (BLOCK, RESIDUAL, 2, [
        ("attn.qkv is drawn row-parallel but the plan says column-parallel (nodes qkv0, qkv1)", C.STYLE),
    ]),
    "missing-all-reduce.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("missing-all-reduce", styled="mlp.down (row-parallel)", nodes="node add2", label="+", reads="reads",
                   where="edges down0 --> add2, down1 --> add2"), C.G_AFTER_ROW),
    ]),
    "dropped-layer.md": (BLOCK, RESIDUAL, 2, [
        ("layer mlp.up missing: no node's label names it (the plan says column-parallel)", C.NAMING),
    ]),
    "syntax-error.md": (BLOCK, RESIDUAL, 2, [("Mermaid syntax error in the block at line 8: got 'SQS' near ",
                                              C.SYNTAX)]),
    "all-reduce-after-column-parallel.md": (BLOCK, RESIDUAL, 2, [
        (flow_text("extra-all-reduce", styled="attn.qkv (column-parallel)", at="arq0"), C.NO_COLLECTIVE_AFTER_COLUMN),
    ]),
}


@pytest.fixture(scope="module")
def parser():
    with MermaidParser() as p:
        yield p


@pytest.mark.parametrize("page", sorted(CORPUS))
def test_corpus_page_gets_its_verdict_and_each_message_teaches_its_concept_without_the_right_diagram(parser, page):
    """The page gets exactly its listed findings; each message carries the lesson of the concept at fault and
    quotes no edge the page does not draw: what the check says never draws the right diagram. (One test per
    page, so each page is parsed once: a parse is most of the time.)"""
    plan, names, world_size, expected = CORPUS[page]
    result = check_page((FIXTURES / page).read_text(encoding="utf-8"), plan, world_size, parser, names)
    found = [(f.message, f.concept) for f in result.findings]
    assert len(found) == len(expected), found
    for (message, concept), (prefix, at_fault) in zip(found, expected, strict=True):
        assert message.startswith(prefix), message
        assert concept is at_fault, (message, concept)
    if not expected:
        return
    drawn = set()
    if result.diagram is not None:
        drawn = {f"{e.start} --> {e.end}" for e in parser.parse(result.diagram.source).flowchart.edges}
    for f in result.findings:
        taught = f.concept.name if f.concept is C.SYNTAX else f.concept.lesson.partition("{")[0]
        assert taught in f.message, f.message
        for edge in re.findall(r"\b\w+ --> \w+\b", f.message):
            assert edge in drawn, (edge, f.message)
        assert "```" not in f.message and "flowchart" not in f.message


def test_the_message_lab_02_quotes_is_the_checks_own(parser):
    """Lab 02's "Draw the block" quotes what the check says of row-parallel-reads-ln2.md, word for word."""
    lab = (ROOT / "docs" / "lab" / "02-tp-inference-cloud.md").read_text(encoding="utf-8")
    quoted = " ".join(re.search(r"gets `(mlp\.down \(row-parallel\) is fed .*?)`", lab, re.S).group(1).split())
    plan, names, world_size, _ = CORPUS["row-parallel-reads-ln2.md"]
    result = check_page((FIXTURES / "row-parallel-reads-ln2.md").read_text(encoding="utf-8"), plan, world_size,
                        parser, names)
    assert quoted in [f.message for f in result.findings]


def test_every_fixture_page_is_in_the_corpus_table():
    assert {p.name for p in FIXTURES.glob("*.md")} - {"README.md"} == set(CORPUS)


def test_the_lab_plan_declares_its_residual_sublayers():
    """The corpus's BLOCK/RESIDUAL are the lab's plan, read from its module (one source)."""
    from experiments.tp_inference import plan as lab
    from pytest_distcheck.diagram.plan import layer_names_of

    assert lab.BLOCK_PLAN == BLOCK
    assert layer_names_of(vars(lab), "BLOCK_PLAN") == RESIDUAL
