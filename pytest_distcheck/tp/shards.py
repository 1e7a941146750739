"""Which slice of a dense tensor a TP rank holds, by the plan; and which slice it holds instead.

Pure functions on tensors (no process group), so the fault diagnosis is unit-tested without ranks.
Slicing follows Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053, sec. 3): column-parallel splits
the output features (dim 0 of an ``nn.Linear`` weight ``[out, in]``, and its bias), row-parallel the
input features (dim 1); rank ``r`` of ``t`` holds chunk ``r`` (``torch.chunk``).
"""

from __future__ import annotations

import torch

from pytest_distcheck.tp.plan import Layer


def part_sizes(n: int, fused: int | tuple[int, ...]) -> list[int]:
    """Sizes of the fused parts of ``n`` features. Raises ValueError when they do not add up."""
    if isinstance(fused, tuple):
        if sum(fused) != n:
            raise ValueError(f"fused part sizes {fused} add up to {sum(fused)}, not to the {n} features")
        return list(fused)
    if n % fused:
        raise ValueError(f"{n} features do not split into {fused} equal fused parts")
    return [n // fused] * fused


def chunk(t: torch.Tensor, dim: int, rank: int, size: int, fused: int | tuple[int, ...] = 1) -> torch.Tensor:
    """Rank ``rank``'s chunk of ``t`` along ``dim``: of each fused part, its chunk, concatenated.

    Raises:
        ValueError: a part's length is not divisible by ``size`` (TP needs even shards).
    """
    parts = t.split(part_sizes(t.shape[dim], fused), dim=dim)
    out = []
    for p in parts:
        if p.shape[dim] % size:
            raise ValueError(f"dim {dim} of length {p.shape[dim]} is not divisible by the TP degree {size}")
        out.append(p.chunk(size, dim=dim)[rank])
    return torch.cat(out, dim=dim) if len(out) > 1 else out[0]


def split_dim(layer: Layer, param: str, embedding: bool) -> int | None:
    """The dim of parameter ``param`` (``weight``/``bias``) that ``layer`` splits, or None (whole)."""
    if layer.style == "replicated" or (param == "bias" and layer.style == "rowwise"):
        return None
    if param == "bias":
        return 0
    if embedding:  # [num_embeddings, embedding_dim]: torch's ColwiseParallel splits the embedding dim
        return 1 if layer.style == "colwise" else 0
    return 0 if layer.style == "colwise" else 1


def expected_shard(dense: torch.Tensor, layer: Layer | None, param: str, rank: int, size: int,
                   embedding: bool = False) -> torch.Tensor:
    """The slice of the dense parameter (or its gradient) that TP rank ``rank`` of ``size`` holds.

    ``layer`` None: the parameter is not in a planned layer (a LayerNorm, say), so it is whole.
    """
    dim = split_dim(layer, param, embedding) if layer is not None else None
    if dim is None or dense.dim() <= dim:
        return dense
    return chunk(dense, dim, rank, size, layer.fused if dim == 0 and not embedding else 1)


def close(a: torch.Tensor | None, b: torch.Tensor | None, rtol: float, atol: float) -> bool:
    """Same shape and ``torch.allclose`` (compared in float64)."""
    if a is None or b is None or a.shape != b.shape:
        return False
    return torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol)


def what_is_held(local: torch.Tensor, dense: torch.Tensor, layer: Layer | None, param: str, rank: int,
                 size: int, embedding: bool, rtol: float, atol: float) -> tuple[str, str] | None:
    """Which other slice of ``dense`` the rank's ``local`` parameter equals: ``(fault, explanation)``.

    Faults: ``wrong-shard-dim`` (split along the other dim), ``qkv-head-split`` (split without
    following the fused layout, or following one the plan does not declare), ``not-sharded`` (the
    whole tensor), ``wrong-rank-shard`` (another rank's chunk). None when nothing matches.
    """
    if close(local, dense, rtol, atol):
        return "not-sharded", "holds the whole dense tensor: it was never split"
    dims = [d for d in range(dense.dim()) if dense.shape[d] % size == 0]
    want = split_dim(layer, param, embedding) if layer is not None else None
    for d in dims:
        if d == want:
            continue
        if close(local, chunk(dense, d, rank, size), rtol, atol):
            return "wrong-shard-dim", f"holds its chunk of dim {d}, not of dim {want}"
    if want is not None and layer is not None:
        n = dense.shape[want]
        fused_alts = [f for f in (1, 3) if f != layer.fused and n % f == 0 and (n // f) % size == 0]
        for f in fused_alts:
            if close(local, chunk(dense, want, rank, size, f), rtol, atol):
                held = "contiguous rows of the fused output (fused=1)" if f == 1 else f"the fused layout fused={f}"
                return "qkv-head-split", (f"holds {held}, but the plan declares fused={layer.fused!r}: "
                                          "its heads' q, k and v rows are not the ones the dense layout puts together")
        for other in range(size):
            if other != rank and close(local, chunk(dense, want, other, size, layer.fused), rtol, atol):
                return "wrong-rank-shard", f"holds rank {other}'s chunk of dim {want}"
    return None
