"""All-reduce algorithms, all-to-all, data-parallel volume per step, TP traffic with SP, and the decode
all-reduce with its bandwidth term, each checked by hand against its source's formula."""

import math

import pytest

from pytest_distcheck.calc import collectives as c
from pytest_distcheck.calc import flops
from pytest_distcheck.calc import tp_traffic as tt

A, B, S = 5e-6, 100e9, 1e9  # alpha 5 us, 100 GB/s per rank, a 1 GB buffer


def test_tree_allreduce_two_tree_model():
    # Sanders et al. 2009 two-tree: 2 ceil(log2 n) alpha + 2 S/B; n = 1024 -> 20 alpha
    assert c.tree_allreduce_seconds(S, 1024, A, B) == pytest.approx(20 * A + 2 * S / B)
    assert c.tree_allreduce_seconds(S, 1, A, B) == 0
    # latency-bound: a 1 KB all-reduce over 1024 ranks, tree beats ring by ~(2 x 1023) / 20
    ring, tree = c.ring_allreduce_seconds(1e3, 1024, A, B), c.tree_allreduce_seconds(1e3, 1024, A, B)
    assert ring / tree > 100


def test_halving_doubling_rabenseifner():
    # Thakur et al. 2005 sec. 4.4: 2 lg p alpha + 2 (p-1)/p S/B for p a power of two
    assert c.halving_doubling_allreduce_seconds(S, 8, A, B) == pytest.approx(6 * A + 2 * 7 / 8 * S / B)
    # non-power-of-two: p' = 4 for n = 6, plus 2 (alpha + S/B)
    assert c.halving_doubling_allreduce_seconds(S, 6, A, B) == pytest.approx(
        4 * A + 2 * 3 / 4 * S / B + 2 * (A + S / B))
    # same bandwidth term as the ring, fewer latency steps
    assert c.halving_doubling_allreduce_seconds(S, 64, A, B) < c.ring_allreduce_seconds(S, 64, A, B)


def test_hierarchical_allreduce():
    # BlueConnect, Horovod #411: RS in node (g = 8, NVLink 300 GB/s) + AR of S/8 across 4 nodes (25 GB/s) + AG in node
    got = c.hierarchical_allreduce_seconds(S, 4, 8, 1e-6, 300e9, 10e-6, 25e9)
    rs = 7 * 1e-6 + 7 / 8 * S / 300e9
    ar = 2 * 3 * 10e-6 + 2 * 3 / 4 * (S / 8) / 25e9
    assert got == pytest.approx(2 * rs + ar)
    # a flat ring over the 32 GPUs is paced by the slow link: 2 (31/32) S / 25e9
    assert got < c.ring_allreduce_seconds(S, 32, 10e-6, 25e9)


def test_all_to_all_pairwise():
    assert c.all_to_all_seconds(S, 8, A, B) == pytest.approx(7 * A + 7 / 8 * S / B)
    assert c.collective_seconds("all-to-all", S, 8, A, B) == c.all_to_all_seconds(S, 8, A, B)


@pytest.mark.parametrize(("sharding", "zero_volume"), [
    ("ddp", 2), ("zero1", 2), ("zero2", 2), ("SHARD_GRAD_OP", 2), ("megatron-distopt", 2),
    ("zero3", 3), ("FULL_SHARD", 3),
])
def test_dp_volume_is_zero_sec_7(sharding, zero_volume):
    # ZeRO sec. 7.2.1/7.2.2: 2 Psi for DDP, ZeRO-1/2; 3 Psi for ZeRO-3 (elements, without (n-1)/n)
    psi, n = 7.5e9, 64
    assert c.dp_bytes_per_step(psi, sharding, n) == pytest.approx(zero_volume * psi * 2 * (n - 1) / n)


def test_dp_volume_with_fp32_gradients():
    # Megatron bf16 with fp32 grads: reduce-scatter fp32 grads + all-gather bf16 params = (4 + 2) (n-1)/n Psi
    assert c.dp_bytes_per_step(1e9, "megatron-distopt", 8, grad_bytes=4, param_bytes=2) == pytest.approx(6e9 * 7 / 8)
    # DDP all-reduces gradients: both halves of the ring carry gradients, whatever the parameters' dtype
    assert c.dp_bytes_per_step(1e9, "ddp", 8, grad_bytes=4, param_bytes=2) == pytest.approx(8e9 * 7 / 8)
    assert c.dp_bytes_per_step(1e9, "NO_SHARD", 8, grad_bytes=4, param_bytes=2) == pytest.approx(8e9 * 7 / 8)


def test_hsdp_volume_splits_intra_and_inter():
    intra, inter = c.hsdp_bytes_per_step(7e9, 8, 4)
    assert intra == pytest.approx(3 * 7e9 * 2 * 7 / 8)
    assert inter == pytest.approx(2 * 3 / 4 * 7e9 * 2 / 8)
    with pytest.raises(ValueError, match="hsdp_bytes_per_step"):
        c.dp_bytes_per_step(7e9, "HYBRID_SHARD", 32)


def test_tp_traffic_with_and_without_sequence_parallelism():
    # Korthikanti sec. 4.2.2: SP turns each all-reduce into RS + AG, the same bytes
    assert tt.tp_collectives_per_layer() == {"all_reduce": 4}
    assert tt.tp_collectives_per_layer(True) == {"reduce_scatter": 4, "all_gather": 4}
    assert tt.tp_collectives_per_layer(True, "full") == {"reduce_scatter": 6, "all_gather": 6}
    plain = tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8)
    assert tt.tp_bytes_sent_per_layer(1, 2048, 12288, 8, sequence_parallel=True) == pytest.approx(plain)
    assert plain == pytest.approx(8 * 2048 * 12288 * 7 / 8 * 2)  # Narayanan sec. 3.2


def test_decode_allreduce_has_a_bandwidth_term():
    # b = 64 sequences, h = 8192, bf16: 1 MiB message; t = 8 over 25 GB/s: 2 x 7 x 5 us + 2 x 7/8 x 1048576 / 25e9
    got = flops.decode_allreduce_seconds(64, 8192, 8, 5e-6, 25e9)
    assert got == pytest.approx(70e-6 + 2 * 7 / 8 * 64 * 8192 * 2 / 25e9)
    step = flops.tp_decode_step_seconds(140e9, 3.35e12, 8, 80, 64, 8192, 5e-6, 25e9)
    assert step == pytest.approx(140e9 / 3.35e12 / 8 + 160 * got)
    # batch 1 over NVLink: the bandwidth term is tiny, the step ~ the lumped-latency model
    lumped = flops.tp_decode_seconds_per_token(140e9, 3.35e12, 8, 80, allreduce_latency_s=70e-6)
    nvlink = flops.tp_decode_step_seconds(140e9, 3.35e12, 8, 80, 1, 8192, 5e-6, 300e9)
    assert math.isclose(nvlink, lumped, rel_tol=1e-3)


def test_in_network_allreduce_sends_the_buffer_once():
    # SHARP / NVLS: each rank sends S to the switch once and receives the sum once; one step up, one down
    assert c.in_network_allreduce_seconds(S, 8, A, B) == pytest.approx(2 * A + S / B)
    assert c.in_network_allreduce_seconds(S, 1, A, B) == 0
    assert c.allreduce_bytes_sent_per_rank(S, 8) == pytest.approx(2 * 7 / 8 * S)
    assert c.allreduce_bytes_sent_per_rank(S, 8, in_network=True) == S
    assert c.allreduce_bytes_sent_per_rank(S, 1) == 0 == c.allreduce_bytes_sent_per_rank(S, 1, in_network=True)
    # about half the ring's bandwidth term at large n; latency independent of n
    ring = c.ring_allreduce_seconds(S, 64, 0, B)
    assert c.in_network_allreduce_seconds(S, 64, 0, B) / ring == pytest.approx(64 / (2 * 63))
    assert c.in_network_allreduce_seconds(1, 1024, A, B) == c.in_network_allreduce_seconds(1, 2, A, B)
    # nccl-tests still reports busbw with the ring's 2(n-1)/n: above the link's B
    t = c.in_network_allreduce_seconds(S, 8, 0, B)
    assert c.busbw_gbps("all_reduce", S, t, 8) == pytest.approx(B / 1e9 * 2 * 7 / 8)
    with pytest.raises(ValueError, match="bandwidth"):
        c.in_network_allreduce_seconds(S, 8, A, 0)
