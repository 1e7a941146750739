"""Which collectives a TP module issues in forward and in backward, counted; and how many the plan implies.

Counting uses torch's ``CommDebugMode`` (c10d collectives since torch 2.4, PR #125475, and functional
ones); a collective is in ``backward`` when autograd's engine runs it (``torch._C._current_graph_task_id()``
is not -1). Expected counts (Shoeybi et al. 2019, sec. 3, Fig. 3-4): a row-parallel layer's g does one
all-reduce in forward; a column-parallel layer's f one in backward only if autograd needs dL/dx of its
input. So a transformer block in training does 2 and 2; a bare MLP fed a plain tensor 1 and 0
(docs/design/tp-checker.md).
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import torch
from torch import nn

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.tp.plan import Layer, parse_plan

try:
    from torch.distributed.tensor.debug import CommDebugMode
except ImportError:  # torch < 2.5 kept it under the private package
    from torch.distributed._tensor.debug import CommDebugMode  # type: ignore[no-redef]

# Op name (the packet's last part, c10d's and the functional collectives') -> field-standard kind.
KINDS: dict[str, str] = {
    "allreduce_": "all-reduce", "allreduce_coalesced_": "all-reduce", "all_reduce": "all-reduce",
    "all_reduce_coalesced": "all-reduce",
    "allgather_": "all-gather", "_allgather_base_": "all-gather", "allgather_coalesced_": "all-gather",
    "allgather_into_tensor_coalesced_": "all-gather", "all_gather_into_tensor": "all-gather",
    "all_gather_into_tensor_coalesced": "all-gather",
    "reduce_scatter_": "reduce-scatter", "_reduce_scatter_base_": "reduce-scatter",
    "reduce_scatter_tensor": "reduce-scatter", "reduce_scatter_tensor_coalesced": "reduce-scatter",
    "reduce_scatter_tensor_coalesced_": "reduce-scatter",
    "broadcast_": "broadcast", "broadcast": "broadcast",
    "alltoall_": "all-to-all", "alltoall_base_": "all-to-all", "all_to_all_single": "all-to-all",
    "shard_dim_alltoall": "all-to-all",
    "gather_": "gather", "scatter_": "scatter", "reduce_": "reduce",
}


COUNTS = N_("forward: {forward}; backward: {backward}")
NONE = N_("none")  # a phase with no collective
DIFFER = N_("collectives differ from the expected ones: expected {want}; found {found}")
NEEDS_GRAD = N_("  {path} (colwise): its input requires grad, so its f all-reduces dL/dx in backward")
NEEDS_NO_GRAD = N_("  {path} (colwise): its input does not require grad, so its f does no all-reduce in backward")
NO_EXPECTATION = N_("give the expected counts (forward=, backward=) or a plan to derive them from")


def kind_of(op: Any) -> str:
    """The field-standard kind (``all-reduce``, ``all-gather``...) of a collective op or its name."""
    name = str(getattr(op, "_qualified_op_name", op)).split("::")[-1].split(".")[-1]
    return KINDS.get(name, name)


@dataclass
class CollectiveCounts:
    """Collectives seen, per kind (``all-reduce``, ``all-gather``, ``reduce-scatter``, ``broadcast``,
    ``all-to-all``...), split into ``forward`` (outside autograd's engine) and ``backward``."""

    forward: Counter = field(default_factory=Counter)
    backward: Counter = field(default_factory=Counter)

    @property
    def total(self) -> Counter:
        return self.forward + self.backward

    def __str__(self) -> str:
        def fmt(c: Counter) -> str:
            return ", ".join(f"{n} {k}" for k, n in sorted(c.items())) or _(NONE)
        return _(COUNTS).format(forward=fmt(self.forward), backward=fmt(self.backward))


class _Counting(CommDebugMode):
    def __init__(self, counts: CollectiveCounts) -> None:
        super().__init__()
        self._counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = self.get_total_counts()
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.get_total_counts() != before:
            phase = self._counts.backward if torch._C._current_graph_task_id() != -1 else self._counts.forward
            phase[kind_of(func._overloadpacket)] += 1
        return out


@contextlib.contextmanager
def count_collectives() -> Iterator[CollectiveCounts]:
    """Count the collectives issued inside the block (this rank's), by kind and phase.

    Example::

        with count_collectives() as counts:
            model(x).sum().backward()
        assert counts.forward["all-reduce"] == 2

    Collectives run by autograd during ``backward()`` count as ``backward``; everything else as
    ``forward``. The counts are this rank's (every rank of a TP group issues the same ones).
    """
    counts = CollectiveCounts()
    with warnings.catch_warnings():
        # CommDebugMode's module tracker hooks every module's backward; torch warns about that hook when a
        # module's inputs need no grad. Noise from the counter, not from the code under test.
        warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
        with _Counting(counts):
            yield counts


def expected_collectives(plan: Mapping[str, Union[str, Layer]], input_needs_grad: Union[bool, Mapping[str, bool]],
                         backward: bool = True) -> CollectiveCounts:
    """The all-reduces a module sharded by ``plan`` issues, Megatron-style (one f or g per layer).

    Args:
        plan: module path -> style (``colwise``, ``rowwise``, ``replicated`` or a ``Layer``).
        input_needs_grad: whether autograd needs dL/dx at the input of each column-parallel layer
            (True/False for all, or path -> bool): its input requires grad.
        backward: whether a backward pass is run.

    Returns:
        forward: one all-reduce per row-parallel layer (g); backward: one per column-parallel layer
        (f) whose input needs a gradient.
    """
    counts = CollectiveCounts()
    for path, layer in parse_plan(plan).items():
        if layer.style == "rowwise":
            counts.forward["all-reduce"] += 1
        needs = input_needs_grad if isinstance(input_needs_grad, bool) else input_needs_grad.get(path, False)
        if backward and layer.style == "colwise" and needs:
            counts.backward["all-reduce"] += 1
    return counts


def _colwise_inputs_need_grad(model: nn.Module, plan: Mapping[str, Layer]) -> tuple[dict[str, bool], list]:
    needs: dict[str, bool] = {}
    handles = []
    for path, layer in plan.items():
        if layer.style != "colwise":
            continue

        def hook(_mod, args, path=path):
            x = next((a for a in args if isinstance(a, torch.Tensor)), None)
            needs[path] = needs.get(path, False) or bool(x is not None and x.requires_grad)
        handles.append(model.get_submodule(path).register_forward_pre_hook(hook, prepend=True))
    return needs, handles


def assert_collectives(
    model: nn.Module,
    inputs: Union[torch.Tensor, Sequence[Any]],
    *,
    plan: Mapping[str, Union[str, Layer]] | None = None,
    forward: Mapping[str, int] | None = None,
    backward: Mapping[str, int] | None = None,
    loss: Callable[[torch.Tensor], torch.Tensor] = lambda out: out.sum(),
) -> CollectiveCounts:
    """Run ``model`` forward and backward once and check the collectives of each phase; call on every rank.

    The expected counts are given (``forward``/``backward``: kind -> count, every kind not named is
    expected 0) or derived from ``plan`` (:func:`expected_collectives`, with each column-parallel
    layer's requires-grad condition read from the input it really received). ``backward=None``
    without a plan skips the backward pass.

    Raises:
        AssertionError: counts differ; the message gives both, per phase, with the requires-grad
            condition of every column-parallel layer when the plan was used.
        ValueError: neither ``plan`` nor ``forward`` given.
    """
    __tracebackhide__ = True
    if plan is None and forward is None:
        raise ValueError(_(NO_EXPECTATION))
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    parsed = parse_plan(plan) if plan is not None else {}
    needs, handles = _colwise_inputs_need_grad(model, parsed)
    run_backward = plan is not None or backward is not None
    try:
        with count_collectives() as counts:
            out = model(*args)
            if run_backward:
                loss(out).backward()
    finally:
        for h in handles:
            h.remove()
    if plan is not None:
        want = expected_collectives(parsed, needs, run_backward)
        if forward is not None:
            want.forward = Counter(forward)
        if backward is not None:
            want.backward = Counter(backward)
    else:
        want = CollectiveCounts(Counter(forward or {}), Counter(backward or {}))
    got_f, got_b = +counts.forward, +counts.backward
    if got_f != +want.forward or got_b != +want.backward:
        lines = [_(DIFFER).format(want=want, found=counts)]
        for path, need in needs.items():
            lines.append(_(NEEDS_GRAD if need else NEEDS_NO_GRAD).format(path=path))
        raise AssertionError("\n".join(lines))
    return counts
