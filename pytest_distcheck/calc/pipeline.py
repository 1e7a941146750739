"""Pipeline-parallel bubble: two common definitions, named so they cannot be confused.

p = pipeline stages (devices), m = micro-batches per batch, v = model chunks per device (interleaved
1F1B; v = 1: GPipe/1F1B).
- ``bubble_ratio_over_ideal``: bubble time / ideal compute time = (p-1)/(v*m) (Narayanan et al. 2021,
  sec. 2.2.1-2.2.2); it can exceed 1.
- ``bubble_fraction_of_total``: bubble time / total iteration time = ((p-1)/v) / (m + (p-1)/v) (GPipe,
  Huang et al. 2019 sec. 2.3; Narayanan et al. 2021 sec. 3.4, Eq. (1)); always < 1.
GPipe and 1F1B have the same bubble; 1F1B keeps at most p micro-batches' activations in flight.
"""

from __future__ import annotations

import math

from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

SCHEDULES = ("gpipe", "1f1b", "interleaved")
STAGES = N_("p (pipeline stages)")
MICROBATCHES = N_("m (micro-batches)")
VIRTUAL = N_("v (virtual stages per device)")
INTERLEAVED_M = N_("the interleaved schedule needs the number of micro-batches m to be a multiple of the number of "
                   "stages p; got m={m}, p={p} (m % p = {remainder}) (Narayanan et al. 2021, sec. 2.2.2)")
UNKNOWN_SCHEDULE = N_("unknown schedule {schedule!r}; known: {known}")
TARGET_RANGE = N_("max_fraction_of_total must be in (0, 1), got {value!r}")


def _check(p: int, m: int, v: int) -> None:
    _whole(_(STAGES), p)
    _whole(_(MICROBATCHES), m)
    _whole(_(VIRTUAL), v)
    if v > 1 and m % p != 0:
        raise ValueError(_(INTERLEAVED_M).format(m=m, p=p, remainder=m % p))


def bubble_ratio_over_ideal(p: int, m: int, v: int = 1) -> float:
    """Bubble time over ideal compute time: (p-1)/(v*m), dimensionless.

    Narayanan et al. 2021, sec. 2.2.1 (GPipe/1F1B, v = 1) and sec. 2.2.2 (interleaved 1F1B, v > 1).
    This is the "bubble time fraction" of that paper; it is not a share of wall time and exceeds 1
    when m < p - 1.

    Raises:
        ValueError: p, m or v not whole numbers >= 1; v > 1 and m not a multiple of p.
    """
    _check(p, m, v)
    return (p - 1) / (v * m)


def bubble_fraction_of_total(p: int, m: int, v: int = 1) -> float:
    """Bubble time over total iteration time: ((p-1)/v) / (m + (p-1)/v), dimensionless, in [0, 1).

    For v = 1: (p-1)/(m+p-1) (GPipe, Huang et al. 2019, sec. 2.3; iteration time (m+p-1)(t_f+t_b),
    Narayanan et al. 2021, sec. 3.4, Eq. (1)). For v > 1 the bubble shrinks to (p-1)(t_f+t_b)/v
    (Narayanan et al. 2021, sec. 2.2.2). Equals r/(1+r) with r = :func:`bubble_ratio_over_ideal`.

    Raises:
        ValueError: as :func:`bubble_ratio_over_ideal`.
    """
    _check(p, m, v)
    bubble = (p - 1) / v
    return bubble / (m + bubble)


def iteration_seconds(p: int, m: int, t_f_s: float, t_b_s: float, v: int = 1) -> float:
    """Time of one pipelined batch, ignoring communication: (m + (p-1)/v) * (t_f + t_b) seconds.

    t_f_s, t_b_s: forward and backward time of one micro-batch on one stage (seconds).
    Source: Narayanan et al. 2021, sec. 3.4, Eq. (1) (v = 1) and sec. 2.2.2 (bubble / v).
    """
    _check(p, m, v)
    return (m + (p - 1) / v) * (t_f_s + t_b_s)


def microbatches_in_flight(schedule: str, p: int, m: int) -> int:
    """Micro-batches whose activations the first stage holds at once: GPipe m, 1F1B min(p, m).

    Narayanan et al. 2021, sec. 2.2.1 (PipeDream-Flush limits outstanding micro-batches to p).
    "interleaved" is treated as 1F1B here (the first stage's extra factor is in
    :func:`pytest_distcheck.calc.memory.first_stage_activation_bytes`).

    Raises:
        ValueError: unknown schedule or bad p, m.
    """
    _check(p, m, 1)
    key = schedule.lower()
    if key == "gpipe":
        return m
    if key in ("1f1b", "interleaved"):
        return min(p, m)
    raise ValueError(_(UNKNOWN_SCHEDULE).format(schedule=schedule, known=", ".join(SCHEDULES)))


def min_microbatches_for_bubble(p: int, max_fraction_of_total: float, v: int = 1) -> int:
    """Fewest micro-batches m (a multiple of p when v > 1) whose bubble_fraction_of_total <= the target.

    From ((p-1)/v)/(m+(p-1)/v) <= f  <=>  m >= (p-1)/v * (1-f)/f. E.g. GPipe's rule of thumb m >= 4p
    (Huang et al. 2019, sec. 2.3) keeps the fraction below 1/5.

    Raises:
        ValueError: target not in (0, 1), or bad p, v.
    """
    _whole(_(STAGES), p)
    _whole(_(VIRTUAL), v)
    if not 0 < max_fraction_of_total < 1:
        raise ValueError(_(TARGET_RANGE).format(value=max_fraction_of_total))
    step = p if v > 1 else 1
    f = max_fraction_of_total
    need = math.ceil((p - 1) / v * (1 - f) / f - 1e-9)
    return max(step, math.ceil(need / step) * step)
