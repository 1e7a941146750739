"""DoD item tp-diagram-committed: the Mermaid diagram of a TP block, checked against the TP plan.

Settings come from ``[diagram]`` of the workspace file (page, plan, world size). The page's Mermaid
blocks must parse with the real Mermaid parser; its diagram must show every layer of the plan with the
plan's style on every rank and an all-reduce after each row-parallel layer (pytest_distcheck.diagram);
the SVG rendered from it must sit beside the page, be linked from it, and match the current block.
Both files must be committed as they are (pytest_distcheck.committed asks git). The skeleton that
`distcheck diagram` prints decides nothing: committed as it is, the item stays pending, saying what to decide.
"""

from __future__ import annotations

import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed
from pytest_distcheck.diagram.check import check_page, svg_state
from pytest_distcheck.diagram.config import diagram_config
from pytest_distcheck.diagram.mermaid import MermaidParser
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m
from pytest_distcheck.textfile import PAGE_BYTES, read_text

# DoD item tp-diagram-committed fixes the plan the diagram draws (Megatron-LM, sec. 3): the workspace's plan
# module is the learner's code, so it must hold at least these (red-team A17: a plan shrunk to one layer).
DOD_PLAN = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}


@pytest.mark.local
@pytest.mark.dod("tp-diagram-committed")
def test_tp_diagram_matches_the_plan(distcheck_workspace, distcheck_log, distcheck_evidence):
    try:
        cfg = diagram_config(distcheck_workspace)
    except ConfigError as exc:  # the plan or the [diagram] section is the learner's input: broken, not a crash
        pytest_distcheck.broken(str(exc))
    changed = [_(m.PLAN_LAYER_MISSING).format(layer=layer, style=style) if layer not in cfg.plan else
               _(m.PLAN_LAYER_CHANGED).format(layer=layer, actual=cfg.plan[layer], style=style)
               for layer, style in DOD_PLAN.items() if cfg.plan.get(layer) != style]
    if changed:
        pytest_distcheck.broken(_(m.NOT_THE_DOD_PLAN).format(plan=cfg.plan_ref, changes="; ".join(changed)))
    render = f"distcheck diagram --render {cfg.page_rel}"
    if not cfg.page.is_file():
        pytest_distcheck.pending(_(m.NO_DIAGRAM_PAGE).format(page=cfg.page_rel, plan=cfg.plan_ref, n=cfg.world_size),
                                 f"distcheck diagram > {cfg.page_rel}")
    distcheck_evidence(cfg.page, cfg.svg)
    try:
        markdown = read_text(cfg.page, "diagram page", limit=PAGE_BYTES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    with MermaidParser() as parser:
        result = check_page(markdown, cfg.plan, cfg.world_size, parser, cfg.names)
    if result.undrawn:
        pytest_distcheck.pending(f"{cfg.page_rel}: {result.findings[0].message}",
                                 f"distcheck diagram --check {cfg.page_rel}")
    if result.findings:
        # One finding a line (a skeleton can have twenty), as distcheck diagram --check lists them.
        pytest_distcheck.broken("\n".join(f"{cfg.page_rel}:{f.line}: {f.message}" for f in result.findings))
    assert result.diagram is not None  # no findings means a diagram was found and compared
    svg = svg_state(markdown, cfg.page_rel, cfg.svg, result.diagram)
    if svg.state == "missing":
        pytest_distcheck.pending(svg.message, render)
    if svg.state == "unlinked":
        pytest_distcheck.broken(svg.message)
    if svg.state in ("stale", "unstamped"):
        pytest_distcheck.stale(svg.message, render)
    require_committed([cfg.page, cfg.svg], distcheck_workspace.root)
    distcheck_log(_(m.DIAGRAM_TITLE), _(m.DIAGRAM_MATCHES).format(
        page=cfg.page_rel, line=result.diagram.fence_line, plan=cfg.plan_ref,
        layers=", ".join(f"{p} {s}" for p, s in cfg.plan.items()), n=cfg.world_size, svg=cfg.svg_rel))
    distcheck_evidence(flags=[provenance.CONFIRMED])
    pytest_distcheck.done(_(m.DIAGRAM_DONE))
