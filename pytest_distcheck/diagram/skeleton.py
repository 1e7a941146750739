"""The skeleton ``distcheck diagram`` prints: what the plan fixes, with every decision left to the learner.

It gives one subgraph per rank holding one node per layer of the plan, named by its module path alone, and
the tensors entering and leaving the block. It draws no edge and says nothing of styles, shards, ``f`` or
``g``: which layer is column- or row-parallel, what each rank holds, where the collectives sit and what
connects what are the drawing's job. A page whose diagram is still the skeleton (:func:`is_skeleton`,
compared by :func:`~pytest_distcheck.diagram.markdown.drawing_key`) gets :data:`UNDRAWN` and nothing else.
Its words are the language in use's (the page's comment, ``%%`` comments, the input and output nodes, the image's
alt text); what the check reads is the same in every language: the module paths and the ``rank N`` titles (the node
ids too, identifiers). A skeleton printed in any language counts as undrawn in every language.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Mapping

from pytest_distcheck import i18n
from pytest_distcheck.diagram.markdown import drawing_key
from pytest_distcheck.i18n import N_
from pytest_distcheck.tp.plan import validate_plan

# Where the kit teaches drawing the block, and what to decide: named by PAGE_COMMENT and by UNDRAWN.
LESSON = 'lab 02, "Draw the block" (docs/lab/02-tp-inference-cloud.md)'
DECISIONS = ("for each layer, whether it is column- or row-parallel and what each rank holds of its weight; "
             "where f and g sit; and the edges: what feeds each layer and where its output goes")
# DECISIONS and LESSON written out, so the catalog holds the whole sentence (a test keeps them in step).
UNDRAWN = N_("the diagram at line {line} is the skeleton `distcheck diagram` printed, still undrawn: decide for each "
             "layer, whether it is column- or row-parallel and what each rank holds of its weight; where f and g sit; "
             "and the edges: what feeds each layer and where its output goes (lab 02, \"Draw the block\" "
             "(docs/lab/02-tp-inference-cloud.md))")
# The page's opening comment: each "\n" starts a line of the page, indented under "<!-- ". DECISIONS and LESSON
# written out, as in UNDRAWN; a translation lays out its own lines (<= 108 columns with the lab's plan).
PAGE_COMMENT = N_("A skeleton printed by `distcheck diagram` from {plan} on {world_size} ranks. Decide\n"
                  "for each layer, whether it is column- or row-parallel and what each rank holds of its weight; "
                  "where f and g sit; and the edges: what feeds each layer and where its output goes.\n"
                  "The labels the check reads and the steps: lab 02, \"Draw the block\" "
                  "(docs/lab/02-tp-inference-cloud.md).\n"
                  "Then: distcheck diagram --check, distcheck diagram --render, and commit the page and its SVG.")
# The block's own words, which the check does not read (a "%%" comment is dropped, the input and output nodes
# name no layer); no double quote, as the labels sit in "...".
LAYERS_NOTE = N_("The layers of the plan on each rank, and the tensors entering and leaving the block.")
YOURS_NOTE = N_("Yours to draw: styles, what each rank holds, f and g, the work between layers, the edges.")
X_LABEL = N_("x: the hidden states entering the block [B, T, d]")
Y_LABEL = N_("y: the hidden states leaving the block [B, T, d]")
RENDERED = N_("The same diagram, rendered")


def _node_id(*parts: str) -> str:
    # prefixed so that no id is a Mermaid keyword such as "end"
    return "n_" + "_".join(re.sub(r"\W", "_", p) for p in parts)


def skeleton(plan: Mapping[str, str], world_size: int = 2, lang: str | None = None) -> str:
    """The Mermaid source of the skeleton of one block of ``plan`` on ``world_size`` ranks, its words in
    ``lang`` (one of :data:`pytest_distcheck.i18n.SUPPORTED`; ``None``: the language in use).

    Raises:
        ValueError: an unknown style (from :func:`validate_plan`), or ``world_size < 1``.
    """
    validate_plan(plan)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    say = _speaker(lang)
    lines = [
        "flowchart TD",
        f"  %% {say(LAYERS_NOTE)}",
        f"  %% {say(YOURS_NOTE)}",
        f'  x(["{say(X_LABEL)}"])',
    ]
    for r in range(world_size):
        lines.append(f'  subgraph {_node_id("rank", str(r))}["rank {r}"]')  # the title the check reads
        lines.extend(f'    {_node_id(path, "r" + str(r))}["{path}"]' for path in plan)
        lines.append("  end")
    lines.append(f'  y(["{say(Y_LABEL)}"])')
    return "\n".join(lines) + "\n"


def _speaker(lang: str | None) -> Callable[[str], str]:
    return i18n._ if lang is None else functools.partial(i18n.in_language, lang)


def skeleton_page(plan_ref: str, plan: Mapping[str, str], world_size: int, svg_name: str) -> str:
    """The page ``distcheck diagram`` prints, in the language in use: a comment listing what to decide, the
    Mermaid block of :func:`skeleton`, and the link its rendered SVG ``svg_name`` will need."""
    comment = "\n     ".join(i18n._(PAGE_COMMENT).format(plan=plan_ref, world_size=world_size).split("\n"))
    return (
        f"<!-- {comment} -->\n\n"
        f"```mermaid\n{skeleton(plan, world_size)}```\n\n![{i18n._(RENDERED)}]({svg_name})\n"
    )


def is_skeleton(source: str, plan: Mapping[str, str], world_size: int) -> bool:
    """Whether a Mermaid block's source draws :func:`skeleton` in any language the kit speaks (comments,
    spacing and ids aside)."""
    key = drawing_key(source)
    return any(key == drawing_key(skeleton(plan, world_size, lang)) for lang in i18n.SUPPORTED)
