"""Precision recipes as data and what each sharding scheme shards, pinned to their sources."""

import pytest

from pytest_distcheck.calc import memory, precision

GB = 1e9


def test_dtype_bytes():
    assert [precision.dtype_bytes(d) for d in ("fp32", "bf16", "fp16", "fp8")] == [4, 2, 2, 1]
    with pytest.raises(ValueError, match="fp4"):
        precision.dtype_bytes("fp4")


def test_zero_paper_recipe_is_16_bytes_with_k_12():
    r = precision.recipe("zero")  # ZeRO sec. 3.1: 2 + 2 + K, K = 12
    assert r.total_bytes_per_param == 16 and r.k == 12
    assert r.bytes_per_param() == {"weights": 2, "grads": 2, "main_grads": 0, "master": 4, "optimizer": 8}


@pytest.mark.parametrize("stage", ["ddp", "zero1", "zero2", "zero3"])
def test_zero_recipe_equals_the_zero_formulas(stage):
    # ZeRO Fig. 1: 7.5B on N_d = 64 -> 120 / 31.4 / 16.6 / 1.9 GB
    assert memory.model_states(7.5e9, "zero", stage, 64).total_bytes == pytest.approx(
        memory.zero_model_state_bytes(7.5e9, stage, 64))


@pytest.mark.parametrize(("name", "plain", "whole", "sharded"), [
    # Megatron-LM README, "Distributed Optimizer": bytes per parameter, non-distributed / distributed (d = DP)
    ("megatron-fp16", 20, 4, 16),
    ("megatron-bf16", 18, 6, 12),
    ("megatron-fp32", 16, 8, 8),
])
def test_megatron_distributed_optimizer_table(name, plain, whole, sharded):
    assert precision.recipe(name).total_bytes_per_param == plain
    for d in (1, 8, 64):
        got = memory.model_states(1e9, name, "megatron-distopt", dp=d).total_bytes
        assert got == pytest.approx((whole + sharded / d) * 1e9)
    assert memory.model_states(1e9, name, "ddp", dp=8).total_bytes == pytest.approx(plain * 1e9)


def test_larger_k_alone_cannot_express_fp32_main_grads_but_a_recipe_can():
    # issue 17: K = 14 makes the unsharded total right (18) but ZeRO-1's sharded total wrong:
    # 4 + 14/d instead of Megatron's 6 + 12/d
    k14 = memory.zero_model_state_bytes(1e9, "zero1", 8, k=14)
    right = memory.model_states(1e9, "megatron-bf16", "megatron-distopt", 8).total_bytes
    assert memory.zero_model_state_bytes(1e9, "ddp", 8, k=14) == pytest.approx(18e9)
    assert (k14, right) == (pytest.approx(5.75e9), pytest.approx(7.5e9))


def test_fsdp2_mixed_precision_keeps_fp32_sharded_params_as_the_master():
    # torch MixedPrecisionPolicy: sharded parameters stay fp32, no extra copy; bf16 only when unsharded
    r = precision.recipe("fsdp2-bf16")
    assert r.master is None and r.total_bytes_per_param == 16 and r.compute_bytes == 2
    states = memory.model_states(8e9, r, "FULL_SHARD", dp=8)
    assert states.total_bytes == pytest.approx(16e9)
    # the gathered unit (a 12h^2 layer at h = 4096) in bf16, parameters + gradients: 2 x 2 x 12h^2
    assert memory.gathered_unit_bytes(12 * 4096**2, r) == pytest.approx(4 * 12 * 4096**2)


def test_other_optimizers():
    assert precision.recipe("bf16-sgd-momentum").total_bytes_per_param == 2 + 2 + 4 + 4
    assert precision.recipe("bf16-adafactor").total_bytes_per_param == 2 + 2 + 4
    assert precision.recipe("fp32-adam").total_bytes_per_param == 16
    assert precision.recipe("fp8-megatron").compute_bytes == 1
    with pytest.raises(ValueError, match="lion"):
        precision.Recipe("x", "bf16", "bf16", "fp32", "lion")


def test_every_preset_names_its_source():
    for r in precision.PRESETS.values():
        assert r.source, r.name


@pytest.mark.parametrize(("given", "key"), [(0, "ddp"), ("ZeRO-2", "zero2"), ("SHARD_GRAD_OP", "zero2"),
                                             ("FULL_SHARD", "zero3"), ("HYBRID_SHARD", "zero3"), ("NO_SHARD", "ddp"),
                                             ("_HYBRID_SHARD_ZERO2", "zero2"), ("distopt", "megatron-distopt")])
def test_scheme_names(given, key):
    assert precision.scheme(given) == key


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="zero4"):
        precision.scheme("zero4")
    with pytest.raises(ValueError, match="apex"):
        precision.recipe("apex")


def test_tp_pp_cp_apply_to_every_row():
    # each GPU holds Psi/(t p); the sharded parts divide over dp x cp (ranks holding the same weights)
    s = memory.model_states(175e9, "zero", "zero1", dp=8, tp=8, pp=16, cp=2)
    local = 175e9 / 128
    assert s.total_bytes == pytest.approx(4 * local + 12 * local / 16)
    hybrid = memory.model_states(70e9, "zero", "HYBRID_SHARD", dp=32, shard_group=8)
    assert hybrid.total_bytes == pytest.approx(16 * 70e9 / 8)
    with pytest.raises(ValueError, match="shard_group"):
        memory.model_states(70e9, "zero", "HYBRID_SHARD", dp=32)
    with pytest.raises(ValueError, match="divide"):
        memory.model_states(70e9, "zero", "zero3", dp=12, shard_group=8)


def test_plan_memory_adds_activations_and_the_gathered_unit():
    pm = memory.plan_memory(13e9, sharding="zero3", dp=8, layers=40, hidden=5120, heads=40, seq_len=2048,
                            recompute="selective")
    sbh = 2048 * 5120
    assert pm.activation_bytes == pytest.approx(40 * sbh * 34)  # Korthikanti Table 2, t = 1: 34 sbh per layer
    assert pm.gathered_bytes == pytest.approx(4 * 12 * 5120**2)  # DeepSpeed: 4 x largest layer
    assert pm.total_bytes == pytest.approx(16 * 13e9 / 8 + pm.activation_bytes + pm.gathered_bytes)
    cp = memory.plan_memory(13e9, sharding="zero1", dp=4, cp=2, layers=40, hidden=5120, heads=40, seq_len=2048)
    assert cp.activation_bytes == pytest.approx(memory.first_stage_activation_bytes(2048, 1, 5120, 40, 40) / 2)
    assert cp.gathered_bytes == 0
    assert any("activations" in a for a in cp.assumptions)
    uneven = memory.plan_memory(13e9, pp=7, layers=40, hidden=5120, heads=40, seq_len=2048)
    assert uneven.activation_bytes == pytest.approx(memory.first_stage_activation_bytes(2048, 1, 5120, 40, 42, pp=7))
    assert any("uneven stages" in a for a in uneven.assumptions)


def test_gathered_unit_needs_a_size_and_is_never_the_whole_model():
    blind = memory.plan_memory(70e9, sharding="zero3", dp=8)
    assert blind.gathered_bytes == 0 and any("gathered unit not counted" in a for a in blind.assumptions)
    by_layers = memory.plan_memory(70e9, sharding="zero3", dp=8, layers=80)
    assert by_layers.gathered_bytes == pytest.approx(4 * 70e9 / 80)  # 2 x fp16 x params per layer
