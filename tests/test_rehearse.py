"""`distcheck rehearse`: the whole paid path against the bundled fake RunPod API with real SSH to this
machine, in a scratch copy, writing nothing to the workspace; it ends with the DoD table marked as a
rehearsal and a summary of what it covered and could not."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pods_support import STEPS, tp_check_workspace  # noqa: I001 - the same workspace as the paid-check tests

from pytest_distcheck import i18n
from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.budget.plugin import SPENT_REHEARSAL
from pytest_distcheck.i18n import _
from pytest_distcheck.paid import NO_KEY_STEP
from pytest_distcheck.pods.fake.fixtures import FAST_TIMINGS, write_workspace
from pytest_distcheck.pods.rehearsal import (
    FOR_REAL,
    INTERRUPTED,
    KEPT,
    NO_DOD_TABLE,
    POD_TERMINATED,
    RUN_SETTLED,
    THIS_RUN,
    WINDING_DOWN,
    paid_command,
)


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def rehearsal_ws(tmp_path, monkeypatch):
    """A workspace with the paid check (the paid-check tests' one) and fast pod timings; no RunPod variables."""
    ws = tmp_path / "ws"
    (ws / "checks").mkdir(parents=True)
    write_workspace(ws)
    tp_check_workspace(ws)
    (ws / "tox.ini").write_text(f"[pytest]\ndistcheck_pod_timings = {FAST_TIMINGS}\n")
    for name in ("RUNPOD_API_KEY", "RUNPOD_API_BASE_URL", "DISTCHECK_REHEARSAL", "DISTCHECK_RUNPOD_REST_URL"):
        monkeypatch.delenv(name, raising=False)
    return ws


ENV = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}


def test_rehearse_runs_the_paid_path_in_a_scratch_copy(rehearsal_ws):
    ws = rehearsal_ws
    before = _hashes(ws)
    proc = subprocess.run([sys.executable, "-m", "pytest_distcheck.cli", "rehearse"], cwd=ws, env=ENV,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert _hashes(ws) == before  # nothing in the workspace was written, not even a lock or a cache
    for pattern in [*STEPS, "*: running speedup.py: torchrun, 2 ranks, gloo on cpu*",
                    "*: copying back pod:code/experiments/*/results/speedup-cpu-gloo-2-*",
                    "*: terminating pod *", "*: pod * terminated; settled * s x $1.18/h = $*"]:
        assert any(fnmatch.fnmatch(line, pattern) for line in out.splitlines()), pattern
    assert "Captured stderr" not in out and "Captured stdout" not in out  # the status line is not captured output
    # the fresh-user trial: the scratch copy's DoD table (0/N, git hints) read as the learner's own state
    assert NO_DOD_TABLE in out and THIS_RUN in out and "Definition of Done: phase" not in out
    assert "git init" not in out
    assert "paid path: PASSED end to end against the fake RunPod API; $0 paid" in out
    assert "not covered by a rehearsal: no GPU visible: nvidia-smi: nvidia-smi not found" in out
    assert "pods left on the fake API: none" in out
    # the budget's own lines say the amounts are the fake's (they read as real money)
    spent = [line for line in out.splitlines() if line.startswith("distcheck budget:")]
    assert spent and all(line.startswith("distcheck budget: REHEARSAL, nothing paid: ") for line in spent), spent
    assert any(fnmatch.fnmatch(line, SPENT_REHEARSAL.format(spent="$*", runs="1 run", unsettled="", left="$*",
                                                            ceiling="$5.00")) for line in spent), spent
    assert FOR_REAL.format(command=paid_command(ENV)) in out.splitlines()
    scratch = Path(re.search(r"scratch copy kept at (\S+) ", out).group(1))
    assert out.rstrip().endswith(f"remove it with: rm -rf {scratch.parent}")
    try:
        rows = Ledger(scratch / "ledger.md", scratch / ".distcheck" / "budget.lock").read()
        statuses = [r.status for r in rows]  # a paid RunPod session ends reconciled with the (fake) provider's bill
        assert statuses[:3] == ["open", "started", "settled"] and set(statuses[3:]) <= {"reconciled"}
        (path,) = sorted((scratch / "experiments" / "tp_inference" / "results").glob("*.json"))
        assert path.name == f"speedup-cpu-gloo-2-{rows[0].run_id}.json"  # a new name per run id
        data = json.loads(path.read_text())
        assert (data["device"]["type"], data["backend"], data["run_id"]) == ("cpu", "gloo", rows[0].run_id)
        assert data["preflight"]["rehearsal"] is True and data["preflight"]["torch"]["available"] is False
        assert (path.parent / data["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert {m["tp"] for m in data["measurements"]} == {1, 2}
    finally:
        shutil.rmtree(scratch.parent, ignore_errors=True)


def test_the_real_run_it_points_to_sets_the_key_first_as_the_dod_table_says_it():
    """Without RUNPOD_API_KEY the line gives the DoD table's step after a keyless paid run (paid.NO_KEY_STEP), in
    the language in use; with one, the command alone."""
    assert paid_command({}) == NO_KEY_STEP.format(how="pytest -m gpu --max-usd 3")
    assert paid_command({}) == "export RUNPOD_API_KEY=<your RunPod API key> && pytest -m gpu --max-usd 3"
    assert paid_command({"RUNPOD_API_KEY": " "}) == paid_command({})
    assert paid_command({"RUNPOD_API_KEY": "rpa_x"}) == "pytest -m gpu --max-usd 3"
    i18n.use("es")
    line = _(FOR_REAL).format(command=paid_command({}))
    assert line == _(FOR_REAL).format(command=_(NO_KEY_STEP).format(how="pytest -m gpu --max-usd 3"))
    assert line == ("después, de verdad: export RUNPOD_API_KEY=<tu clave de la API de RunPod> && "
                    "pytest -m gpu --max-usd 3")


def test_the_estimate_points_to_the_rehearsal_and_says_what_it_cannot_cover(tmp_path, monkeypatch, capsys):
    from pytest_distcheck.cli import main

    (tmp_path / "checks").mkdir()
    write_workspace(tmp_path)
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "30"]) == 0
    out = capsys.readouterr().out
    from pytest_distcheck.commands.estimate import REHEARSE_FIRST
    from pytest_distcheck.pods.rehearsal import NOT_COVERED

    assert REHEARSE_FIRST.format(gaps="; ".join(NOT_COVERED)) + "\n" in out
    assert "it cannot cover real prices, capacity and how long a real pod takes to start; the image on a real" in out


def test_rehearse_without_the_gpu_extra_says_what_to_install(monkeypatch, capsys):
    from pytest_distcheck.cli import main

    gone = [m for m in sys.modules if m == "asyncssh" or m.startswith(("asyncssh.", "pytest_distcheck.pods.fake"))]
    for name in gone:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "asyncssh", None)  # as if the gpu extra were not installed
    assert main(["rehearse"]) != 0
    err = capsys.readouterr().err
    assert "distcheck rehearse: needs the gpu extra (asyncssh is not installed): pip install -e '.[gpu]'" in err


def test_ctrl_c_during_rehearse_terminates_the_fake_pod_settles_its_row_and_names_the_copy(rehearsal_ws):
    """Ctrl-C at a terminal (SIGINT to the whole process group) once the fake pod is ready: the run's teardown
    terminates the pod and settles its ledger row while the fake API stays up, and the last lines say so and
    give the scratch copy's rm -rf (it used to exit in 1.2 s with "interrupted", the row open, the copy behind)."""
    # A terminal starts the command with SIGINT at its default; a background job (`.ci/run &`, nohup) inherits it
    # ignored, and a Python started so never sees Ctrl-C (the run then passed as if no signal had come).
    proc = subprocess.Popen([sys.executable, "-m", "pytest_distcheck.cli", "rehearse"], cwd=rehearsal_ws, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if ": ready: pod " in line:
                os.killpg(proc.pid, signal.SIGINT)
                break
        lines += proc.communicate(timeout=300)[0].splitlines()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = "\n".join(lines)
    assert proc.returncode == 130, out[-4000:]
    scratch = Path(re.search(r"scratch copy (\S+) against", out).group(1))
    try:
        rows = Ledger(scratch / "ledger.md", scratch / ".distcheck" / "budget.lock").read()
        settled = next(r for r in rows if r.status == "settled")
        pod = re.search(r"ready: pod (\S+),", out).group(1)
        assert WINDING_DOWN in lines
        assert INTERRUPTED.format(pods=POD_TERMINATED.format(id=pod),
                                  runs=RUN_SETTLED.format(run_id=settled.run_id, cost=settled.cost)) in lines
        assert lines[-1] == KEPT.format(scratch=scratch, what="what the run got to", parent=scratch.parent)
        assert "Exception ignored" not in out  # the fake's loop used to close under a live subprocess transport
    finally:
        shutil.rmtree(scratch.parent, ignore_errors=True)


def test_the_rehearsals_frame_and_what_it_wrote_are_said_in_spanish():
    """The check's own log under es (the whole rehearsal under es ran here once: 30 s of the suite for lines
    that are these catalog messages)."""
    from pytest_distcheck import i18n
    from pytest_distcheck.i18n import _
    from pytest_distcheck.phase35.messages import REHEARSAL_TITLE, REHEARSAL_WROTE

    i18n.use("es")
    try:
        title = _(REHEARSAL_TITLE)
        wrote = _(REHEARSAL_WROTE).format(run="r1", pod="p1", files="a.json a.png", preflight="ok", problems="x")
    finally:
        i18n.use(i18n.DEFAULT)
    assert title == "ENSAYO de la ejecución de TP de pago"
    assert wrote.startswith("la ejecución r1 en el pod falso de RunPod p1 (sin pagar nada) escribió a.json a.png en "
                            "la copia temporal del ensayo: no son evidencia, no hagas commit de ellos.\n"), wrote
    assert "; lo que aquí no se cubre: x" in wrote
