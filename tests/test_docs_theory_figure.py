"""Theory 02's figure of one block on 2 ranks, on the English page and, with its labels translated, on the Spanish
twin: each page's SVG beside it is current, rendered by the kit's own renderer, shipped with the page, and the
figure is no answer to the diagram item (it names no layer of the lab's plan: drawing the block with the lab's
layers is lab 02's exercise).

Re-render after editing the block (PAGE: docs/theory/02-parallelism-flavors.md or its twin under docs/es/):
  python -c "from pathlib import Path; from pytest_distcheck.diagram.check import write_svg; \
from pytest_distcheck.diagram.markdown import mermaid_blocks; p = Path('PAGE'); \
write_svg(p, mermaid_blocks(p.read_text())[0])"
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck.diagram.check import svg_state
from pytest_distcheck.diagram.markdown import mermaid_blocks
from pytest_distcheck.diagram.names import Namer

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/theory/02-parallelism-flavors.md", "docs/es/theory/02-parallelism-flavors.md"]
BLOCK_PLAN = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}


@pytest.mark.parametrize("page", PAGES)
def test_the_figure_svg_is_current_linked_and_rendered_by_the_kit(page):
    path = ROOT / page
    markdown = path.read_text(encoding="utf-8")
    [block] = mermaid_blocks(markdown)
    state = svg_state(markdown, page, path.with_suffix(".svg"), block)
    assert (state.state, state.message) == ("ok", "")
    assert "rendered by mermaidx" in path.with_suffix(".svg").read_text(encoding="utf-8")[:300]


@pytest.mark.parametrize("page", PAGES)
def test_the_figure_ships_with_the_page(page):
    from pytest_distcheck.phase_pack import pack_files

    assert {page, page.removesuffix(".md") + ".svg"} <= set(pack_files(ROOT))


@pytest.mark.parametrize("page", PAGES)
def test_the_figure_names_no_layer_of_the_labs_plan(page):
    from experiments.tp_inference.plan import BLOCK_PLAN as lab_plan

    assert lab_plan == BLOCK_PLAN
    [block] = mermaid_blocks((ROOT / page).read_text(encoding="utf-8"))
    namer = Namer.of(BLOCK_PLAN)
    labels = [line for line in block.source.splitlines() if '"' in line]
    assert labels and not [line for line in labels if namer.layers(line)]


def test_the_spanish_figure_is_the_english_one_with_its_labels_translated():
    """Same node ids, shapes, edges and subgraphs (the parity test's rule for a Mermaid block), other words."""
    from test_docs_es_parity import _mermaid_structure

    en, es = ([b.source for b in mermaid_blocks((ROOT / p).read_text(encoding="utf-8"))] for p in PAGES)
    assert [_mermaid_structure(b) for b in en] == [_mermaid_structure(b) for b in es]
    assert en != es
