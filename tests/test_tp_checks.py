"""The pure parts of pytest_distcheck.tp (plan entries, shards, replication, signatures), and assert_replicated."""

from __future__ import annotations

import pytest
import torch

from pytest_distcheck.tp.compare import NO_COUNTERPART, NO_SUBMODULE, NOT_A_MODULE
from pytest_distcheck.tp.diagnose import diagnose, report
from pytest_distcheck.tp.plan import (
    BAD_HEADS,
    BIAS_ROWWISE_ONLY,
    FUSED_COLWISE_ONLY,
    NOT_A_STYLE,
    PLAN_ENTRY,
    UNKNOWN_STYLE,
    Layer,
    parse_plan,
)
from pytest_distcheck.tp.replicated import SHAPE_DIFFERS, VALUES_DIFFER, replication_error
from pytest_distcheck.tp.shards import chunk, expected_shard, what_is_held

TOL = dict(rtol=1e-6, atol=1e-8)


def test_plan_entries_are_checked_and_named():
    assert parse_plan({"a": "colwise", "b": Layer("rowwise", bias="rank0")})["a"] == Layer("colwise")
    cases = [
        (lambda: parse_plan({"x": "colwize"}),
         PLAN_ENTRY.format(path="x", problem=UNKNOWN_STYLE.format(style="colwize",
                                                                  known="colwise, rowwise, replicated"))),
        (lambda: Layer("rowwise", fused=3), FUSED_COLWISE_ONLY.format(fused=3, style="rowwise")),
        (lambda: Layer("colwise", bias="rank0"), BIAS_ROWWISE_ONLY.format(bias="rank0", style="colwise")),
        (lambda: parse_plan({"y": 3}), PLAN_ENTRY.format(path="y", problem=NOT_A_STYLE.format(type="int"))),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as exc:
            make()
        assert str(exc.value) == message


def test_fused_qkv_chunk_takes_each_ranks_heads_of_q_k_and_v():
    w = torch.arange(12.0).unsqueeze(1)  # rows: q0 q1 q2 q3 | k0..k3 | v0..v3
    assert chunk(w, 0, 1, 2, fused=3).flatten().tolist() == [2, 3, 6, 7, 10, 11]
    assert chunk(w, 0, 1, 2).flatten().tolist() == [6, 7, 8, 9, 10, 11]
    assert chunk(w, 0, 0, 2, fused=(4, 4, 4)).flatten().tolist() == [0, 1, 4, 5, 8, 9]
    with pytest.raises(ValueError, match="not divisible by the TP degree 4"):
        chunk(torch.zeros(6, 1), 0, 0, 4)


def test_expected_shards_by_style():
    w, b = torch.randn(6, 4), torch.randn(6)
    assert torch.equal(expected_shard(w, Layer("colwise"), "weight", 1, 2), w[3:])
    assert torch.equal(expected_shard(b, Layer("colwise"), "bias", 1, 2), b[3:])
    assert torch.equal(expected_shard(w, Layer("rowwise"), "weight", 1, 2), w[:, 2:])
    assert torch.equal(expected_shard(b, Layer("rowwise"), "bias", 1, 2), b)
    assert torch.equal(expected_shard(w, None, "weight", 1, 2), w)
    emb = torch.randn(10, 4)  # nn.Embedding: colwise splits the embedding dim, as torch's ColwiseParallel
    assert torch.equal(expected_shard(emb, Layer("colwise"), "weight", 0, 2, embedding=True), emb[:, :2])


def test_what_a_rank_holds_instead_is_named():
    w = torch.randn(8, 8)
    col = Layer("colwise")
    assert what_is_held(w[:, 4:], w, col, "weight", 1, 2, False, **TOL)[0] == "wrong-shard-dim"
    assert what_is_held(w, w, col, "weight", 1, 2, False, **TOL)[0] == "not-sharded"
    assert what_is_held(w[:4], w, col, "weight", 1, 2, False, **TOL)[0] == "wrong-rank-shard"
    qkv = torch.randn(12, 4)
    assert what_is_held(qkv[6:], qkv, Layer("colwise", fused=3), "weight", 1, 2, False, **TOL)[0] == "qkv-head-split"
    assert what_is_held(torch.randn(4, 8), w, col, "weight", 1, 2, False, **TOL) is None


def test_replication_error_names_the_rank_and_the_difference():
    a = torch.zeros(2, 3)
    b = a.clone()
    b[1, 2] = 0.5
    assert replication_error([a, a.clone()]) is None
    assert replication_error([a, b], "x") == VALUES_DIFFER.format(name="x", rank=1, diff=0.5, where=(1, 2), n=1,
                                                                  total=6)
    assert replication_error([a, torch.zeros(3)]) == SHAPE_DIFFERS.format(
        name="tensor", shape=(2, 3), dtype=torch.float32, rank=1, other_shape=(3,), other_dtype=torch.float32)


def _records(outs, dxs, dense_out, dense_dx, w):
    """Records of a 2-rank column-parallel layer (weight shards right) with the given outputs and dL/dx."""
    dense = {"inputs": [torch.ones(1)], "out": dense_out, "xgrads": [dense_dx], "order": [], "layers": {},
             "params": {"lin.weight": {"value": w, "grad": None}}}
    ranks = [{"inputs": [torch.ones(1)], "out": o, "xgrads": [g], "order": [], "layers": {},
              "params": {"lin.weight": {"value": w.chunk(2)[k], "grad": None}}}
             for k, (o, g) in enumerate(zip(outs, dxs, strict=True))]
    return ranks, dense


def test_module_level_signatures_without_layer_records():
    w, dense_out, dx = torch.randn(4, 2), torch.randn(3), torch.randn(3)
    plan = {"lin": Layer("colwise")}
    # Outputs that add up to the dense one: g is missing; dL/dx that add up: f is missing.
    ranks, dense = _records([dense_out * 0.25, dense_out * 0.75], [dx, dx], dense_out, dx, w)
    assert [f.fault for f in diagnose(ranks, dense, plan, **TOL)] == ["missing-g"]
    ranks, dense = _records([dense_out, dense_out], [dx * 0.5, dx * 0.5], dense_out, dx, w)
    found = diagnose(ranks, dense, plan, **TOL)
    assert [f.fault for f in found] == ["missing-f"]
    text = report(found, 2, **TOL)
    assert text.splitlines()[0].endswith("): missing-f")
    assert "missing-f: f is missing before a column-parallel layer" in text
    ranks, dense = _records([dense_out, dense_out + 1], [dx, dx], dense_out, dx, w)
    assert [(f.fault, f.where, f.ranks) for f in diagnose(ranks, dense, plan, **TOL)] == [("mismatch", "output", [1])]


def _replicated(seed_by_rank: bool) -> str:
    import torch
    import torch.distributed as dist

    from pytest_distcheck.tp import assert_replicated

    x = torch.randn(3, generator=torch.Generator().manual_seed(dist.get_rank() if seed_by_rank else 0))
    try:
        assert_replicated(x, name="the prompt")
    except AssertionError as exc:
        return str(exc)
    return ""


def test_assert_replicated_on_ranks(dist_world):
    assert dist_world.run(_replicated, False) == ["", ""]
    message, other = dist_world.run(_replicated, True)
    assert message == other and message.startswith("the prompt differs across ranks: rank 1 vs rank 0")
    assert "dist.broadcast it from rank 0" in message


def test_a_plan_path_or_parameter_the_modules_lack_is_named_before_any_collective():
    from torch import nn

    from pytest_distcheck.tp import assert_tp_matches_dense

    dense = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
    with pytest.raises(ValueError) as exc:
        assert_tp_matches_dense(dense, dense, {"up": "colwise"}, torch.ones(2, 4))
    assert str(exc.value) == NO_SUBMODULE.format(path="up", what="dense", names="0, 1")
    tp = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
    tp.extra = nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError) as exc:
        assert_tp_matches_dense(dense, tp, {"0": "colwise"}, torch.ones(2, 4))
    assert str(exc.value) == NO_COUNTERPART.format(names="extra")
    with pytest.raises(TypeError) as exc:
        assert_tp_matches_dense(dense, lambda d: 3, {"0": "colwise"}, torch.ones(2, 4))
    assert str(exc.value) == NOT_A_MODULE.format(type="int")


def test_an_activation_is_compared_whole_or_as_this_ranks_chunk_of_one_dim():
    from pytest_distcheck.tp.shards import shard_like

    dense = torch.arange(24.0).view(2, 4, 3)
    assert shard_like(dense, dense, 1, 2) is dense
    assert torch.equal(shard_like(torch.zeros(2, 2, 3), dense, 1, 2), dense[:, 2:])  # a sequence-parallel chunk
    wide = torch.arange(16.0).view(2, 8)
    assert torch.equal(shard_like(torch.zeros(2, 4), wide, 0, 2, fused=2), wide[:, [0, 1, 4, 5]])
    assert shard_like(torch.zeros(2, 3, 3), dense, 0, 2) is None


def test_sequence_sharded_and_sliced_signatures():
    from pytest_distcheck.tp.shards import sequence_dim, sliced_dim

    dense = torch.randn(2, 4, 3)
    assert sequence_dim(dense[:, 2:], dense, 1, 2, **TOL) == 1
    assert sequence_dim(dense[..., :1], dense, 0, 3, **TOL) is None  # the last dim: column-parallel, not sequence
    assert sequence_dim(dense, dense, 0, 2, **TOL) is None
    g = torch.randn(2, 3, 4)
    sliced = [torch.cat([g[..., :2], torch.zeros(2, 3, 2)], -1), torch.cat([torch.zeros(2, 3, 2), g[..., 2:]], -1)]
    assert sliced_dim(sliced, g, **TOL) == 2
    assert sliced_dim([g / 2, g / 2], g, **TOL) is None  # partial everywhere: a missing f, not a slice


def test_split_problems_name_each_uneven_size_and_the_heads():
    from pytest_distcheck.tp.plan import HEADS_NOT_DIVISIBLE, NOT_DIVISIBLE, split_problems

    assert split_problems({"down.weight dim 1": 16}, 6, heads=4) == [
        NOT_DIVISIBLE.format(what="down.weight dim 1", length=16, t=6),
        HEADS_NOT_DIVISIBLE.format(heads=4, t=6, per=4 / 6)]
    assert NOT_DIVISIBLE.format(what="dim 1", length=16, t=6) == ("dim 1 of length 16 is not divisible by the "
                                                                  "TP degree 6")
    assert split_problems({"a": 16}, 4, heads=8) == []
    with pytest.raises(ValueError) as exc:
        Layer("colwise", heads=-1)
    assert str(exc.value) == BAD_HEADS.format(heads=-1)


def test_a_fused_weight_split_contiguously_is_named_by_its_parts():
    gate_up = torch.randn(8, 4)  # [gate | up], 4 rows each
    held = what_is_held(gate_up[:4], gate_up, Layer("colwise", fused=2), "weight", 0, 2, False, **TOL)
    assert held == ("fused-contiguous-split", "holds rows 0..3 of 8, a contiguous chunk covering part 1 of the 2 "
                    "fused parts only, but the plan declares fused=2: every rank needs its chunk of every part")
    assert what_is_held(chunk(gate_up, 0, 1, 2, fused=2), gate_up, Layer("colwise"), "weight", 1, 2, False,
                        **TOL)[0] == "fused-contiguous-split"
    qkv = torch.randn(12, 4)
    assert what_is_held(chunk(qkv, 0, 1, 2, fused=3), qkv, Layer("colwise"), "weight", 1, 2, False,
                        **TOL)[0] == "qkv-head-split"


def _layered(dx, up_grads, dense_dx, up_dense):
    """Records of a 2-rank module whose dL/dx at the boundary is ``dx`` per rank and whose planned layer ``up``
    (colwise, inside parent ``mlp``) saw ``up_grads`` at its input; weights right, no gradients."""
    w = torch.randn(4, 2)
    layer = {"in": torch.ones(3), "out": None}
    dense = {"inputs": [torch.ones(1)], "out": torch.ones(3), "xgrads": [dense_dx], "order": ["mlp", "mlp.up"],
             "layers": {"mlp.up": {**layer, "in_grad": up_dense}, "mlp": {**layer, "in_grad": dense_dx}},
             "params": {"mlp.up.weight": {"value": w, "grad": None}}}
    ranks = [{"inputs": [torch.ones(1)], "out": torch.ones(3), "xgrads": [dx[k]], "order": ["mlp.up", "mlp"],
              "layers": {"mlp.up": {**layer, "in_grad": up_grads[k]}, "mlp": {**layer, "in_grad": dx[k]}},
              "params": {"mlp.up.weight": {"value": w.chunk(2)[k], "grad": None}}} for k in range(2)]
    return ranks, dense


def test_a_partial_gradient_inside_the_module_is_reported_only_where_the_boundary_is_wrong():
    plan = {"mlp.up": Layer("colwise")}
    g = torch.randn(3)
    # f applied by the parent before the layer: the layer's input gradient is partial, the module's is whole.
    ranks, dense = _layered([g, g], [g / 4, g * 3 / 4], g, g)
    assert diagnose(ranks, dense, plan, **TOL) == []
    # No f anywhere: the boundary's dL/dx is partial too, and the layer is named.
    ranks, dense = _layered([g / 4, g * 3 / 4], [g / 4, g * 3 / 4], g, g)
    assert [(f.fault, f.where) for f in diagnose(ranks, dense, plan, **TOL)] == [("missing-f", "mlp.up")]


def test_heads_a_tp_degree_does_not_divide_are_refused_before_anything_runs():
    from fixtures.tp_faults.zoo import Attention
    from pytest_distcheck.tp.compare import _check_even
    from pytest_distcheck.tp.plan import EVEN_SHARDS, HEADS_NOT_DIVISIBLE, NOT_DIVISIBLE

    attention = Attention(d=16, heads=4)  # qkv: 3 parts of 16 rows; 8 ranks divide the rows, not the heads
    _check_even({"qkv": Layer("colwise", fused=3, heads=4), "out": Layer("rowwise", heads=4)}, attention, 4)
    with pytest.raises(ValueError) as info:
        _check_even({"qkv": Layer("colwise", fused=3, heads=4)}, attention, 8)
    assert str(info.value) == f"{HEADS_NOT_DIVISIBLE.format(heads=4, t=8, per=0.5)}; {EVEN_SHARDS}"
    with pytest.raises(ValueError) as info:
        _check_even({"qkv": Layer("colwise", fused=3)}, attention, 3)
    assert str(info.value).startswith(NOT_DIVISIBLE.format(what="qkv.weight dim 0 (a fused part)", length=16, t=3))
