"""FLOPs and time bounds pinned to Kaplan et al. 2020, Brown et al. 2020 and Narayanan et al. 2021."""

import pytest

from pytest_distcheck.calc import flops as fl

DAY = 86400


def test_gpt3_training_flops_6nd():
    # 6 * 175e9 * 300e9 = 3.15e23; Brown et al. 2020 Table D.1 lists 3.14e23
    c = fl.training_flops(175e9, 300e9)
    assert c == pytest.approx(3.15e23)
    assert c == pytest.approx(3.14e23, rel=0.01)
    assert fl.forward_flops_per_token(175e9) == pytest.approx(3.5e11)


@pytest.mark.parametrize(
    ("layers", "hidden", "published_b"),
    [
        # Narayanan et al. 2021 Table 1 with V = 51200, s = 2048, Eq. (2)
        (96, 12288, 174.6),
        (80, 12288, 145.6),
        (128, 25600, 1008.0),
        (24, 2304, 1.7),
    ],
)
def test_gpt_params_eq2(layers, hidden, published_b):
    assert round(fl.gpt_params(layers, hidden, 51200, 2048) / 1e9, 1) == published_b


def test_flops_per_iteration_eq3_by_hand():
    # F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)); B=1536, s=2048, l=96, h=12288, V=51200
    b, s, l, h, v = 1536, 2048, 96, 12288, 51200  # noqa: E741
    expected = 96 * b * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))
    assert fl.gpt_flops_per_iteration(b, s, l, h, v) == pytest.approx(expected)
    # close to 8 x (tokens per batch) x params, the basis of Eq. (4)
    assert expected == pytest.approx(8 * b * s * fl.gpt_params(l, h, v, s), rel=0.05)


def test_training_days_eq4():
    # sec. 5.1: GPT-3 (P=175e9, T=300e9) on 1024 A100s at 140 TFLOP/s -> about 34 days
    assert round(fl.megatron_training_seconds(300e9, 175e9, 1024, 140e12) / DAY) == 34
    # 1T model (1008e9 params) on 450e9 tokens, 3072 GPUs at 163 TFLOP/s -> about 84 days
    assert round(fl.megatron_training_seconds(450e9, 1008e9, 3072, 163e12) / DAY) == 84


def test_training_seconds_6nd_by_hand():
    # 1e9 params, 1e10 tokens = 6e19 FLOPs; 8 GPUs at 1e14 FLOP/s -> 75,000 s
    assert fl.training_seconds(1e9, 1e10, 8, 1e14) == pytest.approx(75_000)


def test_ridge_and_decode_bound():
    # H100 SXM: 989e12 FLOP/s, 3.35e12 B/s -> ~295 FLOP/byte
    assert round(fl.ridge_point_flops_per_byte(989e12, 3.35e12)) == 295
    # 7B bf16 = 14e9 bytes / 3.35e12 B/s = 4.179 ms
    assert fl.decode_seconds_per_token_lower_bound(14e9, 3.35e12) == pytest.approx(4.179e-3, rel=1e-3)


def test_tp_decode_speedup_with_allreduce_latency():
    # 14e9 B weights, 2e12 B/s: 7 ms on one GPU. TP=2: 3.5 ms + 32 layers * 2 * 20 us = 1.28 ms -> 4.78 ms
    t2 = fl.tp_decode_seconds_per_token(14e9, 2e12, 2, 32, 20e-6)
    assert t2 == pytest.approx(3.5e-3 + 1.28e-3)
    assert fl.tp_decode_speedup(14e9, 2e12, 2, 32, 20e-6) == pytest.approx(7e-3 / 4.78e-3)
    # zero latency gives the ideal speedup t; t = 1 is 1
    assert fl.tp_decode_speedup(14e9, 2e12, 4, 32, 0.0) == pytest.approx(4.0)
    assert fl.tp_decode_speedup(14e9, 2e12, 1, 32, 1e-3) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: fl.training_flops(0, 1e9),
        lambda: fl.gpt_params(0, 10, 10, 10),
        lambda: fl.tp_decode_seconds_per_token(1e9, 1e12, 0, 32, 1e-5),
        lambda: fl.tp_decode_seconds_per_token(1e9, 1e12, 2, 32, -1e-5),
        lambda: fl.decode_seconds_per_token_lower_bound(1e9, 0),
    ],
)
def test_bad_input(call):
    with pytest.raises(ValueError):
        call()
