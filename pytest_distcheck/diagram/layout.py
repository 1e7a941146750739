"""Which nodes of a flowchart draw which layers of a TP plan: what :func:`.compare.compare` found and
:mod:`.flow` reads."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.diagram.graph import Graph
from pytest_distcheck.tp.plan import Style


@dataclass
class Layout:
    """Which nodes draw which plan layers, as :func:`compare` found them.

    Attributes:
        graph: the expanded graph.
        styles: module path -> its :class:`Style` (plan order).
        by_layer: module path -> ids of the nodes naming it.
        layers_of: node id -> the module paths it names (several for a fused node).
        per_rank: whether some layer node sits in a rank subgraph.
    """

    graph: Graph
    styles: dict[str, Style]
    by_layer: dict[str, list[str]]
    layers_of: dict[str, list[str]]
    per_rank: bool

    def style_of(self, vid: str) -> Style:
        """The planned style of a layer node (fused members share one)."""
        return self.styles[self.layers_of[vid][0]]

    def name_of(self, vid: str) -> str:
        """A layer node's module path(s), for messages."""
        return " + ".join(self.layers_of[vid])
