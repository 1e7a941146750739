"""Tensor-parallel sharding plans as data: module path -> parallel style.

A plan is the single source that a TP model, the diagram check and the docs read (as torchtitan's
``parallelize_module`` plan). Styles follow Megatron-LM (Shoeybi et al. 2019, sec. 3, Fig. 3): ``colwise``
splits the weight along the output features (f: identity forward, all-reduce backward); ``rowwise``
along the input features, its partial sums made whole by one all-reduce (g: all-reduce forward, identity
backward). :class:`Layer` and :func:`parse_plan` add what checking needs: a ``replicated`` style, the
fused parts of a column-parallel layer (a fused QKV) and the row-parallel bias convention
(docs/design/tp-checker.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, Union

from pytest_distcheck.i18n import N_, _


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
PLAN_ENTRY = N_("plan entry {path!r}: {problem}")
UNKNOWN_STYLE = N_("unknown style {style!r} (known: {known})")
FUSED_COLWISE_ONLY = N_("fused={fused!r} applies to colwise layers only, not {style}")
BIAS_ROWWISE_ONLY = N_("bias={bias!r} applies to rowwise layers only, not {style}")
BAD_HEADS = N_("heads must be a whole number >= 0, got {heads!r}")
NOT_A_STYLE = N_("expected a style name or a Layer, got {type}")
BAD_FUSED = N_("fused must be an int >= 1 or a tuple of part sizes >= 1, got {fused!r}")
UNKNOWN_BIAS = N_("unknown bias convention {bias!r} (known: {known})")


def validate_plan(plan: Mapping[str, str]) -> dict[str, Style]:
    """The plan with each style name resolved.

    Raises:
        ValueError: a style name is unknown (names the module path and the known styles).
    """
    out = {}
    for path, style in plan.items():
        if style not in STYLES:
            problem = _(UNKNOWN_STYLE).format(style=style, known=", ".join(STYLES))
            raise ValueError(_(PLAN_ENTRY).format(path=path, problem=problem))
        out[path] = STYLES[style]
    return out


BIAS_CONVENTIONS = ("replicated", "rank0")


@dataclass(frozen=True)
class Layer:
    """How one layer of a TP module holds the weights of the same layer of the dense module.

    Weights follow ``nn.Linear``'s layout ``[out_features, in_features]``; for an ``nn.Embedding``
    (``[num_embeddings, embedding_dim]``) ``colwise`` splits dim 1 and ``rowwise`` dim 0, as torch's
    ``ColwiseParallel``/``RowwiseParallel`` do. Rank ``r`` of ``t`` holds chunk ``r`` of ``t`` equal,
    contiguous chunks (``torch.chunk``) of the split dim.

    Attributes:
        style: ``colwise`` (weight and bias split on the output features), ``rowwise`` (weight split on
            the input features, bias whole) or ``replicated`` (every parameter whole on every rank).
        fused: ``colwise`` only. The output features are made of ``fused`` equal parts (or parts of
            the given sizes), each split over the ranks and concatenated per rank: a fused QKV
            projection laid out ``[q | k | v]`` is ``fused=3`` (``(q, k, v)`` sizes under
            grouped-query attention); one laid out head by head, ``[n_heads, 3, head_dim]`` (the
            lab's and Megatron-LM's layout), is a plain ``colwise`` (``fused=1``).
        bias: ``rowwise`` only. ``replicated`` (Megatron-LM's RowParallelLinear: the whole bias on
            every rank, added once after the all-reduce, its gradient whole on every rank) or
            ``rank0`` (vLLM's RowParallelLinear: added by rank 0 only, before the all-reduce; its
            gradient is whole on rank 0 and None or zero elsewhere).
        heads: the number of attention heads the layer's output (or input, for ``rowwise``) holds,
            0 when it holds none: each rank must hold whole heads, so it must divide by the TP
            degree (checked before anything runs).

    Raises:
        ValueError: an unknown style or bias convention, ``fused`` < 1 or given for a non-colwise
            layer, ``bias`` given for a non-rowwise layer, ``heads`` < 0.
    """

    style: str
    fused: Union[int, tuple[int, ...]] = 1
    bias: str = "replicated"
    heads: int = 0

    def __post_init__(self) -> None:
        if self.style not in (*STYLES, "replicated"):
            raise ValueError(_(UNKNOWN_STYLE).format(style=self.style, known="colwise, rowwise, replicated"))
        parts = self.fused if isinstance(self.fused, tuple) else (self.fused,)
        if not parts or any(not isinstance(n, int) or n < 1 for n in parts):
            raise ValueError(_(BAD_FUSED).format(fused=self.fused))
        if self.fused != 1 and self.style != "colwise":
            raise ValueError(_(FUSED_COLWISE_ONLY).format(fused=self.fused, style=self.style))
        if self.bias not in BIAS_CONVENTIONS:
            raise ValueError(_(UNKNOWN_BIAS).format(bias=self.bias, known=", ".join(BIAS_CONVENTIONS)))
        if self.bias != "replicated" and self.style != "rowwise":
            raise ValueError(_(BIAS_ROWWISE_ONLY).format(bias=self.bias, style=self.style))
        if not isinstance(self.heads, int) or self.heads < 0:
            raise ValueError(_(BAD_HEADS).format(heads=self.heads))


def parse_plan(plan: Mapping[str, Union[str, Layer]]) -> dict[str, Layer]:
    """The plan with every entry as a :class:`Layer` (a style name ``s`` becomes ``Layer(s)``).

    Raises:
        ValueError: an entry is neither a style name nor a ``Layer``, or names an unknown style (the
            message names the module path).
    """
    out = {}
    for path, entry in plan.items():
        try:
            out[path] = entry if isinstance(entry, Layer) else Layer(entry) if isinstance(entry, str) else None
        except ValueError as exc:
            raise ValueError(_(PLAN_ENTRY).format(path=path, problem=exc)) from None
        if out[path] is None:
            problem = _(NOT_A_STYLE).format(type=type(entry).__name__)
            raise ValueError(_(PLAN_ENTRY).format(path=path, problem=problem))
    return out


# Why shards must be even, said once wherever a split is refused (the helper, the lab, speedup.py).
NOT_DIVISIBLE = N_("{what} of length {length} is not divisible by the TP degree {t}")
HEADS_NOT_DIVISIBLE = N_("{heads} attention heads are not divisible by the TP degree {t}: each rank must hold "
                         "whole heads, and {t} ranks would hold {per:.3g} each")
EVEN_SHARDS = N_("tensor parallelism here needs even shards (torch's RowwiseParallel fails on uneven ones inside the "
                 "forward with 'a and b must have same reduction dim': pytorch/pytorch#141335): choose a TP degree "
                 "that divides every split size")
A_FUSED_PART = N_("{label} (a fused part)")
# The whole refusal where a model is sharded (the lab's shard.py): one language, not the lab's words around the kit's.
DOES_NOT_FIT = N_("TP degree {t} does not fit this model: {problems}; {even_shards}")


def split_problems(sizes: Mapping[str, int], t: int, heads: int = 0) -> list[str]:
    """What keeps TP degree ``t`` from splitting evenly: one :data:`NOT_DIVISIBLE` line per size in
    ``sizes`` (what is split -> its length) that ``t`` does not divide, and :data:`HEADS_NOT_DIVISIBLE`
    when ``heads`` (0: none) is not a multiple of ``t``, in the language in use. Empty when everything
    divides."""
    out = [_(NOT_DIVISIBLE).format(what=what, length=n, t=t) for what, n in sizes.items() if n % t]
    if heads and heads % t:
        out.append(_(HEADS_NOT_DIVISIBLE).format(heads=heads, t=t, per=heads / t))
    return out


def does_not_fit(t: int, problems: Sequence[str]) -> str:
    """Why TP degree ``t`` is refused for a model, in the language in use (:data:`DOES_NOT_FIT`): ``problems``
    (:func:`split_problems`' lines, not empty), then why shards must be even (:data:`EVEN_SHARDS`)."""
    return _(DOES_NOT_FIT).format(t=t, problems="; ".join(problems), even_shards=_(EVEN_SHARDS))
