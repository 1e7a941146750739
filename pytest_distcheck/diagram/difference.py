"""A difference between a diagram and its plan, as :mod:`.compare` and :mod:`.flow` report it."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.diagram import labels
from pytest_distcheck.diagram.concepts import Concept


@dataclass(frozen=True)
class Difference:
    """One way the diagram differs from the plan.

    Attributes:
        kind: ``missing``, ``style``, ``no-style``, ``conflicting-style``, ``rank``,
            ``ambiguous-node``, ``unplanned-style``, or one of the flow kinds of :mod:`.flow`
            (``missing-all-reduce``, ``extra-all-reduce``, ``input``, ``no-input``, ``dead-end``,
            ``all-reduce-ranks``, ``sequence-shard``, ``order``, ``residual``).
        layer: the plan's module path concerned, or ``""``.
        message: the difference for a person (names the layer and what is drawn, then teaches the concept).
        concept: the idea at fault (:mod:`.concepts`); the message ends with its lesson.
        node: the node the difference is about (the first it names), whose line the finding names; ``""``
            when it is about an edge or about nothing drawn (a missing layer: the block's line).
        edge: the edge it is about instead, its ends as written (:attr:`.graph.Link.written`), or ``None``.
    """

    kind: str
    layer: str
    message: str
    concept: Concept | None = None
    node: str = ""
    edge: tuple[str, str] | None = None

    def __str__(self) -> str:
        return self.message


def style_words(name: str) -> str:
    """How a diagram spells a style: ``column-parallel``, ``row-parallel`` (else the style name)."""
    return labels.STYLE_LABELS.get(name, name)
