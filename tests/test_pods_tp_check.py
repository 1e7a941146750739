"""The paid TP check (checks/test_tp_speedup_gpu.py) end to end, without paying: against the fake
RunPod API (a real SSH server on loopback, torchrun on CPU with gloo), and with the local provider on
a machine that says it has 2 GPUs. Both bring the result JSON and PNG back into the workspace."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from fake_runpod.fixtures import fake, pod_dir  # noqa: F401 - fixtures

from pytest_distcheck.budget.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]
TINY = "--preset cpu --batch-sizes 1 --prompt-lens 8 --new-tokens 2 --warmup 0 --reps 1"


def _workspace(root: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "results")
    shutil.copytree(REPO / "experiments" / "tp_inference", root / "experiments" / "tp_inference", ignore=skip)
    shutil.copy2(REPO / "experiments" / "__init__.py", root / "experiments" / "__init__.py")
    shutil.copy2(REPO / "checks" / "test_tp_speedup_gpu.py", root / "checks" / "test_tp_speedup_gpu.py")
    with (root / "checks" / "distcheck.toml").open("a") as f:
        f.write(f'\n[tp_inference]\nresults_dir = "experiments/tp_inference/results"\npod_args = "{TINY}"\n')


def _check_results(root: Path, provider: str) -> None:
    rows = Ledger(root / "ledger.md", root / ".distcheck" / "budget.lock").read()
    assert [(r.status, r.provider, r.experiment) for r in rows] == [
        ("open", provider, "tp-inference"), ("started", provider, "tp-inference"),
        ("settled", provider, "tp-inference")]
    (result,) = sorted((root / "experiments" / "tp_inference" / "results").glob("*.json"))
    data = json.loads(result.read_text())
    assert data["run_id"] == rows[0].run_id
    assert (result.parent / data["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {m["tp"] for m in data["measurements"]} == {1, 2}


def test_paid_check_on_the_fake_runpod(pod_dir, fake):  # noqa: F811
    _workspace(pod_dir.path)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-m", "gpu", "-p", "no:cacheprovider",
                                          "checks/test_tp_speedup_gpu.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*TP speedup on 2 GPUs*", "*commit them: git add experiments/tp_inference/results/*"])
    _check_results(pod_dir.path, "runpod")
    assert fake.wait_until(lambda: not fake.live_pods(), 20)
    (pod,) = fake.pods
    assert pod.gpu_count == 2 and pod.input["gpuTypeId"] == "NVIDIA GeForce RTX 4090"


def test_paid_check_with_the_local_provider_costs_nothing(pod_dir, monkeypatch, tmp_path):  # noqa: F811
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"  # SYNTHETIC: stands in for a machine with 2 GPUs
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\necho 'GPU 1: Fake GPU (UUID: GPU-1)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), os.path.dirname(sys.executable), os.environ["PATH"]]))
    monkeypatch.delenv("RUNPOD_API_KEY")
    _workspace(pod_dir.path)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-m", "gpu", "--gpu-provider", "local",
                                          "-p", "no:cacheprovider", "checks/test_tp_speedup_gpu.py")
    result.assert_outcomes(passed=1)
    _check_results(pod_dir.path, "local")
    rows = Ledger(pod_dir.path / "ledger.md", pod_dir.path / ".distcheck" / "budget.lock").read()
    assert all(r.cost == 0 for r in rows) and rows[0].gpu_type == "local Fake GPU"
