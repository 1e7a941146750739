"""Cost of a run: hand computations of price x GPUs x billed time under the providers' billing rules."""

import math

import pytest

from pytest_distcheck.calc import cost


def test_per_second_billing_by_hand():
    # $2.00/GPU-hr x 2 GPUs x 90 s / 3600 = $0.10 (RunPod pods: per second, no minimum)
    r = cost.run_cost(2.0, 2, 90.0)
    assert r.billed_s == 90.0
    assert r.gpu_hours == pytest.approx(0.05)
    assert r.usd == pytest.approx(0.10)
    assert cost.run_cost_usd(2.0, 2, 90.0) == pytest.approx(0.10)


def test_partial_second_rounds_up():
    assert cost.billed_seconds(90.2, 1.0) == 91.0
    assert cost.billed_seconds(120.0000000001, 1.0) == 120.0  # float noise is not an extra second


def test_sixty_second_minimum():
    # AWS EC2 Linux (2017-10-02): per second, 60 s minimum. A 10 s run bills 60 s.
    assert cost.billed_seconds(10.0, *cost.PER_SECOND_MIN_60) == 60.0
    assert cost.billed_seconds(61.5, *cost.PER_SECOND_MIN_60) == 62.0
    assert cost.billed_seconds(0.0, *cost.PER_SECOND_MIN_60) == 60.0
    # $3/GPU-hr, 1 GPU, 10 s -> 60 s billed -> $0.05
    assert cost.run_cost_usd(3.0, 1, 10.0, *cost.PER_SECOND_MIN_60) == pytest.approx(0.05)


def test_hourly_billing():
    # 61 minutes on hourly billing is 2 hours: $1.50 x 4 GPUs x 2 h = $12
    assert cost.run_cost_usd(1.5, 4, 61 * 60, *cost.HOURLY) == pytest.approx(12.0)


def test_max_runtime_for_a_budget():
    # $3 at $2.00/GPU-hr on 2 GPUs: $4/hr -> 0.75 h = 2700 s
    assert cost.max_runtime_s(3.0, 2.0, 2) == pytest.approx(2700.0)
    # per-minute granularity floors to a whole minute: $1 at $7/hr -> 514.28 s -> 480 s
    assert cost.max_runtime_s(1.0, 7.0, 1, 60.0) == 480.0
    # the 60 s minimum costs more than a $0.01 budget at $3/hr ($0.05)
    assert cost.max_runtime_s(0.01, 3.0, 1, *cost.PER_SECOND_MIN_60) == 0.0
    assert cost.max_runtime_s(1.0, 0.0, 1) == math.inf


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((-1.0, 1, 10.0), "price_per_gpu_hour_usd"),
        ((1.0, 0, 10.0), "gpus"),
        ((1.0, 1.5, 10.0), "gpus"),
        ((1.0, 1, -5.0), "runtime_s"),
        ((1.0, 1, 5.0, 0.0), "granularity_s"),
        ((1.0, 1, 5.0, 1.0, -1.0), "minimum_s"),
    ],
)
def test_bad_input_names_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        cost.run_cost(*args)
