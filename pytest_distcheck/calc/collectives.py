"""Collective communication: nccl-tests algbw/busbw and alpha-beta time models. Pure Python, no torch.

Conventions: ``size_bytes`` is the buffer size S as nccl-tests reports it (the buffer each rank holds for
all-reduce, broadcast and reduce; the full gathered buffer for all-gather and reduce-scatter, nccl-tests
``doc/PERFORMANCE.md``); ``n`` the ranks of the process group, >= 1; ``alpha_s`` the per-message latency in
seconds; ``bandwidth_bytes_per_s`` the per-rank link bandwidth B (beta = 1/B); GB = 1e9 bytes (nccl-tests
``GetBw()``). Each function names its source (nccl-tests, Patarasuk & Yuan 2009, Thakur, Rabenseifner &
Gropp 2005, NCCL 2.4's trees, ZeRO sec. 7.2, SHArP); the list: docs/design/calc.md.
"""

from __future__ import annotations

import math

from pytest_distcheck.calc._checks import FINITE_NON_NEGATIVE, NON_NEGATIVE, RANKS_N, refuse
from pytest_distcheck.calc._checks import positive as _positive
from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

GB = 1e9  # bytes; nccl-tests reports GB/s with 1.0E9

# nccl-tests doc/PERFORMANCE.md, section "Bus bandwidth": factor(n) applied to algbw.
_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce")
UNKNOWN_COLLECTIVE = N_("unknown collective {collective!r}; known: {known}")
NO_MODEL = N_("no alpha-beta model for {collective!r}; have: {known}")
HYBRID_BYTES = N_("HYBRID_SHARD sends different bytes inside and across nodes: use hsdp_bytes_per_step")


def _key(collective: str) -> str:
    key = collective.lower().replace("_", "").replace("-", "").replace(" ", "")
    if key not in _FACTORS:
        raise ValueError(_(UNKNOWN_COLLECTIVE).format(collective=collective, known=", ".join(COLLECTIVES)))
    return key


def busbw_factor(collective: str, n: int) -> float:
    """The nccl-tests bus-bandwidth factor: busbw = algbw * factor (dimensionless).

    all_reduce 2(n-1)/n; reduce_scatter, all_gather, alltoall (n-1)/n; broadcast, reduce 1.
    Source: nccl-tests ``doc/PERFORMANCE.md``, "Bus bandwidth". Names are matched ignoring case,
    ``_`` and ``-`` (``"all_reduce"``, ``"allreduce"``, ``"all-reduce"``).

    Raises:
        ValueError: unknown collective, or n not a whole number >= 1.
    """
    _whole(_(RANKS_N), n)
    return float(_FACTORS[_key(collective)](n))


def algbw_gbps(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (GB = 1e9 bytes): S / t (nccl-tests ``doc/PERFORMANCE.md``).

    Raises:
        ValueError: size_bytes < 0 or seconds <= 0.
    """
    if size_bytes < 0:
        raise refuse(NON_NEGATIVE, "size_bytes", size_bytes)
    _positive("seconds", seconds)
    return size_bytes / seconds / GB


def busbw_gbps(collective: str, size_bytes: float, seconds: float, n: int) -> float:
    """Bus bandwidth in GB/s: algbw * busbw_factor(collective, n) (nccl-tests ``doc/PERFORMANCE.md``).

    busbw is the number to compare with the link's peak bandwidth; it does not depend on n for an
    ideal ring. For all_gather/reduce_scatter, size_bytes is the full gathered buffer.

    Raises:
        ValueError: as :func:`busbw_factor` and :func:`algbw_gbps`.
    """
    return algbw_gbps(size_bytes, seconds) * busbw_factor(collective, n)


def ring_allreduce_seconds(size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float) -> float:
    """Ring all-reduce time, alpha-beta model: 2(n-1) alpha + 2 (n-1)/n * S/B seconds.

    Source: Patarasuk & Yuan 2009 (ring all-reduce = reduce-scatter + all-gather, each n-1 steps of
    S/n bytes). n = 1 costs 0 s.
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_bytes_per_s


def ring_reduce_scatter_seconds(
    size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Ring reduce-scatter time: (n-1) alpha + (n-1)/n * S/B seconds, S the full (unscattered) buffer.

    Source: Thakur, Rabenseifner & Gropp 2005, sec. 4 (ring algorithm).
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return (n - 1) * alpha_s + (n - 1) / n * size_bytes / bandwidth_bytes_per_s


def ring_all_gather_seconds(size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float) -> float:
    """Ring all-gather time: (n-1) alpha + (n-1)/n * S/B seconds, S the full (gathered) buffer.

    Source: Thakur, Rabenseifner & Gropp 2005, sec. 4 (ring algorithm).
    """
    return ring_reduce_scatter_seconds(size_bytes, n, alpha_s, bandwidth_bytes_per_s)


def binomial_broadcast_seconds(
    size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Binomial-tree broadcast time: ceil(log2 n) * (alpha + S/B) seconds.

    Source: Thakur, Rabenseifner & Gropp 2005, sec. 4 (short-message broadcast).
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return math.ceil(math.log2(n)) * (alpha_s + size_bytes / bandwidth_bytes_per_s)


def ring_allreduce_latency_seconds(n: int, alpha_s: float) -> float:
    """The latency (alpha) term of ring all-reduce: 2(n-1) alpha seconds (Patarasuk & Yuan 2009)."""
    _whole(_(RANKS_N), n)
    return 2 * (n - 1) * alpha_s


def tree_allreduce_latency_seconds(n: int, alpha_s: float) -> float:
    """The latency term of a tree all-reduce (reduce up, broadcast down): 2 log2(n) alpha seconds.

    Source: NVIDIA, "Massively scale your deep learning training with NCCL 2.4" (2019): double binary
    trees have logarithmic latency. NCCL's tree spans nodes only (within a node it is a chain:
    NVIDIA/nccl#919, #672), so n is the number of nodes there. The tree's bandwidth term depends on the
    implementation and is not modelled here.
    """
    _whole(_(RANKS_N), n)
    return 2 * math.log2(n) * alpha_s


def collective_seconds(
    collective: str, size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Alpha-beta time of a collective: ring all_reduce/reduce_scatter/all_gather, pairwise alltoall, binomial
    broadcast. Other all-reduce algorithms: :func:`tree_allreduce_seconds`,
    :func:`halving_doubling_allreduce_seconds`, :func:`hierarchical_allreduce_seconds`.

    Raises:
        ValueError: a collective without a model here (reduce) or an unknown name.
    """
    key = _key(collective)
    models = {
        "allreduce": ring_allreduce_seconds,
        "reducescatter": ring_reduce_scatter_seconds,
        "allgather": ring_all_gather_seconds,
        "alltoall": all_to_all_seconds,
        "broadcast": binomial_broadcast_seconds,
    }
    if key not in models:
        known = ", ".join(c for c in COLLECTIVES if c != "reduce")
        raise ValueError(_(NO_MODEL).format(collective=collective, known=known))
    return models[key](size_bytes, n, alpha_s, bandwidth_bytes_per_s)


def _power_of_two_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def tree_allreduce_seconds(size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float) -> float:
    """Pipelined two-tree all-reduce (NCCL's double binary tree): 2 ceil(log2 n) alpha + 2 S/B seconds.

    Reduce up and broadcast down two complementary binary trees, each carrying half the buffer, pipelined in
    small chunks, so every rank sends and receives about S per phase at full bandwidth (Sanders, Speck &
    Träff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing
    35(12), sec. 3-4; NVIDIA's NCCL 2.4 blog adopts it for logarithmic latency). Idealised: the pipeline's
    fill time and chunking are not modelled. n = 1 costs 0 s.

    Raises:
        ValueError: n not a whole number >= 1, bandwidth <= 0.
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    if n == 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * alpha_s + 2 * size_bytes / bandwidth_bytes_per_s


def halving_doubling_allreduce_seconds(
    size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Rabenseifner's all-reduce (recursive-halving reduce-scatter + recursive-doubling all-gather), seconds.

    For n a power of two: 2 log2(n) alpha + 2 (n-1)/n S/B (Thakur, Rabenseifner & Gropp 2005, sec. 4.4; the
    local reduction's gamma term is left out). Otherwise the r = n - n' extra ranks (n' the power of two
    below n) first send their data to a partner and get the result back at the end: + 2 (alpha + S/B)
    (same section). Fewer latency steps than the ring (2 log2 n against 2(n-1)), the same bandwidth term.

    Raises:
        ValueError: n not a whole number >= 1, bandwidth <= 0.
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    if n == 1:
        return 0.0
    p = _power_of_two_below(n)
    core = 2 * math.log2(p) * alpha_s + 2 * (p - 1) / p * size_bytes / bandwidth_bytes_per_s
    return core + (0.0 if p == n else 2 * (alpha_s + size_bytes / bandwidth_bytes_per_s))


def hierarchical_allreduce_seconds(
    size_bytes: float,
    nodes: int,
    gpus_per_node: int,
    intra_alpha_s: float,
    intra_bandwidth_bytes_per_s: float,
    inter_alpha_s: float,
    inter_bandwidth_bytes_per_s: float,
) -> float:
    """Two-level all-reduce: reduce-scatter in the node, all-reduce of each 1/g shard across nodes, all-gather
    in the node, seconds (ring model at each level).

    ring_reduce_scatter(S, g, intra) + ring_allreduce(S/g, nodes, inter) + ring_all_gather(S, g, intra).
    Source: Cho et al. 2019, "BlueConnect: Decomposing All-Reduce for Deep Learning on Heterogeneous Network
    Hierarchy" (SysML 2019), and Horovod's hierarchical all-reduce (horovod PR #411: NCCL reduce-scatter, MPI
    all-reduce, NCCL all-gather); the same split FSDP HYBRID_SHARD makes. Each of the
    g GPUs of a node sends its shard over its own inter-node bandwidth (one NIC per GPU, as on DGX nodes).

    Raises:
        ValueError: nodes/gpus_per_node not whole numbers >= 1, a bandwidth <= 0.
    """
    _whole("nodes", nodes)
    _whole("gpus_per_node", gpus_per_node)
    inner = ring_reduce_scatter_seconds(size_bytes, gpus_per_node, intra_alpha_s, intra_bandwidth_bytes_per_s)
    outer = ring_allreduce_seconds(size_bytes / gpus_per_node, nodes, inter_alpha_s, inter_bandwidth_bytes_per_s)
    return 2 * inner + outer


def in_network_allreduce_seconds(size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float) -> float:
    """All-reduce reduced inside the switch (NVLink SHARP, NCCL's NVLS; InfiniBand SHARP, NCCL's CollNet),
    idealised: 2 alpha + S/B seconds.

    Each rank sends its S bytes to the switch once; the switch adds the n buffers as they arrive and sends
    the sum back, so each rank also receives S once (:func:`allreduce_bytes_sent_per_rank`). Over
    full-duplex links sending and receiving overlap: the bandwidth term is S/B, against the ring's
    2 (n-1)/n S/B, whose optimality (Patarasuk & Yuan 2009) holds only among algorithms in which the ranks
    exchange data point to point. One step up and one down: 2 alpha, whatever n. Sources: Graham et al.
    2016 (SHArP: aggregation trees of switches reduce the data in flight) and NVIDIA's SHARP documentation,
    "Introduction" (the data is no longer sent several times between endpoints); NCCL's algorithm names:
    NCCL documentation, "Environment Variables", NCCL_ALGO. Not modelled: the switch's reduction
    throughput, NCCL's per-algorithm efficiency, trees of several switches. n = 1 costs 0 s.

    Raises:
        ValueError: n not a whole number >= 1, bandwidth <= 0.
    """
    _whole(_(RANKS_N), n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    if n == 1:
        return 0.0
    return 2 * alpha_s + size_bytes / bandwidth_bytes_per_s


def allreduce_bytes_sent_per_rank(size_bytes: float, n: int, in_network: bool = False) -> float:
    """Bytes each rank sends in an all-reduce of an S-byte buffer (it receives as many).

    Ring (or any point-to-point algorithm at the bandwidth optimum): 2 (n-1)/n S (Patarasuk & Yuan 2009);
    reduced in the switch: S (:func:`in_network_allreduce_seconds`). n = 1 sends nothing.

    Raises:
        ValueError: n not a whole number >= 1.
    """
    _whole(_(RANKS_N), n)
    if n == 1:
        return 0.0
    return float(size_bytes) if in_network else 2 * (n - 1) / n * size_bytes


def all_to_all_seconds(size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float) -> float:
    """Pairwise-exchange all-to-all: (n-1) alpha + (n-1)/n S/B seconds, S each rank's whole send buffer
    (S/n to every other rank, one partner per step).

    Source: Thakur, Rabenseifner & Gropp 2005, sec. 4 (all-to-all, pairwise exchange for long messages);
    nccl-tests reports alltoall with the same (n-1)/n bus-bandwidth factor (``doc/PERFORMANCE.md``).

    Raises:
        ValueError: n not a whole number >= 1, bandwidth <= 0.
    """
    return ring_reduce_scatter_seconds(size_bytes, n, alpha_s, bandwidth_bytes_per_s)


def dp_bytes_per_step(params: float, sharding: str, n: int, grad_bytes: int = 2, param_bytes: int = 2) -> float:
    """Bytes each data-parallel rank sends per training step (ring algorithms), for the gradient and
    parameter collectives of DDP, ZeRO-1/2/3 and the FSDP strategies.

      DDP / NO_SHARD: all-reduce of the gradients (a ring's reduce-scatter + all-gather, both of gradients):
          2 (n-1)/n Psi grad_bytes (Li et al. 2020, sec. 3.2)
      ZeRO-1, ZeRO-2, SHARD_GRAD_OP, Megatron distopt: reduce-scatter of the gradients + all-gather of the
          updated parameters: (n-1)/n Psi (grad_bytes + param_bytes)
      ZeRO-3 / FULL_SHARD: all-gather of the parameters in the forward and again in the backward +
          reduce-scatter of the gradients: (n-1)/n Psi (2 param_bytes + grad_bytes)
    With 2-byte gradients and parameters that is ZeRO's 2 Psi and 3 Psi (Rajbhandari et al. 2019, sec. 7.2.1
    and 7.2.2; its "volume" leaves out the (n-1)/n of the ring). HYBRID_SHARD: :func:`hsdp_bytes_per_step`.

    Raises:
        ValueError: params < 0 or not finite, n not a whole number >= 1, an unknown sharding.
    """
    from pytest_distcheck.calc import precision

    if not (params >= 0 and math.isfinite(params)):
        raise refuse(FINITE_NON_NEGATIVE, "params", params)
    _whole(_(RANKS_N), n)
    if "HYBRID" in sharding.upper():
        raise ValueError(_(HYBRID_BYTES))
    key = precision.scheme(sharding)
    if key == "ddp":
        return 2 * (n - 1) / n * params * grad_bytes
    gathers = 2 if key == "zero3" else 1
    return (n - 1) / n * params * (grad_bytes + gathers * param_bytes)


def hsdp_bytes_per_step(params: float, gpus_per_node: int, nodes: int, grad_bytes: int = 2,
                        param_bytes: int = 2) -> tuple[float, float]:
    """(intra-node, inter-node) bytes each rank sends per step under FSDP HYBRID_SHARD.

    Inside the node FULL_SHARD's collectives over g ranks: (g-1)/g Psi (2 param_bytes + grad_bytes); across
    nodes an all-reduce of the rank's 1/g gradient shard over the nodes: 2 (N-1)/N Psi grad_bytes / g
    (torch ``fsdp/api.py`` HYBRID_SHARD; ring model as in :func:`dp_bytes_per_step`).

    Raises:
        ValueError: params < 0, gpus_per_node or nodes not whole numbers >= 1.
    """
    _whole("gpus_per_node", gpus_per_node)
    _whole("nodes", nodes)
    intra = dp_bytes_per_step(params, "zero3", gpus_per_node, grad_bytes, param_bytes)
    inter = 2 * (nodes - 1) / nodes * params * grad_bytes / gpus_per_node
    return intra, inter
