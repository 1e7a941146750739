"""Communication of tensor parallelism (TP), sequence parallelism (SP), pipeline point-to-point and the
expert-parallel (EP) all-to-all, in elements or bytes per layer and micro-batch.

Symbols: b = micro-batch size, s = sequence length, h = hidden size, t = TP degree (ranks of the TP
group), bytes_per_element = 2 for fp16/bf16 activations. Sources (each function names its own):
Megatron-LM (Shoeybi et al. 2019, sec. 3), Narayanan et al. 2021 (sec. 3.2, 4.1), Korthikanti et al.
2022 (sec. 4.2.2), ZeRO sec. 8, megatron-core 0.16.1's layers.py; details: docs/design/calc.md.
"""

from __future__ import annotations

from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.calc.collectives import ring_allreduce_seconds
from pytest_distcheck.calc.memory import UNKNOWN_RECOMPUTE
from pytest_distcheck.i18n import N_, _

RECOMPUTE = ("none", "selective", "full")
COLUMN_PARALLEL_PER_LAYER = 2  # the fused QKV projection and the MLP's first GEMM (Shoeybi et al. 2019, sec. 3)
REGATHER_NEEDS_SP = N_("regather_input counts sequence parallelism's backward all-gather: give sequence_parallel=True "
                       "too")


def tp_allreduces_per_layer(recompute: str = "none") -> tuple[int, int]:
    """(forward, backward) all-reduce counts per transformer layer per micro-batch under TP.

    (2, 2) (Shoeybi et al. 2019, Fig. 3/4); ``"full"`` recomputation re-runs the forward inside the
    backward: (2, 4), 6 in all (ZeRO sec. 8). Selective recomputation recomputes only attention
    internals between the f and g operators, so it adds none (Korthikanti et al. 2022, sec. 5).
    With SP, read each all-reduce as one reduce-scatter + one all-gather.

    Raises:
        ValueError: unknown recompute.
    """
    if recompute not in RECOMPUTE:
        raise ValueError(_(UNKNOWN_RECOMPUTE).format(recompute=recompute, known=", ".join(RECOMPUTE)))
    return (2, 4) if recompute == "full" else (2, 2)


def tp_collectives_per_layer(
    sequence_parallel: bool = False, recompute: str = "none", regather_input: bool = False
) -> dict[str, int]:
    """The TP collectives of one transformer layer per micro-batch (forward + backward), by kind.

    Without SP: the all-reduces of :func:`tp_allreduces_per_layer` (4, or 6 with full recomputation). With
    SP each all-reduce becomes one reduce-scatter + one all-gather of the same b s h buffer (Korthikanti et
    al. 2022, sec. 4.2.2: 4 + 4), so the bytes sent are the same: an all-reduce's ring sends 2 (t-1)/t of
    the buffer, a reduce-scatter or all-gather (t-1)/t.

    ``regather_input`` counts megatron-core's implementation of SP (0.16.1,
    ``LinearWithGradAccumulationAndAsyncCommunication`` in megatron/core/tensor_parallel/layers.py): each
    column-parallel layer keeps only its 1/t input slice for backward and all-gathers it again there, so a
    layer does 2 more all-gathers: 6 all-gathers + 4 reduce-scatters (8 + 6 with full recomputation).

    Raises:
        ValueError: unknown recompute; ``regather_input`` without ``sequence_parallel``.
    """
    count = sum(tp_allreduces_per_layer(recompute))
    if regather_input and not sequence_parallel:
        raise ValueError(_(REGATHER_NEEDS_SP))
    if sequence_parallel:
        extra = COLUMN_PARALLEL_PER_LAYER if regather_input else 0
        return {"reduce_scatter": count, "all_gather": count + extra}
    return {"all_reduce": count}


def tp_message_bytes(micro_batch: int, seq_len: int, hidden: int, bytes_per_element: int = 2) -> int:
    """Size of one TP all-reduce buffer, bytes: b * s * h * bytes_per_element (Shoeybi et al. 2019)."""
    for name, value in (("micro_batch", micro_batch), ("seq_len", seq_len), ("hidden", hidden),
                        ("bytes_per_element", bytes_per_element)):
        _whole(name, value)
    return micro_batch * seq_len * hidden * bytes_per_element


def tp_bytes_sent_per_layer(
    micro_batch: int,
    seq_len: int,
    hidden: int,
    tp: int,
    bytes_per_element: int = 2,
    recompute: str = "none",
    sequence_parallel: bool = False,
    regather_input: bool = False,
) -> float:
    """Bytes each TP rank sends per transformer layer per micro-batch (forward + backward), ring algorithms.

    8 b s h (t-1)/t elements (Narayanan et al. 2021, sec. 3.2): 4 all-reduces x 2 (t-1)/t b s h. The same
    with SP (4 reduce-scatters + 4 all-gathers of (t-1)/t b s h, Korthikanti et al. 2022, sec. 4.2.2);
    12 b s h (t-1)/t with full recomputation (6 all-reduces, ZeRO sec. 8); 10 b s h (t-1)/t with
    megatron-core's SP backward re-gather (``regather_input``, :func:`tp_collectives_per_layer`). t = 1
    sends nothing.

    Raises:
        ValueError: a size not a whole number >= 1, unknown recompute, ``regather_input`` without SP.
    """
    _whole("tp", tp)
    msg = tp_message_bytes(micro_batch, seq_len, hidden, bytes_per_element)
    factor = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}
    kinds = tp_collectives_per_layer(sequence_parallel, recompute, regather_input)
    return sum(factor[k] * count for k, count in kinds.items()) * (tp - 1) / tp * msg


def tp_comm_seconds_per_layer(
    micro_batch: int,
    seq_len: int,
    hidden: int,
    tp: int,
    alpha_s: float,
    bandwidth_bytes_per_s: float,
    bytes_per_element: int = 2,
    recompute: str = "none",
) -> float:
    """Alpha-beta time of one layer's TP all-reduces (forward + backward) per micro-batch, seconds.

    count(recompute) x ring all-reduce of b s h bytes_per_element bytes over t ranks
    (:func:`pytest_distcheck.calc.collectives.ring_allreduce_seconds`). Assumes no overlap with compute.
    """
    fwd, bwd = tp_allreduces_per_layer(recompute)
    msg = tp_message_bytes(micro_batch, seq_len, hidden, bytes_per_element)
    return (fwd + bwd) * ring_allreduce_seconds(msg, tp, alpha_s, bandwidth_bytes_per_s)


def pp_message_bytes(
    micro_batch: int,
    seq_len: int,
    hidden: int,
    bytes_per_element: int = 2,
    tp: int = 1,
    scatter_gather: bool = False,
) -> float:
    """Bytes of one pipeline point-to-point message (activation forward or its gradient backward).

    b s h elements, or b s h / t when the scatter/gather optimisation splits it over the t TP ranks
    that share the link (Narayanan et al. 2021, sec. 4.1).
    """
    _whole("tp", tp)
    msg = tp_message_bytes(micro_batch, seq_len, hidden, bytes_per_element)
    return msg / tp if scatter_gather else float(msg)


def pp_bytes_sent_per_stage_per_batch(
    micro_batch: int,
    seq_len: int,
    hidden: int,
    microbatches: int,
    virtual_stages: int = 1,
    bytes_per_element: int = 2,
    tp: int = 1,
    scatter_gather: bool = False,
) -> float:
    """Bytes an interior pipeline stage sends per batch: 2 m v messages (m activations forward, m
    gradients backward, for each of its v model chunks).

    Interleaving multiplies point-to-point traffic by v (Narayanan et al. 2021, sec. 2.2.2); the
    message is :func:`pp_message_bytes`.
    """
    _whole("microbatches", microbatches)
    _whole("virtual_stages", virtual_stages)
    msg = pp_message_bytes(micro_batch, seq_len, hidden, bytes_per_element, tp, scatter_gather)
    return 2 * microbatches * virtual_stages * msg


def ep_all_to_all_bytes(micro_batch: int, seq_len: int, hidden: int, top_k: int, ep: int,
                        bytes_per_element: int = 2) -> float:
    """Bytes one rank sends in one MoE layer's dispatch all-to-all (the combine sends as many back).

    Each of the rank's b s tokens goes to its top_k experts as an h-vector, top_k b s h elements (GShard,
    Lepikhin et al. 2020 sec. 2.2, k = 2; Switch, Fedus et al. 2021 sec. 2.1, k = 1); with routing spread
    evenly over the ep ranks, (ep-1)/ep of those copies leave the rank. Dropped tokens (a capacity factor,
    Switch sec. 2.2) send less, an overloaded expert's rank receives more.

    Raises:
        ValueError: a size not a whole number >= 1.
    """
    for name, value in (("top_k", top_k), ("ep", ep)):
        _whole(name, value)
    return top_k * tp_message_bytes(micro_batch, seq_len, hidden, bytes_per_element) * (ep - 1) / ep
