"""Theory 02's figure of one block on 2 ranks: its SVG beside the page is current, rendered by the kit's own
renderer, shipped with the page, and the figure is no answer to the diagram item (it names no layer of the
lab's plan: drawing the block with the lab's layers is lab 02's exercise).

Re-render after editing the block:
  python -c "from pathlib import Path; from pytest_distcheck.diagram.check import write_svg; \
from pytest_distcheck.diagram.markdown import mermaid_blocks; p = Path('docs/theory/02-parallelism-flavors.md'); \
write_svg(p, mermaid_blocks(p.read_text())[0])"
"""

from __future__ import annotations

from pathlib import Path

from pytest_distcheck.diagram.check import svg_state
from pytest_distcheck.diagram.markdown import mermaid_blocks
from pytest_distcheck.diagram.names import Namer

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "theory" / "02-parallelism-flavors.md"
BLOCK_PLAN = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}


def test_the_figure_svg_is_current_linked_and_rendered_by_the_kit():
    markdown = PAGE.read_text(encoding="utf-8")
    [block] = mermaid_blocks(markdown)
    state = svg_state(markdown, "docs/theory/02-parallelism-flavors.md", PAGE.with_suffix(".svg"), block)
    assert (state.state, state.message) == ("ok", "")
    assert "rendered by mermaidx" in PAGE.with_suffix(".svg").read_text(encoding="utf-8")[:300]


def test_the_figure_ships_with_the_page():
    from pytest_distcheck.phase_pack import pack_files

    assert "docs/theory/02-parallelism-flavors.svg" in pack_files(ROOT)


def test_the_figure_names_no_layer_of_the_labs_plan():
    from experiments.tp_inference.plan import BLOCK_PLAN as lab_plan

    assert lab_plan == BLOCK_PLAN
    [block] = mermaid_blocks(PAGE.read_text(encoding="utf-8"))
    namer = Namer.of(BLOCK_PLAN)
    labels = [line for line in block.source.splitlines() if '"' in line]
    assert labels and not [line for line in labels if namer.layers(line)]
