"""count_collectives / assert_collectives / expected_collectives: where TP's all-reduces happen, and when."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_distcheck.tp.collectives import COUNTS, DIFFER, NEEDS_GRAD, expected_collectives, kind_of
from pytest_distcheck.tp.plan import Layer


def test_expected_counts_follow_the_plan_and_the_requires_grad_condition():
    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
    block = expected_collectives(plan, input_needs_grad=True)
    assert block.forward == Counter({"all-reduce": 2}) and block.backward == Counter({"all-reduce": 2})
    bare = expected_collectives({"up": "colwise", "down": Layer("rowwise")}, input_needs_grad=False)
    assert bare.forward == Counter({"all-reduce": 1}) and bare.backward == Counter()
    some = expected_collectives(plan, {"attn.qkv": False, "mlp.up": True})
    assert some.backward == Counter({"all-reduce": 1})
    assert expected_collectives(plan, True, backward=False).backward == Counter()
    assert str(block) == COUNTS.format(forward="2 all-reduce", backward="2 all-reduce")


def test_op_names_map_to_field_standard_kinds():
    assert kind_of("c10d::allreduce_") == "all-reduce"
    assert kind_of("_c10d_functional::all_gather_into_tensor") == "all-gather"
    assert kind_of("c10d::_reduce_scatter_base_") == "reduce-scatter"
    assert kind_of("c10d::broadcast_") == "broadcast"


def _count_raw_collectives():
    import torch
    import torch.distributed as dist

    from pytest_distcheck.tp import count_collectives

    t = torch.ones(4)
    with count_collectives() as counts:
        dist.all_reduce(t)
        dist.broadcast(t, 0)
        out = [torch.empty(4) for _ in range(dist.get_world_size())]
        dist.all_gather(out, t)
    return dict(counts.forward), dict(counts.backward)


def test_count_collectives_sees_plain_c10d_calls(dist_world):
    fwd, bwd = dist_world.run(_count_raw_collectives)[0]
    assert fwd == {"all-reduce": 1, "broadcast": 1, "all-gather": 1} and bwd == {}


def _mlp_counts(x_requires_grad: bool, style: str):
    import torch
    import torch.distributed as dist

    from fixtures.tp_faults.zoo import MLP, TPMLP
    from pytest_distcheck.tp import assert_collectives

    torch.manual_seed(0)
    dense = MLP()
    plan = {"up": "colwise", "down": "rowwise"}
    if style == "dtensor":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        model = parallelize_module(dense, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    else:
        model = TPMLP(dense, dist.get_rank(), dist.get_world_size())
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0)).requires_grad_(x_requires_grad)
    counts = assert_collectives(model, x, plan=plan)
    return str(counts)


@pytest.mark.parametrize("style", ["megatron", "dtensor"])
def test_a_column_parallel_layer_all_reduces_in_backward_only_when_its_input_needs_grad(dist_world, style):
    assert dist_world.run(_mlp_counts, False, style)[0] == COUNTS.format(forward="1 all-reduce", backward="none")
    assert dist_world.run(_mlp_counts, True, style)[0] == COUNTS.format(forward="1 all-reduce", backward="1 all-reduce")


def _lab_block_counts():
    import torch

    from experiments.tp_inference.comm import TPGroup
    from experiments.tp_inference.model import GPTConfig, build_model
    from experiments.tp_inference.plan import BLOCK_PLAN
    from experiments.tp_inference.shard import shard_model
    from pytest_distcheck.tp import assert_collectives

    model = build_model(GPTConfig(vocab_size=16, n_layers=1, d_model=16, n_heads=4, max_seq_len=8))
    block = shard_model(model, TPGroup.from_group()).blocks[0]
    x = torch.randn(2, 5, 16)  # needs no grad: the LayerNorms upstream of both column-parallel layers do
    return str(assert_collectives(block, x, plan=BLOCK_PLAN))


def test_the_lab_block_does_two_all_reduces_each_way(dist_world):
    assert dist_world.run(_lab_block_counts)[0] == COUNTS.format(forward="2 all-reduce", backward="2 all-reduce")


def _no_f_counts():
    import torch
    import torch.distributed as dist

    from fixtures.tp_faults.zoo import MLP, TPMLP, NoFColumn
    from pytest_distcheck.tp import assert_collectives

    torch.manual_seed(0)
    model = TPMLP(MLP(), dist.get_rank(), dist.get_world_size(), up=NoFColumn)
    x = torch.randn(2, 3, 8).requires_grad_(True)
    try:
        assert_collectives(model, x, plan={"up": "colwise", "down": "rowwise"})
    except AssertionError as exc:
        return str(exc)
    return ""


def test_a_missing_f_shows_as_a_missing_backward_all_reduce(dist_world):
    message = dist_world.run(_no_f_counts)[0]
    want = COUNTS.format(forward="1 all-reduce", backward="1 all-reduce")
    found = COUNTS.format(forward="1 all-reduce", backward="none")
    assert message == DIFFER.format(want=want, found=found) + "\n" + NEEDS_GRAD.format(path="up")
