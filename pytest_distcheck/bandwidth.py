"""All-reduce bandwidth reports: one row per message size, an nccl-tests-style table, and validation.

Formulas come from ``pytest_distcheck.calc.collectives`` (nccl-tests ``doc/PERFORMANCE.md``):
algbw = S / t and busbw = algbw * 2(n-1)/n for all-reduce, in GB/s with GB = 1e9 bytes.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from pytest_distcheck.calc.collectives import algbw_gbps, busbw_factor
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.schemas import load_json

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
# busbw is recomputed from the stored median time; allow for rounding in the stored numbers.
_REL_TOL = 1e-3


def allreduce_row(size_bytes: int, dtype: str, times_s: list[float], world_size: int) -> dict[str, Any]:
    """One sweep row from the timed repetitions of an all-reduce of ``size_bytes``.

    Args:
        size_bytes: message size S in bytes (the buffer each rank holds).
        dtype: element type name (``float32``...), which sets ``count = S / sizeof(dtype)``.
        times_s: seconds of each timed repetition (already the slowest rank's per repetition).
        world_size: ranks in the process group, n.

    Returns:
        dict with size_bytes, count, dtype, reps, time_s_median/min/max, algbw_gbps, busbw_gbps.
    """
    median = statistics.median(times_s)
    algbw = algbw_gbps(size_bytes, median)
    return {
        "size_bytes": size_bytes,
        "count": size_bytes // _DTYPE_BYTES[dtype],
        "dtype": dtype,
        "reps": len(times_s),
        "time_s_median": median,
        "time_s_min": min(times_s),
        "time_s_max": max(times_s),
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * busbw_factor("all_reduce", world_size),
    }


def format_sweep(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width table in the style of nccl-tests' all_reduce_perf output."""
    lines = [f"{'size (B)':>12} {'count':>10} {'type':>8} {'time (us)':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"]
    for r in rows:
        lines.append(
            f"{r['size_bytes']:>12} {r['count']:>10} {r['dtype']:>8} {r['time_s_median'] * 1e6:>11.1f} "
            f"{r['algbw_gbps']:>11.3f} {r['busbw_gbps']:>11.3f}"
        )
    return "\n".join(lines)


def load_result(path: Path) -> dict[str, Any]:
    """Read an all-reduce result JSON file and validate it against ``allreduce-result.schema.json``.

    Raises:
        ConfigError: not JSON (with the line) or not valid (with the field path).
    """
    return load_json(path, "allreduce-result.schema.json")


def check_sanity(data: dict[str, Any], path: Path | str, world_size: int, sizes_bytes: list[int]) -> None:
    """Check what a schema cannot: the run's shape and that busbw agrees with its own time and size.

    Raises:
        ConfigError: names the field and the expected and found values.
    """
    if data["world_size"] != world_size:
        raise ConfigError(path, "world_size", f"expected {world_size}, found {data['world_size']}")
    rows = data["allreduce_sweep"]
    found = sorted(r["size_bytes"] for r in rows)
    missing = sorted(set(sizes_bytes) - set(found))
    if missing:
        raise ConfigError(path, "allreduce_sweep", f"sizes missing: {missing} (found {found})")
    factor = busbw_factor("all_reduce", world_size)
    for i, r in enumerate(rows):
        where = f"allreduce_sweep[{i}]"
        if not (0 < r["time_s_min"] <= r["time_s_median"] <= r["time_s_max"]):
            raise ConfigError(path, where, f"times must satisfy 0 < min <= median <= max, found "
                                           f"{r['time_s_min']}, {r['time_s_median']}, {r['time_s_max']}")
        algbw = r["size_bytes"] / r["time_s_median"] / 1e9
        if not math.isclose(r["algbw_gbps"], algbw, rel_tol=_REL_TOL):
            raise ConfigError(path, f"{where}.algbw_gbps", f"expected size/time = {algbw:.6g}, found {r['algbw_gbps']}")
        if not math.isclose(r["busbw_gbps"], algbw * factor, rel_tol=_REL_TOL):
            raise ConfigError(path, f"{where}.busbw_gbps",
                              f"expected algbw*2(n-1)/n = {algbw * factor:.6g}, found {r['busbw_gbps']}")
    ddp = data["ddp"]
    if not ddp["params_equal_across_ranks"]:
        raise ConfigError(path, "ddp.params_equal_across_ranks", "expected true: DDP replicas diverged")
    if not ddp["max_abs_diff_vs_single_process"] <= ddp["tolerance"]:
        raise ConfigError(path, "ddp.max_abs_diff_vs_single_process",
                          f"expected <= {ddp['tolerance']}, found {ddp['max_abs_diff_vs_single_process']}")
    if not ddp["bucket_allreduce"]:
        raise ConfigError(path, "ddp.bucket_allreduce", "no DDP bucket all-reduce was timed")
