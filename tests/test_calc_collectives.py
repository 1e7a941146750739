"""Collective calculators against nccl-tests doc/PERFORMANCE.md and hand-computed alpha-beta times."""

import math

import pytest

from pytest_distcheck.calc import collectives as c


@pytest.mark.parametrize(
    ("name", "n", "factor"),
    [
        # nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n
        ("all_reduce", 8, 2 * 7 / 8),
        ("allreduce", 2, 1.0),
        ("all-reduce", 1, 0.0),
        # (n-1)/n for reduce_scatter, all_gather, alltoall
        ("reduce_scatter", 4, 0.75),
        ("all_gather", 8, 7 / 8),
        ("alltoall", 16, 15 / 16),
        # 1 for broadcast and reduce
        ("broadcast", 8, 1.0),
        ("reduce", 3, 1.0),
    ],
)
def test_busbw_factor_matches_nccl_tests(name, n, factor):
    assert c.busbw_factor(name, n) == pytest.approx(factor)


def test_algbw_and_busbw_in_gb_per_s_with_gb_1e9():
    # 1 GB (1e9 bytes) all-reduced in 10 ms on 8 ranks: algbw = 100 GB/s, busbw = 100 * 14/8 = 175 GB/s
    assert c.algbw_gbps(1e9, 0.01) == pytest.approx(100.0)
    assert c.busbw_gbps("all_reduce", 1e9, 0.01, 8) == pytest.approx(175.0)
    # 2**30 bytes in 1 s is 1.073741824 GB/s, not 1 (GB != GiB)
    assert c.algbw_gbps(2**30, 1.0) == pytest.approx(1.073741824)


@pytest.mark.parametrize(
    "call",
    [
        lambda: c.busbw_factor("allreduce_fancy", 4),
        lambda: c.busbw_factor("all_reduce", 0),
        lambda: c.busbw_factor("all_reduce", 2.5),
        lambda: c.algbw_gbps(1e6, 0.0),
        lambda: c.algbw_gbps(-1, 1.0),
        lambda: c.collective_seconds("reduce", 1e6, 4, 1e-6, 1e9),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_unknown_collective_message_lists_known_names():
    with pytest.raises(ValueError, match=r"'gather'.*all_reduce"):
        c.busbw_factor("gather", 4)


def test_ring_allreduce_by_hand():
    # Patarasuk & Yuan 2009: 2(n-1)a + 2(n-1)/n S/B. n=4, a=5 us, S=1e9 B, B=1e11 B/s:
    # 2*3*5e-6 + 2*3/4*1e9/1e11 = 3e-5 + 0.015 = 0.01503 s
    assert c.ring_allreduce_seconds(1e9, 4, 5e-6, 1e11) == pytest.approx(0.01503)
    assert c.collective_seconds("all_reduce", 1e9, 4, 5e-6, 1e11) == pytest.approx(0.01503)
    assert c.ring_allreduce_seconds(1e9, 1, 5e-6, 1e11) == 0.0


def test_allreduce_is_reduce_scatter_plus_all_gather():
    # ZeRO sec. 7.1; Korthikanti et al. 2022 sec. 4.2.2
    s, n, a, b = 3e8, 8, 2e-6, 5e10
    rs = c.ring_reduce_scatter_seconds(s, n, a, b)
    ag = c.ring_all_gather_seconds(s, n, a, b)
    assert rs + ag == pytest.approx(c.ring_allreduce_seconds(s, n, a, b))
    # Thakur et al. 2005 sec. 4: (n-1)a + (n-1)/n S/B = 7*2e-6 + 7/8*3e8/5e10 = 1.4e-5 + 5.25e-3
    assert rs == pytest.approx(5.264e-3)


def test_binomial_broadcast_by_hand():
    # ceil(lg 8) = 3 rounds of (a + S/B); ceil(lg 5) = 3 as well
    assert c.binomial_broadcast_seconds(1e6, 8, 1e-5, 1e9) == pytest.approx(3 * (1e-5 + 1e-3))
    assert c.binomial_broadcast_seconds(1e6, 5, 1e-5, 1e9) == pytest.approx(3 * (1e-5 + 1e-3))


def test_tree_latency_is_logarithmic_ring_linear():
    # NCCL 2.4 blog: at 1024 ranks the ring's 2(n-1)a is 2046a, the tree's 2 log2(n) a is 20a (102x)
    a = 1e-6
    ring = c.ring_allreduce_latency_seconds(1024, a)
    tree = c.tree_allreduce_latency_seconds(1024, a)
    assert ring == pytest.approx(2046e-6)
    assert tree == pytest.approx(20e-6)
    assert math.floor(ring / tree) == 102
