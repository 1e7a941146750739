"""The ddp-allreduce-logged check: committed logs good, missing, corrupt and wrong; the live run and its cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all

from pytest_distcheck import ddp, live_cache

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "checks" / "test_ddp_allreduce_logged.py"


@pytest.fixture
def ddp_workspace(pytester):
    pytester.mkdir("checks")
    shutil.copy(CHECK, pytester.path / "checks" / CHECK.name)
    pytester.makeini(f"[pytest]\npythonpath = {REPO}\n")

    def run(committed_log: str):
        (pytester.path / "checks" / "distcheck.toml").write_text(
            "allow_paths_outside_root = true\n"  # the logs under test live in the repository, not here
            "[phase]\nid = 't'\ntitle = 't'\n"
            "[[items]]\nid = 'ddp-allreduce-logged'\ntitle = 'ddp'\nhow = 'run the lab'\n"
            f"[ddp]\ncommitted_log = '{committed_log}'\nlive_log = 'live.json'\n"
        )
        return pytester.runpytest("-p", "no:cacheprovider", "-k", "committed", "checks")

    return run


def test_the_real_log_is_done_only_once_committed(ddp_workspace, pytester):
    """The docs promise a *committed* log: an untracked one is pending naming git, a committed one passes."""
    # Another host load: a copy of the reference (same parsed content) would be untrusted ("copied").
    data = json.loads((REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text())
    data["host"]["load_avg_1m"] += 0.25
    (pytester.path / "log.json").write_text(json.dumps(data, indent=1))
    result = ddp_workspace("log.json")
    result.stdout.fnmatch_lines([f"PENDING  ddp-allreduce-logged  {pytester.path} is not in a git repository",
                                 "*-> git init && git add log.json && git commit -m \"DoD evidence\" -- log.json"])
    git_commit_all(pytester.path)
    result = ddp_workspace("log.json")
    result.assert_outcomes(passed=1, deselected=1)
    # The live check was deselected (-k committed), so the item is not claimed done.
    result.stdout.fnmatch_lines(["NOT RUN  ddp-allreduce-logged  1 of 2 checks did not run: "
                                 "*test_ddp_lab_runs_live_on_two_gloo_ranks deselected (-k 'committed')"])
    assert result.ret == 0


def test_a_missing_log_is_pending_with_the_command(ddp_workspace):
    result = ddp_workspace("nowhere.json")
    result.stdout.fnmatch_lines(["PENDING  ddp-allreduce-logged  no committed all-reduce log at nowhere.json",
                                 "*-> run the lab"])
    assert result.ret == 0


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("corrupt.json", "*corrupt.json, line * not valid JSON*"),
        ("schema-invalid.json", "*schema-invalid.json, allreduce_sweep[[]2[]]: 'busbw_gbps' is a required property*"),
        ("busbw-inconsistent.json",
         "*busbw-inconsistent.json, allreduce_sweep[[]3[]].busbw_gbps: expected algbw*2(n-1)/n = *, found *"),
    ],
)
def test_a_bad_log_is_broken_naming_file_and_field(ddp_workspace, fixture, message):
    result = ddp_workspace(str(REPO / "fixtures" / "ddp" / fixture))
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  " + message])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


CANNED_LAB = '''
import json
from dataclasses import dataclass
LOG = {log!r}

@dataclass(frozen=True)
class LabConfig:
    reps: int = 5

def run(cfg=None):  # canned: no model, no training, no collective
    return json.loads(LOG)
'''


def _lab_workspace(pytester, lab: str) -> Path:
    """A workspace with the check, a lab ``experiments/ddp_cpu/lab.py`` of text ``lab`` and its DoD file."""
    pytester.mkdir("checks")
    shutil.copy(CHECK, pytester.path / "checks" / CHECK.name)
    pytester.makeini("[pytest]\npythonpath = .\n")
    (pytester.path / "experiments" / "ddp_cpu").mkdir(parents=True)
    (pytester.path / "experiments" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "lab.py").write_text(lab)
    (pytester.path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n"
        "[[items]]\nid = 'ddp-allreduce-logged'\ntitle = 'ddp'\nhow = 'run the lab'\n"
        "[ddp]\ncommitted_log = 'log.json'\nlive_log = '.distcheck/live.json'\n")
    return pytester.path


def _live(pytester, *args: str) -> dict:
    """The live check's outcome (the JSON report's entry) in a fresh pytest process, and its output (``out``)."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "live", "--dod-json", "report.json",
                                           *args, "checks")
    report = json.loads((pytester.path / "report.json").read_text())
    item = next(it for it in report["items"] if it["id"] == "ddp-allreduce-logged")
    check = next(c for c in item["checks"] if c["nodeid"].endswith("test_ddp_lab_runs_live_on_two_gloo_ranks"))
    return {**check, "flags": item["flags"], "out": result.stdout.str()}


def _gated_live(pytester) -> dict:
    """The live check's outcome in the gate's own session on the commit (tests/dod_support.gate_run)."""
    from dod_support import gate_run

    result = gate_run(pytester, "-k", "live")
    report = json.loads(result.report.read_text())
    item = next(it for it in report["items"] if it["id"] == "ddp-allreduce-logged")
    check = next(c for c in item["checks"] if c["nodeid"].endswith("test_ddp_lab_runs_live_on_two_gloo_ranks"))
    return {**check, "flags": item["flags"]}


def test_a_lab_returning_a_canned_log_without_the_api_the_check_builds_on_is_broken(pytester):
    """Issue 26: a lab that trains nothing and types a log used to pass; the live check now builds the model
    and data itself through the lab's API, and says which part of it is missing."""
    log = (REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text()
    _lab_workspace(pytester, CANNED_LAB.format(log=log))
    check = _live(pytester)
    assert (check["state"], check["reason"]) == ("broken", ddp.MISSING_API.format(
        module="experiments.ddp_cpu.lab", names="build_model, batch, loss"))


def test_a_passing_live_run_is_reused_while_nothing_changed_and_never_under_the_gate(pytester):
    """Issue 33: `pytest -m local` repeats no live run while the kit, the check, the lab's code and the workspace
    file are unchanged (what changes the key: tests/test_live_cache.py); the gate's session (its --gate flag)
    always runs live and leaves the cache alone."""
    root = _lab_workspace(pytester, (REPO / "experiments" / "ddp_cpu" / "lab.py").read_text())
    live = ddp.LIVE_DONE.format(n=2)
    first = _live(pytester)
    assert (first["state"], first["reason"], first["flags"]) == ("done", live, ["confirmed"])
    # Reused, in another language: the log's table is made again from the live log, in that language.
    cached = _live(pytester, "--lang", "es")
    assert cached["state"] == "done" and cached["flags"] == [live_cache.CACHED], cached
    assert cached["reason"].endswith(f"(para repetirla, borra {live_cache.FOLDER})"), cached["reason"]
    out = cached["out"]
    assert "DDP frente a un solo proceso: " in out and "DDP against one process" not in out, out[-3000:]
    assert "reutilizada" in out, out[-3000:]
    cache = (root / live_cache.FOLDER / "ddp-allreduce-logged.json").read_bytes()
    # The gate's own session on the commit (phase 't' ships no DoD, so the item cannot pass there, but the check
    # runs as it does under the gate).
    gated = _gated_live(pytester)
    assert (gated["reason"], gated["flags"]) == (live, ["confirmed"])
    assert (root / live_cache.FOLDER / "ddp-allreduce-logged.json").read_bytes() == cache
