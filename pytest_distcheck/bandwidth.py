"""All-reduce bandwidth reports: the timed sweep, one row per message size, an nccl-tests-style table,
a bandwidth-vs-size plot (PNG), and validation.

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
from pytest_distcheck.i18n import N_, _
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


def allreduce_sweep(sizes_bytes: list[int] | tuple[int, ...], warmup: int, reps: int) -> list[dict[str, Any]]:
    """Time ``all_reduce`` (sum) of a float32 tensor of each size, on every rank of the current group.

    Call it on every rank (e.g. through ``dist_world.run`` or a :class:`~pytest_distcheck.ranks.pool.RankPool`)
    with ``torch.distributed`` initialised. Each timed repetition follows a barrier; a repetition's time
    is the slowest rank's, as nccl-tests reports it, so every rank returns the same rows.

    Args:
        sizes_bytes: message sizes S in bytes (multiples of 4).
        warmup: untimed all-reduces per size (connection set-up, allocator).
        reps: timed all-reduces per size.

    Returns:
        one :func:`allreduce_row` per size, in the order given.
    """
    import time

    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    rows = []
    for size in sizes_bytes:
        t = torch.ones(size // 4, dtype=torch.float32)
        for _i in range(warmup):
            dist.all_reduce(t)
        times = []
        for _i in range(reps):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        worst = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        rows.append(allreduce_row(size, "float32", worst.tolist(), world))
    return rows


def format_sweep(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width table in the style of nccl-tests' all_reduce_perf output."""
    lines = [f"{'size (B)':>12} {'count':>10} {'type':>8} {'time (us)':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"]
    for r in rows:
        lines.append(
            f"{r['size_bytes']:>12} {r['count']:>10} {r['dtype']:>8} {r['time_s_median'] * 1e6:>11.1f} "
            f"{r['algbw_gbps']:>11.3f} {r['busbw_gbps']:>11.3f}"
        )
    return "\n".join(lines)


def _size_label(size_bytes: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor} {unit}"
    return f"{size_bytes} B"


def plot_sweep(rows: list[dict[str, Any]], path: Path | str, title: str) -> Path:
    """Save a bandwidth-vs-message-size plot of the sweep rows as a PNG (matplotlib, Agg backend).

    Plots busbw and algbw (GB/s, from the median time) against size on a log2 axis, with a band from
    the fastest to the slowest repetition of busbw.

    Args:
        rows: :func:`allreduce_row` dicts (``time_s_min``/``time_s_max`` give the band).
        path: where to write the PNG (parent folders are created).
        title: the plot's title, e.g. the collective, world size, backend and host.

    Returns:
        the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = sorted(rows, key=lambda r: r["size_bytes"])
    sizes = [r["size_bytes"] for r in rows]
    factors = [r["busbw_gbps"] / r["algbw_gbps"] for r in rows]
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(sizes, [s / r["time_s_max"] / 1e9 * f for s, r, f in zip(sizes, rows, factors, strict=True)],
                    [s / r["time_s_min"] / 1e9 * f for s, r, f in zip(sizes, rows, factors, strict=True)],
                    alpha=0.2, label="busbw, fastest to slowest repetition")
    if all(math.isclose(f, 1.0) for f in factors):  # n = 2: busbw factor 2(n-1)/n is 1
        ax.plot(sizes, [r["busbw_gbps"] for r in rows], marker="o", label="busbw = algbw (median; 2(n-1)/n = 1)")
    else:
        ax.plot(sizes, [r["busbw_gbps"] for r in rows], marker="o", label="busbw (median)")
        ax.plot(sizes, [r["algbw_gbps"] for r in rows], marker="s", linestyle="--", label="algbw (median)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [_size_label(s) for s in sizes], rotation=30)
    ax.set_xlabel(f"message size per rank ({rows[0]['dtype']})")
    ax.set_ylabel("bandwidth (GB/s, GB = 1e9 B)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left")
    ax.set_title(title, fontsize=10)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def load_result(path: Path) -> dict[str, Any]:
    """Read an all-reduce result JSON file and validate it against ``allreduce-result.schema.json``.

    Raises:
        ConfigError: not JSON (with the line) or not valid (with the field path).
    """
    return load_json(path, "allreduce-result.schema.json")


# What check_sanity finds wrong in a result, after the file and field (tests import these).
EXPECTED_FOUND = N_("expected {expected}, found {found}")
SIZES_MISSING = N_("sizes missing: {missing} (found {found})")
TIMES_ORDER = N_("times must satisfy 0 < min <= median <= max, found {low}, {median}, {high}")
ALGBW = N_("expected size/time = {algbw:.6g}, found {found}")
BUSBW = N_("expected algbw*2(n-1)/n = {busbw:.6g}, found {found}")
DIVERGED = N_("expected true: DDP replicas diverged")
ABOVE_TOLERANCE = N_("expected <= {tolerance}, found {found}")
NO_BUCKETS = N_("no DDP bucket all-reduce was timed")


def check_sanity(data: dict[str, Any], path: Path | str, world_size: int, sizes_bytes: list[int]) -> None:
    """Check what a schema cannot: the run's shape and that busbw agrees with its own time and size.

    Raises:
        ConfigError: names the field and the expected and found values.
    """
    if data["world_size"] != world_size:
        raise ConfigError(path, "world_size", _(EXPECTED_FOUND).format(expected=world_size, found=data["world_size"]))
    rows = data["allreduce_sweep"]
    found = sorted(r["size_bytes"] for r in rows)
    missing = sorted(set(sizes_bytes) - set(found))
    if missing:
        raise ConfigError(path, "allreduce_sweep", _(SIZES_MISSING).format(missing=missing, found=found))
    factor = busbw_factor("all_reduce", world_size)
    for i, r in enumerate(rows):
        where = f"allreduce_sweep[{i}]"
        if not (0 < r["time_s_min"] <= r["time_s_median"] <= r["time_s_max"]):
            raise ConfigError(path, where, _(TIMES_ORDER).format(
                low=r["time_s_min"], median=r["time_s_median"], high=r["time_s_max"]))
        algbw = r["size_bytes"] / r["time_s_median"] / 1e9
        if not math.isclose(r["algbw_gbps"], algbw, rel_tol=_REL_TOL):
            raise ConfigError(path, f"{where}.algbw_gbps", _(ALGBW).format(algbw=algbw, found=r["algbw_gbps"]))
        if not math.isclose(r["busbw_gbps"], algbw * factor, rel_tol=_REL_TOL):
            raise ConfigError(path, f"{where}.busbw_gbps", _(BUSBW).format(busbw=algbw * factor, found=r["busbw_gbps"]))
    ddp = data["ddp"]
    if not ddp["params_equal_across_ranks"]:
        raise ConfigError(path, "ddp.params_equal_across_ranks", _(DIVERGED))
    if not ddp["max_abs_diff_vs_single_process"] <= ddp["tolerance"]:
        raise ConfigError(path, "ddp.max_abs_diff_vs_single_process",
                          _(ABOVE_TOLERANCE).format(tolerance=ddp["tolerance"],
                                                    found=ddp["max_abs_diff_vs_single_process"]))
    if not ddp["bucket_allreduce"]:
        raise ConfigError(path, "ddp.bucket_allreduce", _(NO_BUCKETS))
