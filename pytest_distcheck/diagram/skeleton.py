"""The skeleton ``distcheck diagram`` prints: what the plan fixes, with every decision left to the learner.

It gives one subgraph per rank holding one node per layer of the plan, named by its module path alone, and
the tensors entering and leaving the block. It draws no edge and says nothing of styles, shards, ``f`` or
``g``: which layer is column- or row-parallel, what each rank holds, where the collectives sit and what
connects what are the drawing's job. A page whose diagram is still the skeleton (:func:`is_skeleton`,
compared by :func:`~pytest_distcheck.diagram.markdown.drawing_key`) gets :data:`UNDRAWN` and nothing else.
"""

from __future__ import annotations

import re
from typing import Mapping

from pytest_distcheck.diagram.markdown import drawing_key
from pytest_distcheck.i18n import N_
from pytest_distcheck.tp.plan import validate_plan

# Where the kit teaches drawing the block; named by the skeleton's comment and by UNDRAWN.
LESSON = 'lab 02, "Draw the block" (docs/lab/02-tp-inference-cloud.md)'
DECISIONS = ("for each layer, whether it is column- or row-parallel and what each rank holds of its weight; "
             "where f and g sit; and the edges: what feeds each layer and where its output goes")
# DECISIONS and LESSON written out, so the catalog holds the whole sentence (a test keeps them in step).
UNDRAWN = N_("the diagram at line {line} is the skeleton `distcheck diagram` printed, still undrawn: decide for each "
             "layer, whether it is column- or row-parallel and what each rank holds of its weight; where f and g sit; "
             "and the edges: what feeds each layer and where its output goes (lab 02, \"Draw the block\" "
             "(docs/lab/02-tp-inference-cloud.md))")


def _node_id(*parts: str) -> str:
    # prefixed so that no id is a Mermaid keyword such as "end"
    return "n_" + "_".join(re.sub(r"\W", "_", p) for p in parts)


def skeleton(plan: Mapping[str, str], world_size: int = 2) -> str:
    """The Mermaid source of the skeleton of one block of ``plan`` on ``world_size`` ranks.

    Raises:
        ValueError: an unknown style (from :func:`validate_plan`), or ``world_size < 1``.
    """
    validate_plan(plan)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    lines = [
        "flowchart TD",
        "  %% The layers of the plan on each rank, and the tensors entering and leaving the block.",
        "  %% Yours to draw: styles, what each rank holds, f and g, the work between layers, the edges.",
        '  x(["x: the hidden states entering the block [B, T, d]"])',
    ]
    for r in range(world_size):
        lines.append(f'  subgraph {_node_id("rank", str(r))}["rank {r}"]')
        lines.extend(f'    {_node_id(path, "r" + str(r))}["{path}"]' for path in plan)
        lines.append("  end")
    lines.append('  y(["y: the hidden states leaving the block [B, T, d]"])')
    return "\n".join(lines) + "\n"


def skeleton_page(plan_ref: str, plan: Mapping[str, str], world_size: int, svg_name: str) -> str:
    """The page ``distcheck diagram`` prints: a comment listing what to decide, the Mermaid block of
    :func:`skeleton`, and the link its rendered SVG ``svg_name`` will need."""
    return (
        f"<!-- A skeleton printed by `distcheck diagram` from {plan_ref} on {world_size} ranks. Decide\n"
        f"     {DECISIONS}.\n"
        f"     The labels the check reads and the steps: {LESSON}.\n"
        f"     Then: distcheck diagram --check, distcheck diagram --render, and commit the page and its SVG. -->\n\n"
        f"```mermaid\n{skeleton(plan, world_size)}```\n\n![The same diagram, rendered]({svg_name})\n"
    )


def is_skeleton(source: str, plan: Mapping[str, str], world_size: int) -> bool:
    """Whether a Mermaid block's source draws :func:`skeleton` (comments, spacing and ids aside)."""
    return drawing_key(source) == drawing_key(skeleton(plan, world_size))
