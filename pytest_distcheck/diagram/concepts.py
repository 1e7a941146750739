"""The ideas a sharding diagram can get wrong, each named and taught in the learner's terms.

Every difference the diagram check reports (:mod:`.compare`, :mod:`.flow`) carries one :class:`Concept`:
its ``name`` says which idea is at fault and its ``lesson`` (ending the message) teaches it, without
drawing the right diagram. Sources: Shoeybi et al. 2019 (Megatron-LM, arXiv:1909.08053), sec. 3 and
Fig. 3 (column-/row-parallel, ``f`` and ``g``); Korthikanti et al. 2022 (arXiv:2205.05198), sec. 4.2.2
(sequence parallelism); Radford et al. 2019, sec. 2.3 (pre-LN residual).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pytest_distcheck.i18n import N_, _


@dataclass(frozen=True)
class Concept:
    """One idea of the sharded block: a short ``name`` and the ``text`` of the lesson a message ends with (English,
    a catalog msgid; :attr:`lesson` speaks it)."""

    name: str
    text: str

    @property
    def lesson(self) -> str:
        """The lesson in the language in use."""
        return _(self.text)


EVERY_RANK = Concept(
    "every layer on every rank",
    N_("tensor parallelism splits each layer's weight over all the ranks, so every rank holds a shard of "
       "every layer (whole layers on different ranks would be pipeline parallelism)"),
)
STYLE = Concept(
    "column- or row-parallel",
    N_("a column-parallel layer holds a slice of its weight's output features and computes those outputs "
       "whole; a row-parallel layer holds a slice of the input features and computes a partial sum of every "
       "output"),
)
COLUMN_INPUT = Concept(
    "the input of a column-parallel layer (f)",
    N_("a column-parallel layer reads its whole input, replicated on every rank; f (identity in forward, "
       "all-reduce in backward) sits on that edge"),
)
ROW_INPUT = Concept(
    "the input of a row-parallel layer",
    N_("a row-parallel layer reads its own rank's shard: {feeder}"),
)
G_AFTER_ROW = Concept(
    "g after a row-parallel layer",
    N_("a row-parallel layer's output is a partial sum; g, one all-reduce over every rank's partial sum, "
       "makes it whole before anything reads it"),
)
SEQUENCE_SHARD = Concept(
    "an all-gather after a reduce-scatter",
    N_("a reduce-scatter sums the partial sums but leaves each rank only its slice of the sequence; sequence "
       "parallelism (Korthikanti et al. 2022, sec. 4.2.2) all-gathers it before anything needs the whole tensor, "
       "and the plan has no sequence parallelism: its row-parallel layers end with g, an all-reduce"),
)
NO_COLLECTIVE_AFTER_COLUMN = Concept(
    "no collective after a column-parallel layer",
    N_("a column-parallel layer's output stays sharded until the row-parallel layer after it reads it, so no "
       "all-reduce sits between them in forward"),
)
DATA_FLOW = Concept(
    "the data flow",
    N_("every layer reads the tensor before it and its output goes on to the next step of the block"),
)
ORDER = Concept("the plan's order", N_("the tensors go through the layers in the order the plan lists them"))
RESIDUAL = Concept(
    "the residual stream",
    N_("each sublayer's input is added back to its output once g has made that output whole"),
)
NAMING = Concept(
    "naming the layers",
    N_("each layer of the plan is one node per rank, named by its module path, with its style in the label"),
)
SYNTAX = Concept("Mermaid syntax", N_("the block must parse before the check can read what it draws"))

ALL = (EVERY_RANK, STYLE, COLUMN_INPUT, ROW_INPUT, G_AFTER_ROW, SEQUENCE_SHARD, NO_COLLECTIVE_AFTER_COLUMN,
       DATA_FLOW, ORDER, RESIDUAL, NAMING, SYNTAX)


SLICE_OF_INPUT = N_("its slice of the input, taken by an edge labelled split")
OUTPUT_OF = N_("the output of {layers} on the same rank, through element-wise work only")
AND = N_(" and ")


def row_feeder(styles: Mapping[str, object], path: str) -> str:
    """The words for what the row-parallel layer ``path`` reads: the column-parallel layers the plan puts just
    before it (``the output of mlp.up on the same rank``), or, with none, a slice of its input.

    Args:
        styles: module path -> :class:`pytest_distcheck.tp.plan.Style`, in plan order.
        path: a row-parallel layer of ``styles``.
    """
    paths = list(styles)
    before: list[str] = []
    for earlier in reversed(paths[:paths.index(path)]):
        if getattr(styles[earlier], "input_layout", "") != "replicated":
            break
        before.insert(0, earlier)
    if not before:
        return _(SLICE_OF_INPUT)
    return _(OUTPUT_OF).format(layers=_(AND).join(before))


def lesson(concept: Concept, **words: str) -> str:
    """The concept's lesson with its placeholders filled (``feeder`` for :data:`ROW_INPUT`)."""
    return concept.lesson.format(**words) if words else concept.lesson
