"""Column- and row-parallel linear layers (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053, sec. 3).

A linear layer ``Y = X A^T + b`` with weight ``A`` of shape ``[out_features, in_features]`` (PyTorch's
layout) is split over the ``t`` ranks of a TP group in one of two ways:

- column-parallel: ``A`` split along ``out_features`` (Megatron's ``A = [A_1, A_2]`` of eq. 3, split
  by columns in its ``X A`` notation). Each rank computes ``Y_i = X A_i^T + b_i``, a slice of the
  output's last dim. Input replicated, output sharded; no communication in forward.
- row-parallel: ``A`` split along ``in_features`` (Megatron's ``B`` split by rows, eq. 4). Each rank
  multiplies its slice of the input by its slice of ``A`` and gets a partial sum of the whole output;
  one all-reduce makes it whole, then the bias is added once.

The all-reduces are Megatron's f and g (``comm.py``). Weights are cut from a dense layer with
``from_dense``, so a TP model holds exactly the numbers of the dense one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from experiments.tp_inference.comm import TPGroup, copy_to_tp, reduce_from_tp


def _split(n: int, tp: TPGroup, what: str) -> slice:
    """The slice of ``n`` features rank ``tp.rank`` holds; ``n`` must divide evenly."""
    if n % tp.size:
        raise ValueError(f"{what} = {n} is not divisible by the TP degree {tp.size}")
    part = n // tp.size
    return slice(tp.rank * part, (tp.rank + 1) * part)


class ColumnParallelLinear(nn.Module):
    """A linear layer whose weight is split along ``out_features`` over a TP group.

    Shapes: input ``[..., in_features]`` replicated on every rank; output
    ``[..., out_features / t]``, this rank's slice of the last dim. Weight ``[out_features / t,
    in_features]``, bias ``[out_features / t]``.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, tp: TPGroup) -> None:
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    @classmethod
    def from_dense(cls, dense: nn.Linear, tp: TPGroup) -> ColumnParallelLinear:
        """This rank's columns of ``dense`` (copied). Raises ValueError if ``out_features % t``."""
        cols = _split(dense.out_features, tp, "out_features")
        bias = dense.bias.detach()[cols].clone() if dense.bias is not None else None
        return cls(dense.weight.detach()[cols].clone(), bias, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(copy_to_tp(x, self.tp), self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.weight.shape[1]}, out_features_per_rank={self.weight.shape[0]}, tp={self.tp.size}"


class RowParallelLinear(nn.Module):
    """A linear layer whose weight is split along ``in_features`` over a TP group.

    Shapes: input ``[..., in_features / t]``, this rank's slice (the output of a column-parallel
    layer); output ``[..., out_features]``, whole and equal on every rank after one all-reduce.
    Weight ``[out_features, in_features / t]``, bias ``[out_features]`` (replicated, added once after
    the all-reduce, as in Megatron-LM's RowParallelLinear).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, tp: TPGroup) -> None:
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    @classmethod
    def from_dense(cls, dense: nn.Linear, tp: TPGroup) -> RowParallelLinear:
        """This rank's rows (input features) of ``dense`` (copied). Raises ValueError if ``in_features % t``."""
        rows = _split(dense.in_features, tp, "in_features")
        bias = dense.bias.detach().clone() if dense.bias is not None else None
        return cls(dense.weight.detach()[:, rows].clone(), bias, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = reduce_from_tp(F.linear(x, self.weight), self.tp)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"in_features_per_rank={self.weight.shape[1]}, out_features={self.weight.shape[0]}, tp={self.tp.size}"


PARALLEL_LINEARS: dict[str, type[nn.Module]] = {"colwise": ColumnParallelLinear, "rowwise": RowParallelLinear}
"""The layer class for each style name of ``pytest_distcheck.tp.plan``."""
