"""Which slice of a dense tensor a TP rank holds, by the plan; and which slice it holds instead.

Pure functions on tensors (no process group), so the fault diagnosis is unit-tested without ranks.
Slicing follows Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053, sec. 3): column-parallel splits
the output features (dim 0 of an ``nn.Linear`` weight ``[out, in]``, and its bias), row-parallel the
input features (dim 1); rank ``r`` of ``t`` holds chunk ``r`` (``torch.chunk``).
"""

from __future__ import annotations

import torch

from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.tp.plan import NOT_DIVISIBLE, Layer

FUSED_SIZES = N_("fused part sizes {sizes} add up to {total}, not to the {n} features")
FUSED_UNEVEN = N_("{n} features do not split into {fused} equal fused parts")
# What a rank's parameter holds instead of its slice (after "the rank").
HOLDS_WHOLE = N_("holds the whole dense tensor: it was never split")
HOLDS_OTHER_DIM = N_("holds its chunk of dim {held}, not of dim {want}")
HOLDS_OTHER_RANK = N_("holds rank {other}'s chunk of dim {want}")
HOLDS_FUSED = N_("holds its chunk of each of {held} fused parts (fused={held}), but the plan declares "
                 "fused={declared!r}")


def part_sizes(n: int, fused: int | tuple[int, ...]) -> list[int]:
    """Sizes of the fused parts of ``n`` features. Raises ValueError when they do not add up."""
    if isinstance(fused, tuple):
        if sum(fused) != n:
            raise ValueError(_(FUSED_SIZES).format(sizes=fused, total=sum(fused), n=n))
        return list(fused)
    if n % fused:
        raise ValueError(_(FUSED_UNEVEN).format(n=n, fused=fused))
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
            raise ValueError(_(NOT_DIVISIBLE).format(what=f"dim {dim}", length=p.shape[dim], t=size))
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


def shard_like(tp: torch.Tensor, dense: torch.Tensor, rank: int, size: int,
               fused: int | tuple[int, ...] = 1) -> torch.Tensor | None:
    """The dense activation as rank ``rank`` holds it, read from the shape of its own ``tp`` tensor.

    Whole when the shapes agree; else this rank's chunk of the one dim whose length is ``size`` times
    shorter, the last dim first (a column-parallel output, its ``fused`` parts split apiece), then the
    others (a sequence-parallel activation, Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2).
    None when the shape fits neither.
    """
    if tp.shape == dense.shape:
        return dense
    if tp.dim() != dense.dim():
        return None
    last = dense.dim() - 1
    for d in [last, *range(last)]:
        if tp.shape[d] * size != dense.shape[d] or any(tp.shape[e] != dense.shape[e] for e in range(dense.dim())
                                                          if e != d):
            continue
        try:
            return chunk(dense, d, rank, size, fused if d == last else 1)
        except ValueError:
            return None
    return None


def sequence_dim(tp: torch.Tensor | None, dense: torch.Tensor | None, rank: int, size: int, rtol: float,
                 atol: float) -> int | None:
    """The dim other than the last along which ``tp`` is rank ``rank``'s chunk of ``dense``, or None.

    That is how a rank holds an activation under sequence parallelism (split on the sequence dim).
    """
    if tp is None or dense is None or tp.dim() != dense.dim() or tp.shape == dense.shape:
        return None
    want = shard_like(tp, dense, rank, size)
    if want is None or not close(tp, want, rtol, atol):
        return None
    d = next(d for d in range(dense.dim()) if tp.shape[d] != dense.shape[d])
    return d if d != dense.dim() - 1 else None


def sliced_dim(grads: list[torch.Tensor | None], dense: torch.Tensor, rtol: float, atol: float) -> int | None:
    """The dim along which every rank's gradient is the dense one on its own chunk and zero elsewhere.

    That is the gradient of an input that was sliced (``x.chunk(t, d)[rank]``) with nothing all-gathering
    its gradient in backward. None when no dim fits.
    """
    size = len(grads)
    if size < 2 or any(g is None or g.shape != dense.shape for g in grads):
        return None
    for d in range(dense.dim()):
        if dense.shape[d] % size:
            continue
        ok = True
        for rank, g in enumerate(grads):
            for k, (part, want) in enumerate(zip(g.chunk(size, d), dense.chunk(size, d), strict=True)):
                if not close(part, want if k == rank else torch.zeros_like(want), rtol, atol):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return d
    return None


def close(a: torch.Tensor | None, b: torch.Tensor | None, rtol: float, atol: float) -> bool:
    """Same shape and ``torch.allclose`` (compared in float64)."""
    if a is None or b is None or a.shape != b.shape:
        return False
    return torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol)


def what_is_held(local: torch.Tensor, dense: torch.Tensor, layer: Layer | None, param: str, rank: int,
                 size: int, embedding: bool, rtol: float, atol: float) -> tuple[str, str] | None:
    """Which other slice of ``dense`` the rank's ``local`` parameter equals: ``(fault, explanation)``.

    Faults: ``wrong-shard-dim`` (split along the other dim), ``qkv-head-split`` or
    ``fused-contiguous-split`` (split without following the fused layout, or following one the plan
    does not declare: :func:`fused_fault`), ``not-sharded`` (the whole tensor), ``wrong-rank-shard``
    (another rank's chunk). None when nothing matches.
    """
    if close(local, dense, rtol, atol):
        return "not-sharded", _(HOLDS_WHOLE)
    dims = [d for d in range(dense.dim()) if dense.shape[d] % size == 0]
    want = split_dim(layer, param, embedding) if layer is not None else None
    for d in dims:
        if d == want:
            continue
        if close(local, chunk(dense, d, rank, size), rtol, atol):
            return "wrong-shard-dim", _(HOLDS_OTHER_DIM).format(held=d, want=want)
    if want is not None and layer is not None:
        n = dense.shape[want]
        declared = layer.fused
        alts = [f for f in (1, 2, 3) if f != declared and n % f == 0 and (n // f) % size == 0]
        for f in alts if not embedding else ():
            if close(local, chunk(dense, want, rank, size, f), rtol, atol):
                return fused_fault(declared if f == 1 else f), held_layout(f, declared, n, rank, size)
        for other in range(size):
            if other != rank and close(local, chunk(dense, want, other, size, layer.fused), rtol, atol):
                return "wrong-rank-shard", _(HOLDS_OTHER_RANK).format(other=other, want=want)
    return None


def fused_fault(fused: int | tuple[int, ...]) -> str:
    """The fault of a fused column weight split against its layout: ``qkv-head-split`` for three parts
    (``[q | k | v]``), ``fused-contiguous-split`` for any other number (``[gate | up]``)."""
    parts = len(fused) if isinstance(fused, tuple) else fused
    return "qkv-head-split" if parts == 3 else "fused-contiguous-split"


def held_layout(held: int, declared: int | tuple[int, ...], n: int, rank: int, size: int) -> str:
    """What a rank's fused column weight holds, said against what the plan declares."""
    if held != 1:
        return _(HOLDS_FUSED).format(held=held, declared=declared)
    sizes = part_sizes(n, declared)
    lo, hi = rank * n // size, (rank + 1) * n // size
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    covered = [i + 1 for i in range(len(sizes)) if bounds[i] < hi and bounds[i + 1] > lo]
    said = ngettext("holds rows {lo}..{hi} of {n}, a contiguous chunk covering part {parts} of the {k} fused parts "
                    "only, but the plan declares fused={declared!r}: every rank needs its chunk of every part",
                    "holds rows {lo}..{hi} of {n}, a contiguous chunk covering parts {parts} of the {k} fused parts "
                    "only, but the plan declares fused={declared!r}: every rank needs its chunk of every part",
                    len(covered))
    return said.format(lo=lo, hi=hi - 1, n=n, parts=", ".join(map(str, covered)), k=len(sizes), declared=declared)
