"""experiments/tp_inference/gpu_smoke.sh (prepared for a 1-GPU machine, not yet run there): on this
CPU-only machine it must stop at its preflight, naming why, and write no result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_gpu_smoke_stops_at_preflight_without_a_gpu(tmp_path):
    out = tmp_path / "smoke"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable,
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    proc = subprocess.run(["bash", str(REPO / "experiments" / "tp_inference" / "gpu_smoke.sh")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    log = (out / "gpu-smoke.log").read_text()
    assert "gpu_smoke: preflight FAILED" in log and "- no GPU visible" in log
    assert "estimate: gpu preset at TP 1: 2 x 3.8 GB weights" in log
    assert not list(out.glob("speedup-*.json"))  # speedup.py never started
