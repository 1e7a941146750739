"""A tensor-parallel inference benchmark result (``schemas/tp-inference-result.schema.json``).

One file records, per TP degree ``t``, batch size ``b`` and prompt length ``s``, the prefill latency
and the per-token decode latency (seconds; median, min, max and every sample). Speedups are defined
from those latencies alone, so a reader (and :func:`problems`) can recompute them:

    prefill speedup(t, b, s) = median prefill_s(1, b, s) / median prefill_s(t, b, s)
    decode speedup(t, b, s)  = median decode_step_s(1, b, s) / median decode_step_s(t, b, s)

(the decode ratio equals the ratio of decode tokens/s, since tokens/s = b / decode_step_s).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from pytest_distcheck.schemas import load_json

SCHEMA = "tp-inference-result.schema.json"
SCHEMA_ID = "distcheck/tp-inference-result/1"
REL_TOL = 1e-3
"""Relative tolerance for a written figure against the one recomputed from the file (rounding allowed)."""


def summarize(samples: list[float]) -> dict[str, Any]:
    """``{"median", "min", "max", "samples"}`` of a list of seconds (all > 0).

    Raises:
        ValueError: the list is empty.
    """
    if not samples:
        raise ValueError("no samples to summarize")
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": list(samples)}


def _key(m: dict[str, Any]) -> tuple[int, int]:
    return m["batch_size"], m["prompt_len"]


def compute_speedups(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per measurement with ``tp > 1`` whose TP-1 counterpart (same ``b``, ``s``) exists.

    Returns:
        ``[{"tp", "batch_size", "prompt_len", "prefill", "decode"}]`` in the measurements' order.
    """
    base = {_key(m): m for m in measurements if m["tp"] == 1}
    out = []
    for m in measurements:
        ref = base.get(_key(m))
        if m["tp"] == 1 or ref is None:
            continue
        out.append({
            "tp": m["tp"], "batch_size": m["batch_size"], "prompt_len": m["prompt_len"],
            "prefill": ref["prefill_s"]["median"] / m["prefill_s"]["median"],
            "decode": ref["decode_step_s"]["median"] / m["decode_step_s"]["median"],
        })
    return out


def _close(a: float, b: float, rel: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def problems(result: dict[str, Any]) -> list[str]:
    """Where a schema-valid result disagrees with itself, each naming the field; ``[]`` when it agrees.

    Checks: each summary's median/min/max against its samples; ``decode_tokens_per_s`` = ``b`` /
    median decode step; ``torch_tp_decode_ratio`` (when timed) = torch's median decode step / the lab's;
    no (tp, b, s) measured twice; no TP degree above the world size; and every
    speedup entry, present and right, against :func:`compute_speedups`.
    """
    out: list[str] = []
    seen: dict[tuple[int, int, int], int] = {}
    for i, m in enumerate(result["measurements"]):
        where = f"measurements[{i}]"
        key = (m["tp"], *_key(m))
        if key in seen:
            out.append(f"{where} measures tp={key[0]}, batch_size={key[1]}, prompt_len={key[2]} again "
                       f"(first in measurements[{seen[key]}])")
        seen.setdefault(key, i)
        if m["tp"] > result["world_size"]:
            out.append(f"{where}.tp = {m['tp']} exceeds world_size {result['world_size']}")
        for name in ("prefill_s", "decode_step_s", "torch_tp_prefill_s", "torch_tp_decode_step_s"):
            if name not in m:
                continue
            s = m[name]
            want = summarize(s["samples"])
            for stat in ("median", "min", "max"):
                if not _close(s[stat], want[stat], 1e-9):
                    out.append(f"{where}.{name}.{stat} = {s[stat]:g} but its samples give {want[stat]:g}")
        if "torch_tp_decode_ratio" in m:
            ratio = m["torch_tp_decode_step_s"]["median"] / m["decode_step_s"]["median"]
            if not _close(m["torch_tp_decode_ratio"], ratio):
                out.append(f"{where}.torch_tp_decode_ratio = {m['torch_tp_decode_ratio']:g} but median "
                           f"torch_tp_decode_step_s / median decode_step_s = {ratio:g}")
        tps = m["batch_size"] / m["decode_step_s"]["median"]
        if not _close(m["decode_tokens_per_s"], tps):
            out.append(f"{where}.decode_tokens_per_s = {m['decode_tokens_per_s']:g} but batch_size / median "
                       f"decode_step_s = {tps:g}")
    want = {(s["tp"], s["batch_size"], s["prompt_len"]): s for s in compute_speedups(result["measurements"])}
    got: set[tuple[int, int, int]] = set()
    for i, s in enumerate(result["speedups"]):
        key = (s["tp"], s["batch_size"], s["prompt_len"])
        got.add(key)
        ref = want.get(key)
        if ref is None:
            out.append(f"speedups[{i}] (tp={key[0]}, batch_size={key[1]}, prompt_len={key[2]}) has no "
                       "measurement at that TP degree and at TP 1 to compute it from")
            continue
        for phase, what in (("prefill", "prefill_s"), ("decode", "decode_step_s")):
            if not _close(s[phase], ref[phase]):
                out.append(f"speedups[{i}].{phase} = {s[phase]:g} but the measurements give {ref[phase]:g} "
                           f"(median {what} at TP 1 / at TP {key[0]})")
    for key in sorted(set(want) - got):
        out.append(f"speedups has no entry for tp={key[0]}, batch_size={key[1]}, prompt_len={key[2]}, "
                   "which the measurements allow")
    return out


def load_result(path: Path | str) -> dict[str, Any]:
    """Read and schema-validate a result file (it is not checked for consistency: see :func:`problems`).

    Raises:
        ConfigError: missing, not JSON (with the line) or not a valid result (with the field path).
    """
    return load_json(path, SCHEMA)
