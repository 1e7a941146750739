"""``distcheck rehearse``: the whole paid path for free, before paying for it.

Pricing, reservation, ledger rows, pod create, SSH, staging, preflight, the experiment, copy-back, termination,
settlement and the DoD checks run as under ``pytest -m gpu --max-usd 3``, in a child ``pytest`` against the bundled
fake RunPod API (:mod:`pytest_distcheck.pods.fake`, started here on 127.0.0.1) whose pods are this machine over real
SSH, in a scratch copy of the workspace: the learner's files are never written, and the DoD table gives way to
:data:`NO_DOD_TABLE`. The plugin accepts ``DISTCHECK_REHEARSAL=1`` only while the API is on loopback, so a rehearsal
never spends money. Design record: docs/design/pods.md.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _

MAX_USD = "3"  # the ceiling the lab's paid command gives (pytest -m gpu --max-usd 3)
SKIP = shutil.ignore_patterns(".git", ".hg", ".venv", "venv", ".tox", "__pycache__", "*.pyc", ".pytest_cache",
                              ".distcheck", "build", "dist", "*.egg-info", "node_modules", ".mypy_cache",
                              ".ruff_cache")
COVERED = (N_("pricing (the fake API's GPU prices, through the real runpod SDK)"), N_("reservation and ledger rows"),
           N_("pod create, wait and SSH (real SSH to this machine)"), N_("staging the lab"), N_("the pod preflight"),
           N_("the experiment (CPU preset, gloo)"), N_("copy-back of the result"), N_("termination and settlement"))
# In place of the DoD table, and at the end of the child run.
NO_DOD_TABLE = N_("REHEARSAL: no Definition of Done table: it would describe the scratch copy (no git repository, "
                  "so its items read pending or blocked), not your workspace; `pytest -m local` there says where "
                  "you stand")
THIS_RUN = N_("REHEARSAL: this run is of a scratch copy of the workspace, against the bundled fake RunPod API; "
              "nothing was paid and nothing here is evidence")
STARTING = N_("distcheck rehearse: REHEARSAL of the paid path in a scratch copy {scratch} against the bundled fake "
              "RunPod API; nothing is paid and your workspace is not written")
# After Ctrl-C: while the child winds down, then what became of the fake pods and the ledger's runs.
WINDING_DOWN = N_("distcheck rehearse: Ctrl-C: waiting for the rehearsal to terminate its fake pod and settle its "
                  "ledger row, as a paid run would (Ctrl-C again stops it at once)")
INTERRUPTED = N_("distcheck rehearse: interrupted (Ctrl-C); {pods}; {runs}; nothing was paid")
NO_POD = N_("no fake pod had been created")
POD_TERMINATED = N_("fake pod {id} terminated by the run")
POD_LEFT = N_("fake pod {id} was left running and stopped with the fake API (its processes killed)")
NO_RUN = N_("no ledger row written")
RUN_SETTLED = N_("run {run_id} settled in the scratch ledger (${cost} on the fake API's bill)")
RUN_UNSETTLED = N_("run {run_id} has no settled row in the scratch ledger: the run stopped before its teardown "
                   "settled it (a second Ctrl-C, or a crash); nothing is owed, the fake API bills nobody")
KEPT = N_("scratch copy kept at {scratch} ({what}); remove it with: rm -rf {parent}")
KEPT_SO_FAR = N_("what the run got to")
KEPT_TO_LOOK_AT = N_("its ledger rows and result, to look at")
NOT_COVERED = (N_("real prices, capacity and how long a real pod takes to start"),
               N_("the image on a real host (driver, CUDA, its torch)"),
               N_("NCCL on GPUs, CUDA-event timing and the gpu preset's memory"))
# The summary's lines.
SUMMARY = N_("REHEARSAL summary")
PASSED = N_("paid path: PASSED end to end against the fake RunPod API; $0 paid")
FAILED = N_("paid path: FAILED (pytest exit {status}) against the fake RunPod API; $0 paid")
ROWS = N_("ledger rows written in the scratch copy (not yours): {rows}")
NO_ROWS = N_("ledger rows written in the scratch copy (not yours): none")
PODS_LEFT = N_("pods left on the fake API: {pods}")
NO_PODS_LEFT = N_("pods left on the fake API: none")
COVERED_LINE = N_("covered: {steps}")
NOT_COVERED_LINE = N_("not covered by a rehearsal: {steps}")
FOR_REAL = N_("next, for real: {command}")

def paid_command(environ: Mapping[str, str]) -> str:
    """The real paid run, as :data:`FOR_REAL` gives it: without a RunPod key in ``environ``, prefixed with
    setting one, as the DoD table's step says it after a run without one
    (:data:`~pytest_distcheck.pods.runpod_api.NO_KEY_STEP`)."""
    from pytest_distcheck.pods.runpod_api import API_KEY_ENV, NO_KEY_STEP

    command = f"pytest -m gpu --max-usd {MAX_USD}"
    return command if environ.get(API_KEY_ENV, "").strip() else _(NO_KEY_STEP).format(how=command)


def scratch_copy(root: Path) -> Path:
    """A copy of the workspace ``root`` in a new temporary folder (without VCS, venvs, caches); its path."""
    dest = Path(tempfile.mkdtemp(prefix="distcheck-rehearsal-")) / root.name
    try:
        shutil.copytree(root, dest, ignore=SKIP, symlinks=True)
    except BaseException:  # Ctrl-C or a full disk half-way: leave no partial copy behind
        shutil.rmtree(dest.parent, ignore_errors=True)
        raise
    return dest


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


def rehearse(config: Path, lang: str | None = None) -> int:
    """Run the rehearsal for the workspace file ``config``, printing as it goes; ``lang``: the ``--lang`` the
    command was given, passed on to the child run (else it follows the environment and the ini, as any run).
    Returns the exit status (0: the paid path passed end to end and no fake pod was left; 130: interrupted;
    else non-zero)."""
    from pytest_distcheck.pods.fake import FakeRunPod
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(config)
    root = ws.root.resolve()
    scratch = scratch_copy(root)
    rel_config = Path(config).resolve().relative_to(root)
    say = lambda text: print(text, flush=True)  # noqa: E731, T201
    say(_(STARTING).format(scratch=scratch))
    ledger = ws.section("budget").get("ledger")
    before = {r.row_hash or (r.run_id, r.status, r.line) for r in _rows(scratch, ledger)}
    key = "rehearsal-" + secrets.token_hex(8)
    with FakeRunPod(scratch.parent / "fake-runpod", api_key=key) as fake:
        env = {**os.environ, "RUNPOD_API_BASE_URL": fake.url, "DISTCHECK_RUNPOD_REST_URL": fake.url + "/v1",
               "RUNPOD_API_KEY": key, "DISTCHECK_REHEARSAL": "1",
               "XDG_CACHE_HOME": str(scratch.parent / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        for name in ("DISTCHECK_MAX_USD", "DISTCHECK_GPU_PROVIDER", "PYTEST_ADDOPTS"):
            env.pop(name, None)
        # The items a paid run completes get their free checks run after the paid test (pytest_distcheck.paid).
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--workspace", str(rel_config),
                   "-m", "gpu", "--max-usd", MAX_USD, *(["--lang", lang] if lang else [])]
        status, interrupted = _run_child(command, scratch, env, say)
        pods = fake.pods
        live = [p.id for p in fake.live_pods()]
    new = [r for r in _rows(scratch, ledger) if (r.row_hash or (r.run_id, r.status, r.line)) not in before]
    kept = lambda what: _(KEPT).format(scratch=scratch, what=_(what), parent=shlex.quote(str(scratch.parent)))  # noqa: E731
    if interrupted:
        say(_(INTERRUPTED).format(pods=_pods_line(pods, live), runs=_runs_line(new)))
        say(kept(KEPT_SO_FAR))
        return 130
    results_dir = str(ws.section("tp_inference").get("results_dir", "experiments/tp_inference/results"))
    missed = [p for r in rehearsal_results(scratch, results_dir) for p in r["preflight"].get("problems", [])]
    say("=" * 30 + f" {_(SUMMARY)} " + "=" * 30)
    say(_(PASSED) if status == 0 else _(FAILED).format(status=status))
    say(_(ROWS).format(rows=", ".join(f"{r.status} {r.run_id} ${r.cost}" for r in new)) if new else _(NO_ROWS))
    say(_(PODS_LEFT).format(pods=", ".join(live)) if live else _(NO_PODS_LEFT))
    say(_(COVERED_LINE).format(steps="; ".join(map(_, COVERED))))
    say(_(NOT_COVERED_LINE).format(steps="; ".join([*dict.fromkeys(missed), *map(_, NOT_COVERED)])))
    say(_(FOR_REAL).format(command=paid_command(os.environ)))
    say(kept(KEPT_TO_LOOK_AT))
    return status or (1 if live else 0)


def _run_child(command: list[str], cwd: Path, env: dict[str, str], say: Any) -> tuple[int, bool]:
    """Run the child pytest; (its exit status, whether Ctrl-C came). The child shares this process group,
    so Ctrl-C reached it too: wait for its teardown; a second Ctrl-C kills it."""
    proc = subprocess.Popen(command, cwd=cwd, env=env)
    try:
        return proc.wait(), False
    except KeyboardInterrupt:
        say(_(WINDING_DOWN))
    try:
        return proc.wait(), True
    except KeyboardInterrupt:
        proc.kill()
        return proc.wait(), True


def _pods_line(pods: list[Any], live: list[str]) -> str:
    if not pods:
        return _(NO_POD)
    return ", ".join(_(POD_LEFT if p.id in live else POD_TERMINATED).format(id=p.id) for p in pods)


def _runs_line(rows: list[Any]) -> str:
    runs = list(dict.fromkeys(r.run_id for r in rows))
    if not runs:
        return _(NO_RUN)
    settled = {r.run_id: r for r in rows if r.status in ("settled", "overrun")}
    return ", ".join(_(RUN_SETTLED).format(run_id=run, cost=settled[run].cost) if run in settled
                     else _(RUN_UNSETTLED).format(run_id=run) for run in runs)
