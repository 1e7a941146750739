"""Every fault of the zoo (fixtures/tp_faults/zoo.py) is named by assert_tp_matches_dense; correct layers pass.
The kit's messages are compared in the language in use (lab 02 has the learner run this file, Spanish included)."""

from __future__ import annotations

import re
import string

import pytest

from fixtures.tp_faults.zoo import CORRECT, ZOO
from pytest_distcheck.i18n import _
from pytest_distcheck.tp.diagnose import (
    FAULTS,
    FUSED_BEFORE,
    HELD,
    INPUT_I,
    NEEDS_WHOLE_INPUT,
    SLICED,
    THE_INPUT_OF,
    VOCAB_LOCAL,
)
from pytest_distcheck.tp.plan import EVEN_SHARDS, NOT_DIVISIBLE
from pytest_distcheck.tp.replicated import VALUES_DIFFER
from pytest_distcheck.tp.shards import held_layout


def _said(template: str, **fields) -> str:
    """A regex of kit message ``template`` in the language in use: each field of ``fields`` as given (a compiled
    pattern as its pattern), any other (a measured difference, an index) as any text."""
    out = ""
    for literal, name, spec, _conversion in string.Formatter().parse(_(template)):
        out += re.escape(literal)
        if name is not None:
            value = fields.get(name)
            out += (".+?" if value is None else value.pattern if isinstance(value, re.Pattern)
                    else re.escape(format(value, spec)))
    return out


def _check(name: str, correct: bool) -> str:
    import torch.distributed as dist

    from fixtures.tp_faults.zoo import CORRECT, ZOO
    from pytest_distcheck.tp import assert_tp_matches_dense

    entry = (CORRECT if correct else ZOO)[name]
    try:
        assert_tp_matches_dense(entry.dense(), entry.tp, entry.plan, entry.inputs(dist.get_rank()),
                                after_backward=entry.after_backward)
    except AssertionError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("name", sorted(ZOO))
def test_each_fault_is_named_alone(dist_world, name):
    fault = ZOO[name].fault
    message, other = dist_world.run(_check, name, False)
    print(message)  # lab 02 sends the learner to `-rP`, which shows it: what the check said about this fault
    headline = message.splitlines()[0] if message else ""
    assert headline.endswith(f"): {fault}"), message  # its own name, and no other
    assert f"  {fault}: {_(FAULTS[fault])}" in message  # what it means, the fix and its source
    assert fault in other  # the other rank fails too, pointing at rank 0


def test_an_activation_that_differs_across_ranks_is_named_at_its_layer(dist_world):
    message, _other = dist_world.run(_check, "non-replicated-activation", False)
    differs = re.compile(_said(VALUES_DIFFER, name=_(THE_INPUT_OF).format(path="up"), rank=1))
    assert re.search(re.escape("- non-replicated-input [up]: ") + _said(NEEDS_WHOLE_INPUT, error=differs,
                                                                         style="colwise"), message), message


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_layers_pass(dist_world, name):
    # Among them: f applied by the parent module before the column-parallel layer, and a whole
    # sequence-parallel sublayer (all-gather before the column-parallel layer, reduce-scatter after the
    # row-parallel one, LayerNorm and row-parallel bias gradients summed after backward).
    assert dist_world.run(_check, name, True) == ["", ""]


def test_sequence_parallel_gradients_left_partial_are_named_for_each_parameter(dist_world):
    message, _other = dist_world.run(_check, "sequence-parallel-grad", False)
    for name in ("ln.weight", "ln.bias", "down.bias"):  # each ran on this rank's tokens only
        assert f"- sequence-parallel-grad [{name}]: " in message
    assert "missing-f" not in message and "up." not in message  # the column-parallel layer is right


def test_a_fused_gate_up_split_contiguously_is_named_whether_the_plan_declares_it_or_not(dist_world):
    declared, _other = dist_world.run(_check, "fused-contiguous-split-declared", False)
    plain, _other = dist_world.run(_check, "fused-contiguous-split", False)
    held = _(HELD).format(style="colwise", held=held_layout(1, 2, 32, 0, 2))  # rows 0..15 of 32: gate only
    assert f"- fused-contiguous-split [gate_up.weight, rank 0]: {held}" in declared
    chunk = _(FUSED_BEFORE).format(path="gate_up", reader=_(THE_INPUT_OF).format(path="down"), n=32, width=16,
                                   parts=2, size=16)
    assert f"- fused-contiguous-split [gate_up]: {chunk}" in plain
    assert "Layer('colwise', fused=2)" in plain
    assert "qkv" not in declared + plain  # not worded as a QKV head split


def test_a_softmax_or_argmax_on_each_vocab_slice_alone_is_named(dist_world):
    for name, kind in (("vocab-local-softmax", "softmax"), ("vocab-local-argmax", "argmax")):
        message, _other = dist_world.run(_check, name, False)
        local = _(VOCAB_LOCAL).format(kind=kind, width=6, path="head", total=12)
        assert f"- vocab-local-softmax [head]: {local}" in message


def _hand_written_mlp_without_g() -> str:
    """A learner's MLP (lab 02, exercise 1b): the row-parallel layer as functional linear plus its bias on every
    rank, and no all-reduce between them (its `down` module holds the weights but never runs)."""
    import torch
    import torch.distributed as dist
    from torch import nn

    from pytest_distcheck.tp import assert_tp_matches_dense

    class Dense(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

        def forward(self, x):
            return self.down(nn.functional.gelu(self.up(x)))

    class Tp(nn.Module):
        def __init__(self, dense):
            super().__init__()
            r, n = dist.get_rank(), 16 // dist.get_world_size()
            self.up, self.down = nn.Linear(8, n), nn.Linear(n, 8)
            with torch.no_grad():
                self.up.weight.copy_(dense.up.weight[r * n:(r + 1) * n])
                self.up.bias.copy_(dense.up.bias[r * n:(r + 1) * n])
                self.down.weight.copy_(dense.down.weight[:, r * n:(r + 1) * n])
                self.down.bias.copy_(dense.down.bias)

        def forward(self, x):
            return nn.functional.linear(nn.functional.gelu(self.up(x)), self.down.weight) + self.down.bias

    torch.manual_seed(0)
    try:
        assert_tp_matches_dense(Dense(), Tp, {"up": "colwise", "down": "rowwise"},
                                torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1)))
    except AssertionError as exc:
        return str(exc)
    return ""


def test_a_missing_g_with_the_bias_added_on_every_rank_is_named_missing_g(dist_world):
    """A new user's walkthrough: this was named fused-contiguous-split (the 16 features of up read as fused parts
    of the 8 the output has); with bias=False it was missing-g already."""
    from pytest_distcheck.tp.diagnose import OUTPUTS_ADD_UP_WITH_BIAS

    message, _other = dist_world.run(_hand_written_mlp_without_g)  # it has no f either: named second
    assert message.splitlines()[0].endswith("): missing-g, missing-f"), message
    assert _(OUTPUTS_ADD_UP_WITH_BIAS).format(n=1, path="down") in message and "fused" not in message


def test_a_sliced_input_without_a_column_parallel_layer_is_not_called_a_missing_f(dist_world):
    message, _other = dist_world.run(_check, "sliced-input", False)
    assert f"- sliced-input [{_(INPUT_I).format(i=0)}]: {_(SLICED).format(i=0, dim=2)}" in message
    assert "missing-f" not in message


def _uneven(group_given: bool) -> tuple[str, bool]:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    from pytest_distcheck.tp import assert_tp_matches_dense

    built = []
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    def factory(d):
        built.append(True)
        return parallelize_module(d, mesh, {"down": RowwiseParallel()})

    torch.manual_seed(0)
    dense = nn.Sequential()
    dense.add_module("down", nn.Linear(9, 4))  # 9 input features over 2 ranks: torch's chunks are 5 and 4
    try:
        assert_tp_matches_dense(dense, factory, {"down": "rowwise"}, torch.randn(2, 9),
                                group=dist.group.WORLD if group_given else None)
    except ValueError as exc:
        return str(exc), bool(built)
    return "", bool(built)


def test_an_uneven_split_is_named_before_the_tp_module_runs(dist_world):
    # torch's RowwiseParallel fails inside the forward on uneven shards (pytorch/pytorch#141335) with
    # "a and b must have same reduction dim" and a fake-tensor traceback; the check never gets there.
    want = f"{_(NOT_DIVISIBLE).format(what='down.weight dim 1', length=9, t=2)}; {_(EVEN_SHARDS)}"
    assert dist_world.run(_uneven, True) == [(want, False)] * 2  # TP degree given: refused before it is built
    assert dist_world.run(_uneven, False) == [(want, True)] * 2  # read from the mesh: built, never run
