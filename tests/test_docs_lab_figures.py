"""The measured and model-derived figures the lab pages quote come from their sources (issue 21, point 3):
lab 02's CPU table and the ranges its reading quotes from the committed reference result, and the gpu
preset's parameter counts (lab 02, theory 04) from the model itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB02 = ROOT / "docs" / "lab" / "02-tp-inference-cloud.md"
LAB02_ES = ROOT / "docs" / "es" / "lab" / "02-tp-inference-cloud.md"
THEORY04 = ROOT / "docs" / "theory" / "04-distributed-inference.md"
RESULT = ROOT / "solutions" / "experiments" / "tp_inference" / "results" / "speedup-cpu-gloo-2.json"


def _flat(text: str) -> str:
    return " ".join(text.split())


def cpu_table_rows(result: dict) -> list[str]:
    """Lab 02's table of the reference CPU run, row by row, as the result's medians give it."""
    at = {(m["tp"], m["batch_size"], m["prompt_len"]): m for m in result["measurements"]}
    up = {(s["batch_size"], s["prompt_len"]): s for s in result["speedups"] if s["tp"] == 2}
    rows = []
    for (b, s), speedup in up.items():
        one, two = at[(1, b, s)], at[(2, b, s)]
        ms = lambda x: x * 1e3  # noqa: E731
        cells = [str(b), str(s), f"{ms(one['prefill_s']['median']):.1f}", f"{ms(two['prefill_s']['median']):.1f}",
                 f"{speedup['prefill']:.2f}", f"{ms(one['decode_step_s']['median']):.2f}",
                 f"{ms(two['decode_step_s']['median']):.2f}", f"{speedup['decode']:.2f}",
                 f"{ms(two['decode_allreduce_s_per_step']):.2f}", f"{ms(two['torch_tp_decode_step_s']['median']):.2f}",
                 f"{two['torch_tp_decode_ratio']:.2f}"]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _reading_figures(result: dict) -> dict:
    """The figures lab 02's reading of the CPU run quotes, recomputed from the result (both languages)."""
    at = {(m["tp"], m["batch_size"], m["prompt_len"]): m for m in result["measurements"]}
    two = [m for m in result["measurements"] if m["tp"] == 2]
    up = [s for s in result["speedups"] if s["tp"] == 2]
    allreduce = [m["decode_allreduce_s_per_step"] * 1e3 for m in two]
    tp1_step = [m["decode_step_s"]["median"] * 1e3 for m in result["measurements"] if m["tp"] == 1]
    # all-reduce time of a TP-2 decode step over the whole TP-1 step of the same configuration
    tp1 = {(b, p): m["decode_step_s"]["median"] for (t, b, p), m in at.items() if t == 1}
    share = sorted(m["decode_allreduce_s_per_step"] / tp1[(m["batch_size"], m["prompt_len"])] for m in two)
    below = sorted(s["prefill"] for s in up if s["prefill"] < 1)
    above = [s for s in up if s["prefill"] >= 1]
    load = re.search(r"load average ([\d.]+) at start, ([\d.]+) at the end", result["notes"])
    return {
        "load": (float(load[1]), float(load[2])),
        "allreduce": (min(allreduce), max(allreduce)),
        "per_allreduce": [a / two[0]["allreduces_per_forward"] for a in allreduce],
        "tp1_step": (min(tp1_step), max(tp1_step)),
        "share": share,
        "decode": sorted(s["decode"] for s in up),
        "below": below,
        "below_batches": sorted({s["batch_size"] for s in up if s["prefill"] < 1}),
        "above": [s["prefill"] for s in above],
        "above_batches": sorted({s["batch_size"] for s in above}),
        "above_tokens": [s["batch_size"] * s["prompt_len"] for s in above],
        "prefill_allreduce": sorted(m["prefill_allreduce_s"] * 1e3 for m in two),
        "ratio": sorted(m["torch_tp_decode_ratio"] for m in two),
    }


def quoted_ranges(result: dict) -> list[str]:
    """The English page's phrases with those figures."""
    f = _reading_figures(result)
    assert all(0.5 <= a <= 1.5 for a in f["per_allreduce"]), "the page says about 1 ms per all-reduce"
    assert f["share"][0] > 1 and f["decode"][-1] < 1 and f["below_batches"] == [1, 4] and f["above_batches"] == [16]
    return [
        f"(load average {f['load'][0]:.1f} at the start, {f['load'][1]:.1f} at the end, its own two ranks)",
        f"spent {f['allreduce'][0]:.1f}–{f['allreduce'][1]:.1f} ms in all-reduce",
        f"the same configuration ({f['tp1_step'][0]:.1f}–{f['tp1_step'][1]:.1f} ms) in all {len(f['share'])} "
        f"configurations, {f['share'][0]:.1f}–{f['share'][-1]:.1f} times it",
        f"(speedup {f['decode'][0]:.2f}–{f['decode'][-1]:.2f})",
        f"up to batch 4 ({f['below'][0]:.2f}–{f['below'][-1]:.2f})",
        f"only at batch 16 ({f['above'][0]:.2f} and {f['above'][1]:.2f})",
        f"enough tokens ({f['above_tokens'][0]:,} and {f['above_tokens'][1]:,})",
        f"all-reduces ({f['prefill_allreduce'][0]:.0f}–{f['prefill_allreduce'][-1]:.0f} ms per prefill)",
        f"took {f['ratio'][0]:.2f}–{f['ratio'][-1]:.2f}x the lab's decode step time",
    ]


def quoted_ranges_es(result: dict) -> list[str]:
    """The Spanish page's phrases with the same figures."""
    f = _reading_figures(result)
    return [
        f"(carga media {f['load'][0]:.1f} al empezar y {f['load'][1]:.1f} al final, la de sus dos ranks)",
        f"pasó de {f['allreduce'][0]:.1f} a {f['allreduce'][1]:.1f} ms en all-reduce",
        f"(de {f['tp1_step'][0]:.1f} a {f['tp1_step'][1]:.1f} ms) en las {len(f['share'])} configuraciones, "
        f"entre {f['share'][0]:.1f} y {f['share'][-1]:.1f} veces",
        f"(aceleración de {f['decode'][0]:.2f} a {f['decode'][-1]:.2f})",
        f"hasta batch 4 (de {f['below'][0]:.2f} a {f['below'][-1]:.2f})",
        f"solo con batch 16 ({f['above'][0]:.2f} y {f['above'][1]:.2f})",
        f"tokens suficientes ({f['above_tokens'][0]} y {f['above_tokens'][1]})",  # 4 digits: no separator (RAE)
        f"(de {f['prefill_allreduce'][0]:.0f} a {f['prefill_allreduce'][-1]:.0f} ms por prefill)",
        f"entre {f['ratio'][0]:.2f} y {f['ratio'][-1]:.2f}x el tiempo del paso de decode",
    ]


def test_lab02_cpu_table_is_the_committed_result():
    result = json.loads(RESULT.read_text())
    text = LAB02.read_text()
    page_rows = [line.strip() for line in text.splitlines() if re.match(r"\| \d+ \| \d+ \| [\d.]+ \|", line)]
    assert page_rows == cpu_table_rows(result)
    header = (f"Run `{result['run_id']}` ({result['started_utc']}), {result['notes']}; torch "
              f"{result['versions']['torch']}; medians of {result['settings']['reps']} repetitions:")
    assert header in text


def test_lab02_reading_quotes_the_committed_result():
    result = json.loads(RESULT.read_text())
    for page, quotes in ((LAB02, quoted_ranges(result)), (LAB02_ES, quoted_ranges_es(result))):
        text = _flat(page.read_text())
        missing = [q for q in quotes if _flat(q) not in text]
        assert not missing, f"{page.name} no longer quotes the reference result as it is: {missing}"


def test_the_spanish_lab02_table_is_the_committed_result():
    result = json.loads(RESULT.read_text())
    text = LAB02_ES.read_text()
    assert [line.strip() for line in text.splitlines() if re.match(r"\| \d+ \| \d+ \| [\d.]+ \|", line)] \
        == cpu_table_rows(result)
    assert f"Ejecución `{result['run_id']}` ({result['started_utc']})" in text


def test_gpu_preset_counts_on_the_pages_are_the_models():
    """1_610_907_648 parameters in the blocks' TP-split linear layers, 131_072_000 in the LM head, 1.875 B in
    all: the figures theory 04 and lab 02 compute with (counted on the meta device, no memory)."""
    import torch

    from experiments.tp_inference.model import GPT
    from experiments.tp_inference.speedup import PRESETS

    with torch.device("meta"):
        model = GPT(PRESETS["gpu"]["model"])
    split = sum(p.numel() for m in model.blocks.modules() if isinstance(m, torch.nn.Linear) for p in m.parameters())
    head = model.lm_head.weight.numel()
    total = sum(p.numel() for p in model.parameters())
    assert (split, head, round(total / 1e9, 3)) == (1_610_907_648, 131_072_000, 1.875)
    for page in (LAB02, THEORY04):
        text = page.read_text()
        assert f"{split:_}" in text and f"{head:_}" in text, page.name
    assert "1.875 B parameters" in _flat(THEORY04.read_text()) and "1.875 B-parameter" in LAB02.read_text()
    assert f"({split / 1e9:.2f} B parameters, {2 * split / 1e9:.2f} GB in bf16)" in _flat(LAB02.read_text())
    assert f"LM head ({head / 1e6:.0f} M parameters, {2 * head / 1e9:.2f} GB)" in _flat(LAB02.read_text())


def test_lab01_quotes_the_reference_ddp_run():
    result = json.loads((ROOT / "solutions" / "experiments" / "ddp_cpu" / "results" / "allreduce-cpu.json").read_text())
    sweep = result["allreduce_sweep"]
    small = [r["time_s_min"] * 1e3 for r in sweep if r["size_bytes"] <= 64 * 1024]
    large = [r["busbw_gbps"] for r in sweep if r["size_bytes"] >= 4 * 1024 * 1024]
    text = _flat((ROOT / "docs" / "lab" / "01-ddp-on-cpu.md").read_text())
    assert f"took {min(small):.2f}–{max(small):.2f} ms in the reference run" in text
    assert f"({min(large):.2f}–{max(large):.2f} GB/s from 4 MiB up in that run)" in text
    median = {r["size_bytes"]: r["time_s_median"] * 1e3 for r in sweep}
    kib = 1024
    assert (f"medians at 4 KiB and 256 KiB, {median[4 * kib]:.2f} and {median[256 * kib]:.2f} ms, are "
            f"{median[4 * kib] / median[16 * kib]:.1f} and {median[256 * kib] / median[64 * kib]:.1f} times the 16 KiB "
            "and 64 KiB medians") in text


def test_lab02_cpu_preset_size_and_run_time_are_the_results():
    from datetime import datetime

    result = json.loads(RESULT.read_text())
    text = _flat(LAB02.read_text())
    assert f"(preset `cpu`: {result['model']['parameters'] / 1e6:.1f} M parameters, float32)" in text
    start, end = (datetime.fromisoformat(result[k].replace("Z", "+00:00")) for k in ("started_utc", "finished_utc"))
    minutes, seconds = divmod(round((end - start).total_seconds()), 60)
    took = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    assert f"took {took} on a quiet machine" in text
    assert f"tardó {took} en una máquina tranquila" in _flat(LAB02_ES.read_text())


def test_the_gpu_preset_memory_on_lab02_is_the_checks_estimate():
    """About 12 GB: 2 x 3.75 GB of weights + 2.3 GB of KV cache + 1 GB of logits + 1 GiB, as the paid check
    computes it before renting (checks/test_tp_speedup_gpu.py, gpu_preset_bytes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tp_check", ROOT / "checks" / "test_tp_speedup_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    total, how = module.gpu_preset_bytes()
    parts = {name: value for value, name in re.findall(r"([\d.]+) GB (KV cache|logits)", how)}
    text = _flat(LAB02.read_text())
    assert (f"(about {total / 1e9:.0f} GB: twice the 3.75 GB of bf16 weights at TP 1, the dense model and its TP-1 "
            f"copy, plus {parts['KV cache']} GB of KV cache at batch 32, {float(parts['logits']):.0f} GB of logits "
            "and 1 GiB for the CUDA context") in text
