"""Tensor-parallel sharding plans as data: module path -> parallel style.

A plan is the single source that a TP model, the diagram check and the docs read (torchtitan keeps
its plan as such a mapping and hands it to ``parallelize_module``). Styles follow Megatron-LM
(Shoeybi et al. 2019, arXiv:1909.08053, sec. 3, Fig. 3):

- ``colwise``: weight split along the output features; input replicated, output sharded on its last
  dim; forward needs no communication (the ``f`` operator: identity forward, all-reduce backward).
- ``rowwise``: weight split along the input features; input sharded on its last dim, output partial
  sums made whole by one all-reduce (the ``g`` operator: all-reduce forward, identity backward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Style:
    """A parallel style: how a linear layer's weight is split and what crosses its boundaries.

    Attributes:
        name: ``colwise`` or ``rowwise``.
        weight_split: which weight dim is split (``out_features`` or ``in_features``).
        input_layout, output_layout: ``replicated`` or ``sharded(-1)``.
        forward_comm: the collective after the layer in forward (``none`` or ``all-reduce``).
        backward_comm: the collective on the input gradient in backward.
    """

    name: str
    weight_split: str
    input_layout: str
    output_layout: str
    forward_comm: str
    backward_comm: str


COLWISE = Style("colwise", "out_features", "replicated", "sharded(-1)", "none", "all-reduce")
ROWWISE = Style("rowwise", "in_features", "sharded(-1)", "replicated", "all-reduce", "none")
STYLES: dict[str, Style] = {s.name: s for s in (COLWISE, ROWWISE)}


def validate_plan(plan: Mapping[str, str]) -> dict[str, Style]:
    """The plan with each style name resolved.

    Raises:
        ValueError: a style name is unknown (names the module path and the known styles).
    """
    out = {}
    for path, style in plan.items():
        if style not in STYLES:
            raise ValueError(f"plan entry {path!r}: unknown style {style!r} (known: {', '.join(STYLES)})")
        out[path] = STYLES[style]
    return out
