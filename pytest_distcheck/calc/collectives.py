"""Collective communication: nccl-tests algbw/busbw and alpha-beta time models. Pure Python, no torch.

Conventions (all functions):
    size_bytes: the buffer size S in bytes as nccl-tests reports it -- for all-reduce, broadcast and
        reduce the buffer each rank holds; for all-gather and reduce-scatter the *full* (gathered)
        buffer, i.e. count_per_rank * sizeof(dtype) * n (nccl-tests ``doc/PERFORMANCE.md``).
    n: number of ranks in the process group (world size of the collective), >= 1.
    alpha_s: per-message latency alpha in seconds.
    bandwidth_bytes_per_s: per-rank link bandwidth B in bytes/second (beta = 1/B).
    GB = 1e9 bytes, as in nccl-tests ``src/*.cu`` ``GetBw()`` (divides by 1.0E9).

Sources:
    nccl-tests, ``doc/PERFORMANCE.md`` (NVIDIA/nccl-tests): algbw = S / t; busbw = algbw * factor.
    Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations":
        ring all-reduce 2(n-1) alpha + 2 (n-1)/n S/B.
    Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in
        MPICH", IJHPCA 19(1), sec. 4: ring reduce-scatter / all-gather (n-1) alpha + (n-1)/n S/B;
        binomial-tree broadcast ceil(lg n)(alpha + S/B).
    NVIDIA "Massively scale your deep learning training with NCCL 2.4" (2019): double binary trees
        give a latency term logarithmic in n (2 log2(n) alpha for all-reduce) instead of the ring's 2(n-1).
"""

from __future__ import annotations

import math

from pytest_distcheck.calc._checks import positive as _positive
from pytest_distcheck.calc._checks import whole as _whole

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


def _key(collective: str) -> str:
    key = collective.lower().replace("_", "").replace("-", "").replace(" ", "")
    if key not in _FACTORS:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    return key


def busbw_factor(collective: str, n: int) -> float:
    """The nccl-tests bus-bandwidth factor: busbw = algbw * factor (dimensionless).

    all_reduce 2(n-1)/n; reduce_scatter, all_gather, alltoall (n-1)/n; broadcast, reduce 1.
    Source: nccl-tests ``doc/PERFORMANCE.md``, "Bus bandwidth". Names are matched ignoring case,
    ``_`` and ``-`` (``"all_reduce"``, ``"allreduce"``, ``"all-reduce"``).

    Raises:
        ValueError: unknown collective, or n not a whole number >= 1.
    """
    _whole("number of ranks n", n)
    return float(_FACTORS[_key(collective)](n))


def algbw_gbps(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (GB = 1e9 bytes): S / t (nccl-tests ``doc/PERFORMANCE.md``).

    Raises:
        ValueError: size_bytes < 0 or seconds <= 0.
    """
    if size_bytes < 0:
        raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
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
    _whole("number of ranks n", n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_bytes_per_s


def ring_reduce_scatter_seconds(
    size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Ring reduce-scatter time: (n-1) alpha + (n-1)/n * S/B seconds, S the full (unscattered) buffer.

    Source: Thakur, Rabenseifner & Gropp 2005, sec. 4 (ring algorithm).
    """
    _whole("number of ranks n", n)
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
    _whole("number of ranks n", n)
    _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return math.ceil(math.log2(n)) * (alpha_s + size_bytes / bandwidth_bytes_per_s)


def ring_allreduce_latency_seconds(n: int, alpha_s: float) -> float:
    """The latency (alpha) term of ring all-reduce: 2(n-1) alpha seconds (Patarasuk & Yuan 2009)."""
    _whole("number of ranks n", n)
    return 2 * (n - 1) * alpha_s


def tree_allreduce_latency_seconds(n: int, alpha_s: float) -> float:
    """The latency term of a tree all-reduce (reduce up, broadcast down): 2 log2(n) alpha seconds.

    Source: NVIDIA, "Massively scale your deep learning training with NCCL 2.4" (2019): double binary
    trees have logarithmic latency. The tree's bandwidth term depends on the implementation and is not
    modelled here.
    """
    _whole("number of ranks n", n)
    return 2 * math.log2(n) * alpha_s


def collective_seconds(
    collective: str, size_bytes: float, n: int, alpha_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Alpha-beta time of a collective: ring all_reduce/reduce_scatter/all_gather, binomial broadcast.

    Raises:
        ValueError: a collective without a model here (alltoall, reduce) or an unknown name.
    """
    key = _key(collective)
    models = {
        "allreduce": ring_allreduce_seconds,
        "reducescatter": ring_reduce_scatter_seconds,
        "allgather": ring_all_gather_seconds,
        "broadcast": binomial_broadcast_seconds,
    }
    if key not in models:
        raise ValueError(f"no alpha-beta model for {collective!r}; have: all_reduce, reduce_scatter, "
                         "all_gather, broadcast")
    return models[key](size_bytes, n, alpha_s, bandwidth_bytes_per_s)
