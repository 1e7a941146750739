"""speedup.py --torch-tp: PyTorch's parallelize_module timed beside the lab's layers, and the ratio recorded."""

from __future__ import annotations

import copy

import pytest

from pytest_distcheck.tp_result import load_result, problems

TINY = ["--batch-sizes", "1", "--prompt-lens", "8", "--new-tokens", "2", "--warmup", "0", "--reps", "2"]


def _run_speedup(argv: list[str]):
    import torch

    from experiments.tp_inference.speedup import parse_args, run

    return run(parse_args(argv), torch.device("cpu"))


@pytest.mark.world_size(2)
def test_torch_tp_is_timed_beside_the_lab_and_the_ratio_checks_out(dist_world, tmp_path):
    out = tmp_path / "r.json"
    dist_world.run(_run_speedup, [*TINY, "--torch-tp", "--out", str(out), "--run-id", "test-0002"], timeout=180)
    result = load_result(out)
    assert problems(result) == [] and result["settings"]["torch_tp"] is True
    tp1, tp2 = sorted(result["measurements"], key=lambda m: m["tp"])
    assert "torch_tp_decode_step_s" not in tp1  # TP 1 has nothing to compare
    assert len(tp2["torch_tp_decode_step_s"]["samples"]) == 2 and len(tp2["torch_tp_prefill_s"]["samples"]) == 2
    assert tp2["torch_tp_decode_ratio"] == pytest.approx(
        tp2["torch_tp_decode_step_s"]["median"] / tp2["decode_step_s"]["median"])
    assert "at the end)" in result["notes"]  # host load at start and end
    bad = copy.deepcopy(result)
    bad["measurements"][1]["torch_tp_decode_ratio"] *= 2
    assert [p for p in problems(bad) if "torch_tp_decode_ratio" in p]
