"""TP/SP/PP traffic against Narayanan et al. 2021 sec. 3.2 / 4.1 and Shoeybi et al. 2019, by hand."""

import pytest

from pytest_distcheck.calc import tp_traffic as tt
from pytest_distcheck.calc.collectives import ring_allreduce_seconds


def test_two_allreduces_forward_two_backward():
    # Shoeybi et al. 2019 Fig. 3/4 (f and g); ZeRO sec. 8: 6 with full recomputation
    assert tt.tp_allreduces_per_layer() == (2, 2)
    assert tt.tp_allreduces_per_layer("selective") == (2, 2)
    assert sum(tt.tp_allreduces_per_layer("full")) == 6


def test_bytes_sent_is_8bsh_t_minus_1_over_t():
    # Narayanan sec. 3.2: 8 bsh (t-1)/t elements. b=1, s=2048, h=12288, t=8, fp16:
    # 8 * 2048 * 12288 * 7/8 * 2 bytes = 352,321,536 bytes
    got = tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8)
    assert got == pytest.approx(8 * 2048 * 12288 * 7 / 8 * 2)
    assert got == pytest.approx(352_321_536)
    assert tt.tp_bytes_sent_per_layer(1, 2048, 12288, 1) == 0.0
    # full recompute: 12 bsh (t-1)/t
    assert tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8, recompute="full") == pytest.approx(got * 1.5)


def test_message_is_bsh_elements():
    assert tt.tp_message_bytes(4, 1024, 4096) == 4 * 1024 * 4096 * 2
    assert tt.tp_message_bytes(4, 1024, 4096, bytes_per_element=4) == 4 * 1024 * 4096 * 4
    with pytest.raises(ValueError, match="hidden"):
        tt.tp_message_bytes(4, 1024, 0)


def test_layer_comm_time_is_four_ring_allreduces():
    msg = 2 * 512 * 1024 * 2
    one = ring_allreduce_seconds(msg, 4, 1e-5, 1e11)
    assert tt.tp_comm_seconds_per_layer(2, 512, 1024, 4, 1e-5, 1e11) == pytest.approx(4 * one)


def test_pp_messages_sec_4_1():
    # bsh, or bsh/t with scatter/gather
    assert tt.pp_message_bytes(1, 2048, 12288) == 2048 * 12288 * 2
    assert tt.pp_message_bytes(1, 2048, 12288, tp=8, scatter_gather=True) == 2048 * 12288 * 2 / 8
    # interior stage: m activations out + m gradients out, times v chunks (interleaving multiplies by v)
    msg = 2048 * 12288 * 2
    assert tt.pp_bytes_sent_per_stage_per_batch(1, 2048, 12288, 8) == 16 * msg
    assert tt.pp_bytes_sent_per_stage_per_batch(1, 2048, 12288, 8, virtual_stages=2) == 32 * msg


def test_sp_collectives_paper_and_megatron_core_regather():
    # Korthikanti et al. 2022 sec. 4.2.2: each all-reduce becomes RS + AG, 4 + 4 per layer
    assert tt.tp_collectives_per_layer(sequence_parallel=True) == {"reduce_scatter": 4, "all_gather": 4}
    # megatron-core 0.16.1 re-gathers each column-parallel layer's saved 1/t input in backward (QKV, fc1): 6 + 4
    assert tt.tp_collectives_per_layer(sequence_parallel=True, regather_input=True) == {
        "reduce_scatter": 4, "all_gather": 6}
    # full recomputation re-runs the forward's 2 AG + 2 RS; the re-gather still adds 2
    assert tt.tp_collectives_per_layer(True, "full", regather_input=True) == {"reduce_scatter": 6, "all_gather": 8}
    # bytes: 10 collectives of (t-1)/t b s h against 8, a quarter more
    paper = tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8, sequence_parallel=True)
    core = tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8, sequence_parallel=True, regather_input=True)
    assert core / paper == pytest.approx(1.25)
    assert paper == tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8)
    with pytest.raises(ValueError, match="sequence_parallel"):
        tt.tp_collectives_per_layer(regather_input=True)
