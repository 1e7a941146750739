"""Training FLOPs, GPT parameter counts and the time bounds of training and decoding.

Sources (each function names its own; details: docs/design/calc.md): Kaplan et al. 2020 sec. 2.1
(forward ~ 2N FLOPs per token, training C ~ 6 N D); Narayanan et al. 2021 sec. 5.1, Eq. (2)-(4)
(parameters, FLOPs per iteration with recomputation, end-to-end time); the roofline (Williams et al.
2009; Pope et al. 2022 sec. 2) for decoding bound by memory bandwidth, t_token >= weight_bytes / HBM
bandwidth; Shoeybi et al. 2019 sec. 3 for TP decode (2 all-reduces per layer in the forward).
"""

from __future__ import annotations

from pytest_distcheck.calc._checks import NON_NEGATIVE, refuse
from pytest_distcheck.calc._checks import positive as _positive
from pytest_distcheck.calc._checks import whole as _whole

SECONDS_PER_DAY = 86400.0


def training_flops(params: float, tokens: float) -> float:
    """Training compute C ~ 6 N D FLOPs for N parameters and D tokens (Kaplan et al. 2020, sec. 2.1)."""
    _positive("params", params)
    _positive("tokens", tokens)
    return 6.0 * params * tokens


def forward_flops_per_token(params: float) -> float:
    """Forward FLOPs per token ~ 2 N (Kaplan et al. 2020, Table 1; attention's context term ignored)."""
    _positive("params", params)
    return 2.0 * params


def training_seconds(params: float, tokens: float, gpus: int, flops_per_gpu: float) -> float:
    """Seconds to train at a sustained flops_per_gpu (FLOP/s) per GPU: 6 N D / (n X) (Kaplan 2020)."""
    _whole("gpus", gpus)
    _positive("flops_per_gpu", flops_per_gpu)
    return training_flops(params, tokens) / (gpus * flops_per_gpu)


def gpt_params(layers: int, hidden: int, vocab: int, seq_len: int) -> float:
    """Parameters of a GPT model, Narayanan et al. 2021, sec. 5.1, Eq. (2).

    P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)). Table 1: l=96, h=12288, V=51200, s=2048 -> 174.6B.
    """
    for name, value in (("layers", layers), ("hidden", hidden), ("vocab", vocab), ("seq_len", seq_len)):
        _whole(name, value)
    l, h = layers, hidden  # noqa: E741 -- the paper's symbols
    return 12 * l * h * h * (1 + 13 / (12 * h) + (vocab + seq_len) / (12 * l * h))


def gpt_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """FLOPs of one training iteration with activation recomputation, Narayanan et al. 2021, Eq. (3).

    F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), B = global batch size in sequences.
    """
    for name, value in (("batch", batch), ("seq_len", seq_len), ("layers", layers), ("hidden", hidden),
                        ("vocab", vocab)):
        _whole(name, value)
    b, s, l, h = batch, seq_len, layers, hidden  # noqa: E741
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + vocab / (16 * l * h))


def megatron_training_seconds(tokens: float, params: float, gpus: int, flops_per_gpu: float) -> float:
    """End-to-end training time ~ 8 T P / (n X) seconds, Narayanan et al. 2021, sec. 5.1, Eq. (4).

    The 8 (not 6) counts the recomputed forward. tokens T, params P, gpus n, flops_per_gpu X (FLOP/s
    achieved per GPU). GPT-3: T=300e9, P=175e9, n=1024, X=140e12 -> ~34 days.
    """
    _positive("tokens", tokens)
    _positive("params", params)
    _whole("gpus", gpus)
    _positive("flops_per_gpu", flops_per_gpu)
    return 8.0 * tokens * params / (gpus * flops_per_gpu)


def ridge_point_flops_per_byte(peak_flops: float, memory_bandwidth_bytes_per_s: float) -> float:
    """Roofline ridge point, FLOP/byte: peak FLOP/s / memory bytes/s (Williams et al. 2009).

    Below it a kernel is memory-bound. H100 SXM: 989e12 dense bf16 FLOP/s / 3.35e12 B/s ~ 295.
    """
    _positive("peak_flops", peak_flops)
    _positive("memory_bandwidth_bytes_per_s", memory_bandwidth_bytes_per_s)
    return peak_flops / memory_bandwidth_bytes_per_s


def decode_seconds_per_token_lower_bound(weight_bytes: float, memory_bandwidth_bytes_per_s: float) -> float:
    """Lower bound on the time of one decode step at batch size 1: weight_bytes / bandwidth, seconds.

    Memory-bound decoding (module docstring). KV-cache reads and kernel launch overheads only add to it.
    Example: 7e9 parameters in bf16 (14e9 bytes) on 3.35e12 B/s HBM -> 4.18 ms/token.
    """
    _positive("weight_bytes", weight_bytes)
    _positive("memory_bandwidth_bytes_per_s", memory_bandwidth_bytes_per_s)
    return weight_bytes / memory_bandwidth_bytes_per_s


def tp_decode_seconds_per_token(
    weight_bytes: float,
    memory_bandwidth_bytes_per_s: float,
    tp: int,
    layers: int,
    allreduce_latency_s: float,
    allreduces_per_layer: int = 2,
) -> float:
    """Decode step time under TP degree t: weight_bytes / (t * bandwidth) + layers * k * latency, seconds.

    Each GPU reads 1/t of the weights; each layer's forward has k = 2 all-reduces (Shoeybi et al. 2019,
    sec. 3) whose tiny b x h messages cost about their latency. t = 1 has no all-reduce.

    Raises:
        ValueError: non-positive sizes, tp/layers not whole numbers >= 1, negative latency.
    """
    _whole("tp", tp)
    _whole("layers", layers)
    if allreduce_latency_s < 0:
        raise refuse(NON_NEGATIVE, "allreduce_latency_s", allreduce_latency_s)
    compute = decode_seconds_per_token_lower_bound(weight_bytes, memory_bandwidth_bytes_per_s) / tp
    comm = 0.0 if tp == 1 else layers * allreduces_per_layer * allreduce_latency_s
    return compute + comm


def tp_decode_speedup(
    weight_bytes: float,
    memory_bandwidth_bytes_per_s: float,
    tp: int,
    layers: int,
    allreduce_latency_s: float,
    allreduces_per_layer: int = 2,
) -> float:
    """Speedup of TP decode over one GPU: t_token(1) / t_token(t) (:func:`tp_decode_seconds_per_token`).

    Below t; approaches t only while layers * k * latency << weight_bytes / (t * bandwidth).
    """
    one = tp_decode_seconds_per_token(weight_bytes, memory_bandwidth_bytes_per_s, 1, layers, 0.0)
    many = tp_decode_seconds_per_token(weight_bytes, memory_bandwidth_bytes_per_s, tp, layers,
                                       allreduce_latency_s, allreduces_per_layer)
    return one / many


def decode_allreduce_seconds(batch: int, hidden: int, tp: int, alpha_s: float, bandwidth_bytes_per_s: float,
                             bytes_per_element: int = 2) -> float:
    """One TP all-reduce of a decode step, with its bandwidth term: ring all-reduce of b x h activations,
    2 (t-1) alpha + 2 (t-1)/t b h bytes / B seconds (Patarasuk & Yuan 2009; the b x h message of one new
    token per sequence, Shoeybi et al. 2019 sec. 3). t = 1 costs 0 s.

    Raises:
        ValueError: sizes not whole numbers >= 1, bandwidth <= 0.
    """
    from pytest_distcheck.calc.collectives import ring_allreduce_seconds

    for name, value in (("batch", batch), ("hidden", hidden), ("tp", tp), ("bytes_per_element", bytes_per_element)):
        _whole(name, value)
    return ring_allreduce_seconds(batch * hidden * bytes_per_element, tp, alpha_s, bandwidth_bytes_per_s)


def tp_decode_step_seconds(
    weight_bytes: float,
    memory_bandwidth_bytes_per_s: float,
    tp: int,
    layers: int,
    batch: int,
    hidden: int,
    alpha_s: float,
    link_bandwidth_bytes_per_s: float,
    allreduces_per_layer: int = 2,
    bytes_per_element: int = 2,
) -> float:
    """Decode step time under TP with both terms of each all-reduce, seconds:
    weight_bytes / (t HBM) + layers k :func:`decode_allreduce_seconds`.

    Unlike :func:`tp_decode_seconds_per_token` (one lumped latency per all-reduce) the message size b h and
    the link bandwidth count, so a large batch over a slow link shows its cost. Memory-bound weights read as
    in :func:`decode_seconds_per_token_lower_bound`; KV-cache reads are not counted.

    Raises:
        ValueError: as the two functions it adds.
    """
    _whole("layers", layers)
    _whole("allreduces_per_layer", allreduces_per_layer)
    compute = decode_seconds_per_token_lower_bound(weight_bytes, memory_bandwidth_bytes_per_s) / tp
    comm = decode_allreduce_seconds(batch, hidden, tp, alpha_s, link_bandwidth_bytes_per_s, bytes_per_element)
    return compute + layers * allreduces_per_layer * comm
