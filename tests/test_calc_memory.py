"""Model-state and activation memory pinned to ZeRO Fig. 1 and Korthikanti et al. 2022."""

import pytest

from pytest_distcheck.calc import memory as mem

GB = 1e9


@pytest.mark.parametrize(
    ("stage", "published_gb", "exact_gb"),
    [
        # Rajbhandari et al. 2019, Fig. 1: Psi = 7.5B, N_d = 64, K = 12
        ("ddp", 120, 120.0),
        ("zero1", 31.4, 30 + 12 * 7.5 / 64),   # 4 Psi + K Psi / N_d = 31.406
        ("zero2", 16.6, 15 + 14 * 7.5 / 64),   # 2 Psi + (2+K) Psi / N_d = 16.641
        ("zero3", 1.9, 120 / 64),              # 16 Psi / N_d = 1.875
    ],
)
def test_zero_figure_1(stage, published_gb, exact_gb):
    gb = mem.zero_model_state_bytes(7.5e9, stage, 64) / GB
    assert gb == pytest.approx(exact_gb)
    assert round(gb, 1) == published_gb


def test_zero_sec_3_1_gpt2_needs_24_gb():
    # ZeRO sec. 3.1: GPT-2 with 1.5B parameters needs at least 24 GB of model states
    assert mem.zero_model_state_bytes(1.5e9, "ddp", 1) == pytest.approx(24e9)


def test_breakdown_and_aliases():
    s = mem.zero_model_states(1e9, 2, 4)
    assert (s.params_bytes, s.grads_bytes, s.optimizer_bytes) == (2e9, 0.5e9, 3e9)
    assert s.total_gb == pytest.approx(5.5)
    assert mem.zero_model_state_bytes(1e9, "ZeRO-3", 8) == mem.zero_model_state_bytes(1e9, 3, 8)
    assert mem.zero_model_state_bytes(1e9, 0, 8) == 16e9
    with pytest.raises(ValueError, match="zero4"):
        mem.zero_model_states(1e9, "zero4", 8)
    with pytest.raises(ValueError, match="dp"):
        mem.zero_model_states(1e9, "zero1", 0)


def test_playbook_table_16_bytes_per_param():
    # Ultra-Scale Playbook memory table: 7B -> 112 GB, 70B -> 1120 GB (16 B/param)
    assert mem.zero_model_state_bytes(7e9, "ddp", 1) / GB == pytest.approx(112)
    assert mem.zero_model_state_bytes(70e9, "ddp", 1) / GB == pytest.approx(1120)


def test_fsdp_strategies_map_to_zero_stages():
    psi, n = 7.5e9, 64
    assert mem.fsdp_model_states(psi, "NO_SHARD", n).total_bytes == mem.zero_model_state_bytes(psi, "ddp", n)
    assert mem.fsdp_model_states(psi, "shard_grad_op", n).total_bytes == pytest.approx(16.640625e9)
    assert mem.fsdp_model_states(psi, "FULL_SHARD", n).total_bytes == pytest.approx(1.875e9)
    # HYBRID_SHARD: FULL_SHARD within a node of 8 -> 16 Psi / 8 = 15 GB, whatever the node count
    assert mem.fsdp_model_states(psi, "HYBRID_SHARD", n, gpus_per_node=8).total_gb == pytest.approx(15.0)
    # _HYBRID_SHARD_ZERO2 within 8: 2 Psi + 14 Psi / 8 = 15 + 13.125
    z2 = mem.fsdp_model_states(psi, "_HYBRID_SHARD_ZERO2", n, gpus_per_node=8)
    assert z2.total_gb == pytest.approx(28.125)
    assert z2.strategy == "_HYBRID_SHARD_ZERO2"


def test_fsdp_errors_name_the_problem():
    with pytest.raises(ValueError, match="gpus_per_node"):
        mem.fsdp_model_states(1e9, "HYBRID_SHARD", 16)
    with pytest.raises(ValueError, match="world_size=12, gpus_per_node=8"):
        mem.fsdp_model_states(1e9, "HYBRID_SHARD", 12, gpus_per_node=8)
    with pytest.raises(ValueError, match="SHARD_EVERYTHING"):
        mem.fsdp_model_states(1e9, "SHARD_EVERYTHING", 8)


# Korthikanti et al. 2022, GPT-3 175B: s=2048, h=12288, a=96, t=8
S, H, A, T = 2048, 12288, 96, 8


def test_activations_eq1_no_parallelism():
    # Eq. (1): sbh(34 + 5as/h); 5as/h = 80 for GPT-3 -> sbh * 114
    assert mem.activation_bytes_per_layer(S, 1, H, A) == pytest.approx(S * H * 114)


def test_activations_eq2_tp():
    # Eq. (2): sbh(10 + 24/t + 5as/(ht)) = sbh(10 + 3 + 10) = 23 sbh
    assert mem.activation_bytes_per_layer(S, 1, H, A, tp=T) == pytest.approx(S * H * 23)


def test_activations_eq4_tp_sp():
    # Eq. (4): (sbh/t)(34 + 5as/h) = sbh * 114/8
    got = mem.activation_bytes_per_layer(S, 1, H, A, tp=T, sequence_parallel=True)
    assert got == pytest.approx(S * H * 114 / 8)


def test_activations_table2_recompute():
    sbh = S * 2 * H  # micro-batch 2
    assert mem.activation_bytes_per_layer(S, 2, H, A, T, recompute="selective") == pytest.approx(sbh * 13)
    assert mem.activation_bytes_per_layer(S, 2, H, A, T, True, "selective") == pytest.approx(34 * sbh / 8)
    assert mem.activation_bytes_per_layer(S, 2, H, A, T, True, "full") == pytest.approx(2 * sbh)
    with pytest.raises(ValueError, match="partial"):
        mem.activation_bytes_per_layer(S, 2, H, A, recompute="partial")


def test_sequence_parallel_with_t1_changes_nothing():
    assert mem.activation_bytes_per_layer(1024, 4, 4096, 32, 1, True) == pytest.approx(
        mem.activation_bytes_per_layer(1024, 4, 4096, 32, 1, False))


def test_selective_recompute_saving_sec5():
    # sec. 5: GPT-3 (5as/h = 80) saves 70%, MT-NLG (a=128, h=20480, 5as/h = 64) saves 65%
    assert round(mem.selective_recompute_saving(2048, 12288, 96), 2) == 0.70
    assert round(mem.selective_recompute_saving(2048, 20480, 128), 2) == 0.65


def test_first_stage_eq5_eq6():
    # Eq. (5): (sbhL/t)(34 + 5as/h); Eq. (6): 34 sbhL/t. GPT-3 L=96
    eq5 = mem.first_stage_activation_bytes(S, 1, H, A, 96, T, True, "none", pp=8)
    assert eq5 == pytest.approx(S * H * 96 / 8 * 114)
    eq6 = mem.first_stage_activation_bytes(S, 1, H, A, 96, T, True, "selective", pp=8)
    assert eq6 == pytest.approx(34 * S * H * 96 / 8)
    # interleaving: x (1 + (p-1)/(p m)), m = interleaving stages: p=8, m=2 -> 1 + 7/16
    inter = mem.first_stage_activation_bytes(S, 1, H, A, 96, T, True, "selective", pp=8,
                                             interleaving_stages=2)
    assert inter == pytest.approx(eq6 * (1 + 7 / 16))
