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
            ``all-reduce-ranks``, ``order``, ``residual``).
        layer: the plan's module path concerned, or ``""``.
        message: the difference for a person (names the layer and what is drawn, then teaches the concept).
        concept: the idea at fault (:mod:`.concepts`); the message ends with its lesson.
    """

    kind: str
    layer: str
    message: str
    concept: Concept | None = None

    def __str__(self) -> str:
        return self.message


def style_words(name: str) -> str:
    """How a diagram spells a style: ``column-parallel``, ``row-parallel`` (else the style name)."""
    return labels.STYLE_LABELS.get(name, name)
