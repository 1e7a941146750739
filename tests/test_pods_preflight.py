"""The pod preflight (pytest_distcheck.pods.preflight): the probe's facts on this CPU-only machine, and
what problems() makes of synthetic facts of fit and unfit GPU pods."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from pytest_distcheck.pods.base import Pod, RunResult
from pytest_distcheck.pods.preflight import (
    ALLREDUCE_FAILED,
    CUDA_NOT_AVAILABLE,
    DRIVER_SUPPORTS,
    FAILED_PREFLIGHT,
    GIB,
    MISS,
    NO_FACTS,
    NO_GPU_VISIBLE,
    NOT_REPORTED,
    TOO_FEW_GPUS,
    TOO_LITTLE_FREE,
    TORCH_DEVICES,
    TORCH_NOT_IMPORTED,
    TORCH_TOO_OLD,
    Expect,
    PreflightFailed,
    parse,
    probe_command,
    problems,
    run_preflight,
    summary,
)

# SYNTHETIC: the facts a fit 2 x RTX 4090 pod would report (shapes as the probe writes them).
FIT = {
    "python": "3.11.10", "host": "pod",
    "nvidia_smi": {"driver_cuda": "12.8", "gpus": [
        {"index": i, "name": "NVIDIA GeForce RTX 4090", "driver": "570.124.06", "total_bytes": 24 * GIB,
         "free_bytes": 23 * GIB} for i in range(2)]},
    "torch": {"version": "2.8.0+cu128", "cuda": "12.8", "available": True, "count": 2, "nccl": "2.27.3",
              "devices": [{"index": i, "name": "NVIDIA GeForce RTX 4090", "free_bytes": 23 * GIB,
                           "total_bytes": 24 * GIB} for i in range(2)]},
    "allreduce": {"backend": "nccl", "ranks": 2, "ok": True},
}
EXPECT = Expect(gpus=2, min_free_bytes=12 * GIB, need="the gpu preset at TP 1")


def _edit(path: str, value):
    facts = copy.deepcopy(FIT)
    *keys, last = path.split(".")
    node = facts
    for k in keys:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[int(last) if isinstance(node, list) else last] = value
    return facts


def test_problems_of_a_fit_pod_are_none():
    assert problems(FIT, EXPECT) == []
    assert summary(FIT) == ("2 x NVIDIA GeForce RTX 4090, driver 570.124.06 (CUDA 12.8), torch 2.8.0+cu128 "
                            "(CUDA 12.8, available), NCCL 2.27.3, all-reduce ok")


@pytest.mark.parametrize("path, value, message", [
    ("nvidia_smi", {"error": "nvidia-smi not found"}, NO_GPU_VISIBLE.format(error="nvidia-smi not found")),
    ("nvidia_smi.gpus", FIT["nvidia_smi"]["gpus"][:1],
     TOO_FEW_GPUS.format(n=1, names="NVIDIA GeForce RTX 4090", gpus=2)),
    ("torch.version", "2.4.1+cu124", TORCH_TOO_OLD.format(version="2.4.1+cu124", min="2.5")),
    ("torch.available", False, CUDA_NOT_AVAILABLE.format(version="2.8.0+cu128", cuda="12.8",
                                                         driver=DRIVER_SUPPORTS.format(cuda="12.8"))),
    ("torch.count", 1, TORCH_DEVICES.format(n=1, gpus=2)),
    ("allreduce", {"backend": "nccl", "ranks": 2, "ok": False, "error": "NCCL error: unhandled system error"},
     ALLREDUCE_FAILED.format(ranks=2, nccl="2.27.3", error="NCCL error: unhandled system error")),
    ("torch.devices.1.free_bytes", 10 * GIB, TOO_LITTLE_FREE.format(index=1, name="NVIDIA GeForce RTX 4090", free=10,
                                                                    need_gib=12, need="the gpu preset at TP 1")),
    ("torch", {"error": "ModuleNotFoundError('torch')"},
     TORCH_NOT_IMPORTED.format(error="ModuleNotFoundError('torch')")),
])
def test_problems_name_each_miss(path, value, message):
    assert problems(_edit(path, value), EXPECT) == [message]


def test_problems_of_missing_facts_are_misses_too():
    assert problems({}, EXPECT)[:2] == [NO_GPU_VISIBLE.format(error=NOT_REPORTED),
                                        TORCH_NOT_IMPORTED.format(error=NOT_REPORTED)]


def test_probe_on_this_machine_reports_no_gpu(tmp_path):
    env = {"PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]), "HOME": str(tmp_path)}
    out = subprocess.run(["bash", "-c", probe_command(2)], capture_output=True, text=True, env=env, timeout=120)
    facts = parse(out.stdout.splitlines())
    assert facts is not None, out.stdout + out.stderr
    import torch

    assert facts["torch"]["version"] == torch.__version__ and facts["torch"]["available"] is False
    assert facts["allreduce"] == {"skipped": "no CUDA device usable by torch"}
    assert problems(facts, EXPECT)[0].startswith("no GPU visible")


class _Pod(Pod):
    id, name = "pod-1", "distcheck-x"

    def __init__(self, lines: list[str], status: int = 0) -> None:
        self.lines, self.status, self.commands = lines, status, []

    def put(self, local, remote):  # pragma: no cover - not used
        raise AssertionError

    def get(self, remote, local):  # pragma: no cover - not used
        raise AssertionError

    def run(self, command, timeout, on_output=None):
        self.commands.append(command)
        for line in self.lines:
            on_output(line + "\n")
        return RunResult(self.status, 1.0, self.lines[-3:])


def test_run_preflight_raises_naming_every_miss_unless_rehearsing():
    import json

    bad = _edit("torch.available", False)
    pod = _Pod(["noise", "DISTCHECK-PREFLIGHT " + json.dumps(bad)])
    with pytest.raises(PreflightFailed) as err:
        run_preflight(pod, EXPECT)
    assert str(err.value) == FAILED_PREFLIGHT.format(pod="pod-1", misses="\n".join(
        MISS.format(miss=p) for p in err.value.problems))
    assert err.value.problems[0].startswith("torch.cuda.is_available() is False")
    assert err.value.facts["problems"] == err.value.problems
    facts = run_preflight(pod, EXPECT, rehearsal=True)
    assert facts["rehearsal"] is True and facts["problems"][0].startswith("torch.cuda.is_available() is False")
    assert run_preflight(_Pod(["DISTCHECK-PREFLIGHT " + json.dumps(FIT)]), EXPECT)["problems"] == []
    with pytest.raises(PreflightFailed) as err:
        run_preflight(_Pod(["bash: python3: not found"], status=127), EXPECT, rehearsal=True)
    assert err.value.problems == [NO_FACTS.format(status=127, tail="bash: python3: not found")]
