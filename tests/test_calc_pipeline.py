"""Pipeline bubble in both definitions: Narayanan et al. 2021 sec. 2.2 and GPipe sec. 2.3, by hand."""

import pytest

from pytest_distcheck.calc import pipeline as pl


def test_ratio_over_ideal_is_p_minus_1_over_m():
    # Narayanan et al. 2021 sec. 2.2.1: (p-1)/m. p=4, m=8 -> 3/8
    assert pl.bubble_ratio_over_ideal(4, 8) == pytest.approx(0.375)
    # naive pipeline (m = 1) idles p-1 times the work: ratio 3, above 1
    assert pl.bubble_ratio_over_ideal(4, 1) == pytest.approx(3.0)
    assert pl.bubble_ratio_over_ideal(1, 5) == 0.0


def test_fraction_of_total_is_p_minus_1_over_m_plus_p_minus_1():
    # GPipe sec. 2.3: (p-1)/(m+p-1). p=4, m=8 -> 3/11
    assert pl.bubble_fraction_of_total(4, 8) == pytest.approx(3 / 11)
    assert pl.bubble_fraction_of_total(4, 1) == pytest.approx(0.75)
    # GPipe's rule of thumb m >= 4p: p=4, m=16 -> 3/19 < 1/5
    assert pl.bubble_fraction_of_total(4, 16) < 0.2


def test_the_two_definitions_are_related_by_r_over_1_plus_r():
    for p, m, v in [(2, 3, 1), (8, 32, 1), (4, 8, 2), (8, 64, 4)]:
        r = pl.bubble_ratio_over_ideal(p, m, v)
        assert pl.bubble_fraction_of_total(p, m, v) == pytest.approx(r / (1 + r))


def test_interleaved_divides_the_bubble_by_v():
    # Narayanan et al. 2021 sec. 2.2.2: (1/v)(p-1)/m. p=4, m=8, v=2 -> 3/16
    assert pl.bubble_ratio_over_ideal(4, 8, v=2) == pytest.approx(3 / 16)
    # fraction of total: (3/2) / (8 + 3/2) = 3/19
    assert pl.bubble_fraction_of_total(4, 8, v=2) == pytest.approx(3 / 19)


def test_interleaved_needs_m_multiple_of_p_and_names_the_values():
    with pytest.raises(ValueError, match=r"m=6, p=4"):
        pl.bubble_ratio_over_ideal(4, 6, v=2)
    with pytest.raises(ValueError, match=r"m=6, p=4"):
        pl.bubble_fraction_of_total(4, 6, v=2)
    # v = 1 has no such constraint
    assert pl.bubble_ratio_over_ideal(4, 6) == pytest.approx(0.5)


@pytest.mark.parametrize("args", [(0, 4), (4, 0), (2.0, 4), (4, 4, 0), (True, 4)])
def test_bad_degrees_raise(args):
    with pytest.raises(ValueError):
        pl.bubble_ratio_over_ideal(*args)


def test_iteration_time_eq1():
    # Narayanan Eq. (1): (m+p-1)(t_f+t_b). p=4, m=8, t_f=1 ms, t_b=2 ms -> 11 * 3 ms = 33 ms
    assert pl.iteration_seconds(4, 8, 1e-3, 2e-3) == pytest.approx(0.033)
    assert pl.iteration_seconds(4, 8, 1e-3, 2e-3, v=2) == pytest.approx((8 + 1.5) * 3e-3)


def test_in_flight_microbatches():
    # sec. 2.2.1: GPipe stashes m, 1F1B at most p
    assert pl.microbatches_in_flight("gpipe", 4, 32) == 32
    assert pl.microbatches_in_flight("1F1B", 4, 32) == 4
    assert pl.microbatches_in_flight("1f1b", 4, 2) == 2
    with pytest.raises(ValueError, match="zero-bubble"):
        pl.microbatches_in_flight("zero-bubble", 4, 8)


def test_min_microbatches_for_a_target_fraction():
    # p=4, target 0.2: m >= 3 * 0.8/0.2 = 12 -> 3/15 = 0.2
    assert pl.min_microbatches_for_bubble(4, 0.2) == 12
    assert pl.bubble_fraction_of_total(4, 12) == pytest.approx(0.2)
    assert pl.bubble_fraction_of_total(4, 11) > 0.2
    # interleaved v=2: m >= 1.5 * 4 = 6, rounded up to a multiple of p=4 -> 8
    assert pl.min_microbatches_for_bubble(4, 0.2, v=2) == 8
    with pytest.raises(ValueError):
        pl.min_microbatches_for_bubble(4, 1.5)
