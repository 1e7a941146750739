"""The price of a cloud GPU run: hourly price, GPU count, runtime and the provider's billing rules.

cost_usd = price_per_gpu_hour_usd * gpus * billed_seconds / 3600, with
billed_seconds = max(minimum_s, ceil(runtime_s / granularity_s) * granularity_s).

Billing rules are inputs; take them from the provider. Examples (for tests and docs, not defaults):
    RunPod pods: per second, no minimum (RunPod docs ``pods/pricing.mdx``) -> granularity 1 s, minimum 0 s.
    AWS EC2 Linux on-demand: per second with a 60 s minimum (AWS announcement of 2017-10-02).
    Google Cloud Compute Engine: 1-minute minimum, then per second.
    Hourly billing (some AWS AMIs / Dedicated Hosts): granularity 3600 s, minimum 3600 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_distcheck.calc._checks import NON_NEGATIVE, POSITIVE, refuse
from pytest_distcheck.calc._checks import whole as _whole

PER_SECOND = (1.0, 0.0)        # (granularity_s, minimum_s): RunPod pods
PER_SECOND_MIN_60 = (1.0, 60.0)  # AWS EC2 Linux, Google Compute Engine
HOURLY = (3600.0, 3600.0)


@dataclass(frozen=True)
class RunCost:
    """The result of :func:`run_cost`.

    Attributes:
        runtime_s: the wall time the run took, seconds.
        billed_s: the seconds the provider bills per GPU after granularity and minimum.
        gpu_hours: gpus * billed_s / 3600.
        usd: the price of the run in USD.
    """

    runtime_s: float
    billed_s: float
    gpu_hours: float
    usd: float


def billed_seconds(runtime_s: float, granularity_s: float = 1.0, minimum_s: float = 0.0) -> float:
    """Seconds billed for a run of runtime_s: max(minimum_s, ceil(runtime_s / granularity_s) * granularity_s).

    A zero runtime is still billed the minimum (a pod that started is billed). A tiny tolerance keeps
    floating-point noise (e.g. 120.0000000001 s) from adding a whole extra increment.

    Raises:
        ValueError: runtime_s < 0, granularity_s <= 0 or minimum_s < 0 (naming the value).
    """
    if runtime_s < 0:
        raise refuse(NON_NEGATIVE, "runtime_s", runtime_s)
    if not granularity_s > 0:
        raise refuse(POSITIVE, "granularity_s", granularity_s)
    if minimum_s < 0:
        raise refuse(NON_NEGATIVE, "minimum_s", minimum_s)
    increments = math.ceil(runtime_s / granularity_s - 1e-9)
    return max(float(minimum_s), increments * float(granularity_s))


def run_cost(
    price_per_gpu_hour_usd: float,
    gpus: int,
    runtime_s: float,
    granularity_s: float = 1.0,
    minimum_s: float = 0.0,
) -> RunCost:
    """Price of a run of ``gpus`` GPUs for ``runtime_s`` seconds at ``price_per_gpu_hour_usd`` USD/GPU-hour.

    Billing: see :func:`billed_seconds` (defaults: per second, no minimum).

    Raises:
        ValueError: negative price, gpus not a whole number >= 1, or a bad billing value.
    """
    if price_per_gpu_hour_usd < 0:
        raise refuse(NON_NEGATIVE, "price_per_gpu_hour_usd", price_per_gpu_hour_usd)
    _whole("gpus", gpus)
    billed = billed_seconds(runtime_s, granularity_s, minimum_s)
    gpu_hours = gpus * billed / 3600.0
    return RunCost(runtime_s=float(runtime_s), billed_s=billed, gpu_hours=gpu_hours,
                   usd=price_per_gpu_hour_usd * gpu_hours)


def run_cost_usd(
    price_per_gpu_hour_usd: float,
    gpus: int,
    runtime_s: float,
    granularity_s: float = 1.0,
    minimum_s: float = 0.0,
) -> float:
    """The USD of :func:`run_cost` (same arguments and errors)."""
    return run_cost(price_per_gpu_hour_usd, gpus, runtime_s, granularity_s, minimum_s).usd


def max_runtime_s(
    budget_usd: float,
    price_per_gpu_hour_usd: float,
    gpus: int,
    granularity_s: float = 1.0,
    minimum_s: float = 0.0,
) -> float:
    """The longest runtime (seconds, a whole number of billing increments) whose cost stays <= budget_usd.

    Returns 0.0 when even the minimum billed time costs more than the budget; ``math.inf`` for a free
    price. Raises ValueError as :func:`run_cost`, or for a negative budget.
    """
    if budget_usd < 0:
        raise refuse(NON_NEGATIVE, "budget_usd", budget_usd)
    run_cost(price_per_gpu_hour_usd, gpus, 0.0, granularity_s, minimum_s)  # validates the arguments
    if price_per_gpu_hour_usd == 0:
        return math.inf
    usd_per_s = price_per_gpu_hour_usd * gpus / 3600.0
    if minimum_s * usd_per_s > budget_usd + 1e-12:
        return 0.0
    affordable = budget_usd / usd_per_s
    return math.floor(affordable / granularity_s + 1e-9) * granularity_s
