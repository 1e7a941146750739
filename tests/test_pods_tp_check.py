"""The paid TP check (checks/test_tp_speedup_gpu.py) end to end, without paying: against the fake
RunPod API (a real SSH server on loopback; the "pod" is this CPU-only machine) and with the local
provider on a machine that says it has 2 GPUs. A paid run there stops at the pod preflight with a
settled ledger row and writes nothing. The rehearsal of the same path (gloo on the CPU, a result
marked as a rehearsal) is tested through `distcheck rehearse` in tests/test_rehearse.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from pods_support import REPO, STEPS, tp_check_workspace

from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.pods.fake.fixtures import fake, pod_dir  # noqa: F401 - fixtures
from pytest_distcheck.pods.plugin import REHEARSAL_ONLY
from pytest_distcheck.pods.preflight import CUDA_NOT_AVAILABLE, FAILED_PREFLIGHT, MISS, NO_GPU_VISIBLE

NO_CUDA = CUDA_NOT_AVAILABLE.format(version="*", cuda="*", driver="*")


def _rows(root: Path):
    return Ledger(root / "ledger.md", root / ".distcheck" / "budget.lock").read()


def _settled(root: Path, provider: str) -> None:
    rows = _rows(root)
    reconciled = [("reconciled", provider, "tp-inference")] if provider == "runpod" else []  # RunPod's bill
    assert [(r.status, r.provider, r.experiment) for r in rows] == [
        ("open", provider, "tp-inference"), ("started", provider, "tp-inference"),
        ("settled", provider, "tp-inference"), *reconciled]


def test_paid_run_on_a_cpu_only_pod_stops_at_preflight(pod_dir, fake):  # noqa: F811
    tp_check_workspace(pod_dir.path)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-m", "gpu", "-p", "no:cacheprovider", "-s",
                                          "checks/test_tp_speedup_gpu.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(STEPS[:5] + ["*: running preflight: GPUs, driver, torch, NCCL all-reduce, free memory*",
                                             "*: terminating pod *", "*: pod * terminated; settled * s x $1.18/h = $*"])
    result.stdout.fnmatch_lines(["*PreflightFailed: " + FAILED_PREFLIGHT.split("\n")[0].format(pod="*"),
                                 "*" + MISS.format(miss=NO_GPU_VISIBLE.format(error="nvidia-smi not found")),
                                 "*" + MISS.format(miss=NO_CUDA)])
    _settled(pod_dir.path, "runpod")
    assert fake.wait_until(lambda: not fake.live_pods(), 20)
    (pod,) = fake.pods
    assert not [c for c in fake.ssh_commands(pod) if "torchrun" in c]  # the experiment never started
    assert not (pod_dir.path / "experiments" / "tp_inference" / "results").exists()
    assert "TP speedup on 2 GPUs" not in result.stdout.str()


def test_rehearsal_flag_is_refused_against_a_real_api(pytester, monkeypatch):
    monkeypatch.setenv("DISTCHECK_REHEARSAL", "1")
    monkeypatch.setenv("RUNPOD_API_BASE_URL", "https://api.runpod.io")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*" + REHEARSAL_ONLY.format(env="DISTCHECK_REHEARSAL", host="api.runpod.io")])


def test_paid_run_with_the_local_provider_stops_at_preflight_at_no_cost(pod_dir, monkeypatch, tmp_path):  # noqa: F811
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"  # SYNTHETIC: stands in for a machine with 2 GPUs that torch cannot use
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\necho 'GPU 1: Fake GPU (UUID: GPU-1)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), os.path.dirname(sys.executable), os.environ["PATH"]]))
    monkeypatch.delenv("RUNPOD_API_KEY")
    tp_check_workspace(pod_dir.path)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-m", "gpu", "--gpu-provider", "local",
                                          "-p", "no:cacheprovider", "checks/test_tp_speedup_gpu.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*" + FAILED_PREFLIGHT.split("\n")[0].format(pod="*"),
                                 "*" + MISS.format(miss=NO_CUDA)])
    _settled(pod_dir.path, "local")
    rows = _rows(pod_dir.path)
    assert all(r.cost == 0 for r in rows) and rows[0].gpu_type == "local Fake GPU"


# -- the check's own rules, as functions --------------------------------------------------------------
@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("tp_speedup_gpu_check", REPO / "checks" / "test_tp_speedup_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(device: str, backend: str, count: int = 2, rehearsal: bool = False) -> dict:
    return {"run_id": "r1", "device": {"type": device, "count": count}, "backend": backend, "world_size": 2,
            "preflight": {"rehearsal": rehearsal, "problems": []}}


def test_a_paid_run_never_accepts_a_cpu_result(check):
    check.accept(_result("cuda", "nccl"), "x.json", "r1", rehearsal=False)
    for bad in (_result("cpu", "gloo"), _result("cuda", "gloo"), _result("cuda", "nccl", count=1),
                _result("cuda", "nccl", rehearsal=True)):
        with pytest.raises(pytest.fail.Exception, match="x.json"):
            check.accept(bad, "x.json", "r1", rehearsal=False)
    with pytest.raises(pytest.fail.Exception, match="run_id 'r1', expected 'r2'"):
        check.accept(_result("cuda", "nccl"), "x.json", "r2", rehearsal=False)
    check.accept(_result("cpu", "gloo", count=1, rehearsal=True), "x.json", "r1", rehearsal=True)


def test_a_committed_result_is_never_overwritten(check, tmp_path):
    dst = tmp_path / "committed.json"
    dst.write_text("committed")
    with pytest.raises(pytest.fail.Exception, match="committed.json exists already; results are never overwritten"):
        check.write_new(dst, b"new")
    assert dst.read_text() == "committed"


def test_pod_args_cannot_choose_the_backend_or_device(check):
    assert check.pod_arguments("--batch-sizes 1 --reps 2") == "--batch-sizes 1 --reps 2"
    for text in ("--backend gloo", "--device=cpu", "--preset cpu", "--out x.json", "--run-id a"):
        with pytest.raises(pytest.fail.Exception, match="pod_args may not give"):
            check.pod_arguments(text)


def test_the_gpu_preset_estimate_counts_weights_twice_kv_cache_and_logits(check):
    total, how = check.gpu_preset_bytes()
    assert 10e9 < total < 14e9  # ~1.9 B bf16 parameters: 2 x 3.8 GB + 2.3 GB + 1 GB + 1 GiB (speedup.py's comment)
    assert "2 x 3.8 GB weights + 2.3 GB KV cache (batch 32, context 544) + 1.0 GB logits + 1 GiB" in how


def test_a_paid_run_s_refusals_speak_the_language_in_use(check, tmp_path):
    from pytest_distcheck import i18n

    dst = tmp_path / "committed.json"
    dst.write_text("committed")
    i18n.use("es")
    try:
        with pytest.raises(pytest.fail.Exception, match="ya existe; los resultados nunca se sobrescriben"):
            check.write_new(dst, b"new")
        with pytest.raises(pytest.fail.Exception, match="run_id 'r1', se esperaba 'r2'"):
            check.accept(_result("cuda", "nccl"), "x.json", "r2", rehearsal=False)
    finally:
        i18n.use(i18n.DEFAULT)
