"""``distcheck rehearse``: the whole paid path for free, before paying for it.

Pricing, reservation, ledger rows, pod create, SSH, staging, the pod preflight, the experiment,
copy-back, termination, settlement and the DoD table run exactly as under ``pytest -m gpu --max-usd
3``, against the bundled fake RunPod API (:mod:`pytest_distcheck.pods.fake`, the real runpod SDK
pointed at it) whose "pods" are this machine reached over real SSH.

Design decisions (why; the test that pins each is ``tests/test_rehearse.py``):

- A scratch copy: the workspace root is copied (without VCS, virtual environments and caches) to a new
  temporary folder and everything runs there, so the learner's ledger, results and caches are never
  written (the test hashes the workspace before and after). It is kept for the learner to look at; the
  summary ends with its path and the ``rm -rf`` that removes it (with the fake API's files beside it), and
  says the DoD table's git hints are about the copy, which is no git repository, not the learner's.
- The fake API is started in this process on 127.0.0.1 and the run is a child ``pytest`` with
  ``RUNPOD_API_BASE_URL`` pointing at it, a made-up key and ``DISTCHECK_REHEARSAL=1``; the plugin
  accepts that flag only while the API is on loopback (``pods/plugin.py``), so no real paid run can
  be a rehearsal and a rehearsal can never spend real money.
- In a rehearsal the paid check runs the CPU preset with gloo and records the preflight's misses as
  what the rehearsal could not cover instead of stopping (``checks/test_tp_speedup_gpu.py``).
- It ends with the DoD table of the items a paid run completes (those whose ``how`` runs ``-m gpu``),
  marked REHEARSAL, then a summary: covered steps, and what a rehearsal cannot cover (what the
  preflight found missing here, real prices and capacity, the image on a real host).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MAX_USD = "3"  # the ceiling the lab's paid command gives (pytest -m gpu --max-usd 3)
SKIP = shutil.ignore_patterns(".git", ".hg", ".venv", "venv", ".tox", "__pycache__", "*.pyc", ".pytest_cache",
                              ".distcheck", "build", "dist", "*.egg-info", "node_modules", ".mypy_cache",
                              ".ruff_cache")
COVERED = ("pricing (the fake API's GPU prices, through the real runpod SDK)", "reservation and ledger rows",
           "pod create, wait and SSH (real SSH to this machine)", "staging the lab", "the pod preflight",
           "the experiment (CPU preset, gloo)", "copy-back of the result", "termination and settlement",
           "the DoD table")
NOT_COVERED = ("real prices, capacity and how long a real pod takes to start",
               "the image on a real host (driver, CUDA, its torch)",
               "NCCL on GPUs, CUDA-event timing and the gpu preset's memory")


def scratch_copy(root: Path) -> Path:
    """A copy of the workspace ``root`` in a new temporary folder (without VCS, venvs, caches); its path."""
    dest = Path(tempfile.mkdtemp(prefix="distcheck-rehearsal-")) / root.name
    shutil.copytree(root, dest, ignore=SKIP, symlinks=True)
    return dest


def paid_items(ws: Any) -> list[str]:
    """Ids of the items a paid run completes: their ``how`` runs ``pytest -m gpu``."""
    return [it.id for it in ws.items if "-m gpu" in it.how]


def rehearsal_results(root: Path, results_dir: str) -> list[dict[str, Any]]:
    """Results in the scratch copy whose preflight says they came from a rehearsal."""
    out = []
    for path in sorted((root / results_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and (data.get("preflight") or {}).get("rehearsal") is True:
            out.append(data)
    return out


def _rows(root: Path, ledger: str | None) -> list[Any]:
    from pytest_distcheck.budget.ledger import Ledger

    if not ledger or not (root / ledger).is_file():
        return []
    return Ledger(root / ledger, root / ".distcheck" / "budget.lock").read()


def rehearse(config: Path) -> int:
    """Run the rehearsal for the workspace file ``config``, printing as it goes. Returns the exit status
    (0: the paid path passed end to end and no fake pod was left; else non-zero)."""
    from pytest_distcheck.pods.fake import FakeRunPod
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(config)
    root = ws.root.resolve()
    scratch = scratch_copy(root)
    rel_config = Path(config).resolve().relative_to(root)
    say = lambda text: print(text, flush=True)  # noqa: E731, T201
    say(f"distcheck rehearse: REHEARSAL of the paid path in a scratch copy {scratch} against the bundled fake "
        "RunPod API; nothing is paid and your workspace is not written")
    ledger = ws.section("budget").get("ledger")
    before = {r.row_hash or (r.run_id, r.status, r.line) for r in _rows(scratch, ledger)}
    key = "rehearsal-" + secrets.token_hex(8)
    with FakeRunPod(scratch.parent / "fake-runpod", api_key=key) as fake:
        env = {**os.environ, "RUNPOD_API_BASE_URL": fake.url, "DISTCHECK_RUNPOD_REST_URL": fake.url + "/v1",
               "RUNPOD_API_KEY": key, "DISTCHECK_REHEARSAL": "1",
               "XDG_CACHE_HOME": str(scratch.parent / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        for name in ("DISTCHECK_MAX_USD", "DISTCHECK_GPU_PROVIDER", "PYTEST_ADDOPTS"):
            env.pop(name, None)
        base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--workspace", str(rel_config)]
        paid = subprocess.run([*base, "-m", "gpu", "--max-usd", MAX_USD], cwd=scratch, env=env, check=False)
        items = paid_items(ws)
        if items:
            subprocess.run([*base, *[a for i in items for a in ("--dod", i)]], cwd=scratch, env=env, check=False)
        live = [p.id for p in fake.live_pods()]
    new = [r for r in _rows(scratch, ledger) if (r.row_hash or (r.run_id, r.status, r.line)) not in before]
    results_dir = str(ws.section("tp_inference").get("results_dir", "experiments/tp_inference/results"))
    missed = [p for r in rehearsal_results(scratch, results_dir) for p in r["preflight"].get("problems", [])]
    say("=" * 30 + " REHEARSAL summary " + "=" * 30)
    say(f"paid path: {'PASSED end to end' if paid.returncode == 0 else f'FAILED (pytest exit {paid.returncode})'} "
        "against the fake RunPod API; $0 paid")
    say("ledger rows written in the scratch copy (not yours): "
        + (", ".join(f"{r.status} {r.run_id} ${r.cost}" for r in new) or "none"))
    say("pods left on the fake API: " + (", ".join(live) if live else "none"))
    say("covered: " + "; ".join(COVERED))
    say("not covered by a rehearsal: " + "; ".join([*dict.fromkeys(missed), *NOT_COVERED]))
    say("the DoD table's -> lines are about the scratch copy (not a git repository): none is for you; after the real "
        "run, your own table names what to commit")
    say(f"next, for real: pytest -m gpu --max-usd {MAX_USD}")
    say(f"scratch copy kept at {scratch} (its ledger rows and result, to look at); remove it with: "
        f"rm -rf {shlex.quote(str(scratch.parent))}")
    return paid.returncode or (1 if live else 0)
