"""The communication of tensor parallelism: Megatron-LM's conjugate operators f and g.

Shoeybi et al. 2019, "Megatron-LM" (arXiv:1909.08053), sec. 3, Fig. 3:

- ``f`` (:func:`copy_to_tp`): identity in forward, all-reduce of the gradient in backward. It sits
  before a column-parallel layer: every rank sees the whole input, but each rank's backward only
  computes the part of dL/dx that flows through its own columns, so the parts are summed.
- ``g`` (:func:`reduce_from_tp`): all-reduce in forward, identity in backward. It sits after a
  row-parallel layer: each rank holds a partial sum of the output; the gradient of a sum is already
  whole on every rank.

So one transformer block does two all-reduces in forward (after attention's output projection and
after the MLP's down projection) and two in backward (Megatron-LM sec. 3, Fig. 4).

The maths of the layers is in ``layers.py``; this file holds only what crosses ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


class AllReduceTimer:
    """Adds up the time spent in the forward all-reduces of one TP group.

    On CUDA it records a pair of CUDA events around each all-reduce on the current stream (no
    synchronisation during the run; :meth:`total_s` synchronises once); on CPU the gloo all-reduce
    is synchronous, so a wall clock around it is its time. Either way the figure includes waiting
    for the slowest rank to arrive, which is what an all-reduce costs the caller.

    Attributes:
        calls: number of all-reduces timed since :meth:`reset`.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.calls = 0
        self._cpu_s = 0.0
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._t0 = 0.0

    def reset(self) -> None:
        self.calls, self._cpu_s, self._events = 0, 0.0, []

    def start(self) -> None:
        self.calls += 1
        if self.device.type == "cuda":
            ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            ev[0].record()
            self._events.append(ev)
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.device.type == "cuda":
            self._events[-1][1].record()
        else:
            self._cpu_s += time.perf_counter() - self._t0

    def total_s(self) -> float:
        """Seconds spent in all-reduce since :meth:`reset` (synchronises the device on CUDA)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return sum(a.elapsed_time(b) for a, b in self._events) / 1e3  # elapsed_time is in ms
        return self._cpu_s


@dataclass
class TPGroup:
    """The ranks that share one tensor-parallel model, and what the layers need to know of them.

    Attributes:
        group: the ``torch.distributed`` process group of the TP ranks (``None``: the default group).
        rank: this process's rank within ``group`` (0 .. size-1); picks its shard of each weight.
        size: the TP degree (number of ranks in ``group``).
        timer: when set, every forward all-reduce is timed by it.
    """

    group: dist.ProcessGroup | None
    rank: int
    size: int
    timer: AllReduceTimer | None = field(default=None, repr=False)

    @classmethod
    def from_group(cls, group: dist.ProcessGroup | None = None) -> TPGroup:
        """The TP group made of ``group`` (default: the whole world, as under ``torchrun``)."""
        return cls(group, dist.get_rank(group), dist.get_world_size(group))

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum ``x`` over the group, in place; a no-op at TP degree 1 (as Megatron-LM's mappings)."""
        if self.size == 1:
            return x
        if self.timer is not None:
            self.timer.start()
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=self.group)
        if self.timer is not None:
            self.timer.stop()
        return x


class _CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
        ctx.tp = tp
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.tp.all_reduce(grad.contiguous()), None


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
        # Summed in place, as Megatron-LM does, to spare a copy; mark_dirty tells autograd so.
        ctx.mark_dirty(x)
        return tp.all_reduce(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def copy_to_tp(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Megatron-LM's f before a column-parallel layer. ``x``: any shape, replicated on the group."""
    return _CopyToTP.apply(x, tp)


def reduce_from_tp(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Megatron-LM's g after a row-parallel layer.

    ``x``: a partial sum on each rank, any shape, contiguous, and fresh (a layer's output that
    nothing else holds): it is summed in place and returned.
    """
    return _ReduceFromTP.apply(x, tp)
