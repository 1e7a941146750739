"""Is a tensor meant to be replicated really the same on every rank of a process group?

An input that differs across the ranks of a TP group silently breaks tensor parallelism: each rank
computes its shard of a different problem and the all-reduce adds up pieces that do not belong
together (measured in the issue this answers: a DTensor column-then-row MLP fed an unseeded input
per rank was off by about 0.17, with no error).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from pytest_distcheck.i18n import N_, _

SHAPE_DIFFERS = N_("{name} differs across ranks: rank 0 has shape {shape} {dtype}, rank {rank} has {other_shape} "
                   "{other_dtype}")
VALUES_DIFFER = N_("{name} differs across ranks: rank {rank} vs rank 0, max abs diff {diff:.3g} at index {where} ({n} "
                   "of {total} elements differ)")
TENSOR = N_("tensor")  # what the messages call a tensor given no name
MUST_BE_REPLICATED = N_("{error}; a tensor meant to be replicated must be the same on every rank (seed every rank's "
                        "generator identically, or dist.broadcast it from rank 0)")


def gather_objects(obj: Any, group: dist.ProcessGroup | None = None) -> list[Any]:
    """``obj`` of every rank of ``group``, in group-rank order (``all_gather_object``; a collective).

    Tensors should be on the CPU and small: everything is pickled.
    """
    out: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def local_cpu(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t`` (``to_local()`` of a DTensor), detached, on the CPU."""
    if hasattr(t, "to_local") and hasattr(t, "placements"):
        t = t.to_local()
    return t.detach().cpu()


def replication_error(tensors: list[torch.Tensor], name: str | None = None) -> str | None:
    """What differs between the ranks' copies of a tensor (rank order), or None when all are equal.

    ``name``: what the message calls the tensor (default :data:`TENSOR`, in the language in use).
    Equality is exact (``torch.equal``): a replicated tensor is a copy, not an approximation.
    """
    name = _(TENSOR) if name is None else name
    ref = tensors[0]
    for rank, t in enumerate(tensors[1:], start=1):
        if t.shape != ref.shape or t.dtype != ref.dtype:
            return _(SHAPE_DIFFERS).format(name=name, shape=tuple(ref.shape), dtype=ref.dtype, rank=rank,
                                        other_shape=tuple(t.shape), other_dtype=t.dtype)
        if not torch.equal(t, ref):
            diff = (t.double() - ref.double()).abs() if t.is_floating_point() else (t != ref).double()
            where = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
            return _(VALUES_DIFFER).format(name=name, rank=rank, diff=diff.max().item(), where=where,
                                        n=int((diff > 0).sum()), total=diff.numel())
    return None


def assert_replicated(tensor: torch.Tensor, group: dist.ProcessGroup | None = None, name: str | None = None) -> None:
    """Fail unless ``tensor`` is bit-identical on every rank of ``group`` (a collective: call on all).

    Args:
        tensor: any shape and dtype; a DTensor is compared through ``to_local()`` (for a replicated
            DTensor, the whole tensor).
        group: the process group (default: the whole world).
        name: what the message calls the tensor (default: "tensor", in the language in use).

    Raises:
        AssertionError: on every rank, naming the first rank whose copy differs from rank 0's, the
            max abs difference and where, or the shapes/dtypes when those differ. Fix: seed every
            rank's generator identically, or ``dist.broadcast`` the tensor from rank 0.
    """
    __tracebackhide__ = True
    err = replication_error(gather_objects(local_cpu(tensor), group), name)
    if err is not None:
        raise AssertionError(_(MUST_BE_REPLICATED).format(error=err))
