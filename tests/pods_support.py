"""Shared by the paid TP check's tests and `distcheck rehearse`'s: the workspace that check runs in, and
the status-line steps a pod goes through."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = "--batch-sizes 1 --prompt-lens 8 --new-tokens 2 --warmup 0 --reps 1"

# The status line's steps, one plain line each (pytester is not a terminal), in order.
STEPS = ["distcheck pods: 2 x NVIDIA GeForce RTX 4090 (runpod): creating distcheck-*",
         "distcheck pods: 2 x * (runpod): waiting for fake* s since create, $* so far*",
         "distcheck pods: 2 x * (runpod): ready: SSH 127.0.0.1:*",
         "distcheck pods: 2 x * (runpod): ready: pod *, run *",
         "distcheck pods: 2 x * (runpod): staging stage -> pod:code *"]


def tp_check_workspace(root: Path) -> None:
    """Add to the workspace at ``root`` the TP lab's code, the paid TP check and its tiny sweep settings."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "results")
    shutil.copytree(REPO / "experiments" / "tp_inference", root / "experiments" / "tp_inference", ignore=skip)
    shutil.copy2(REPO / "experiments" / "__init__.py", root / "experiments" / "__init__.py")
    shutil.copy2(REPO / "checks" / "test_tp_speedup_gpu.py", root / "checks" / "test_tp_speedup_gpu.py")
    with (root / "checks" / "distcheck.toml").open("a") as f:
        f.write(f'\n[tp_inference]\nresults_dir = "experiments/tp_inference/results"\npod_args = "{TINY}"\n')
