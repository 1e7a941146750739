"""Each class of attempt a learner made at a PASS without the work fails the gate (issue 26, point 7).

One Phase 35 workspace carries them all at once and runs the example workflow's own two steps, as CI would
(the process boundary is the point there); the rest test what the gate decides, in this process: the order of
the checks, the outputs of the rehearsal and of the fake provider, flagged items, the workflow's verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dod_support import gate_run, git_commit_all, workflow_accepts, workflow_steps

from pytest_distcheck.dod import gate, provenance

REPO = Path(__file__).resolve().parents[1]
FAILED = pytest.ExitCode.TESTS_FAILED
CYRILLIC = str.maketrans("aeopcxyABCEHKMOPTX", "аеорсхуАВСЕНКМОРТХ")

# Lab code the gate runs (the DDP item's live run imports the lab, and so this package, on its ranks): it writes
# the notes into the folder it runs from, which the notes check has judged already.
WRITES_THE_NOTES = """
import pathlib as _p
_root = _p.Path(__file__).resolve().parents[1]
(_root / "docs" / "notes").mkdir(parents=True, exist_ok=True)
for _n in ("megatron", "fsdp"):
    (_root / "docs" / "notes" / f"{_n}.md").write_text("# notes written by lab code while the gate ran\\n")
_p.Path(%r).write_text("the lab ran")
"""
# Text the check takes from the lab (its table) that would run code wherever it is unpickled.
RUNS_CODE_WHEN_UNPICKLED = '''
class _Table(str):
    def __str__(self):
        return self

    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path(%r).write_text('ran')",))


_real_table = format_table


def format_table(result):
    return _Table(_real_table(result))
'''
WRITES_A_MARKER = "import pathlib\npathlib.Path(%r).write_text('ran')\n"
# On PYTHONPATH: wraps the verdict in the `distcheck` process it reaches (not the gate's own, python -I).
SITECUSTOMIZE = """
import pathlib
pathlib.Path(%r).write_text("ran")
import pytest_distcheck.dod.report as _r
_r.gate_verdict = lambda *a, **k: _r.PASSED
"""
OTHER_TOML = """
[phase]
id = "35"
title = "Distributed training and inference (DDP, ZeRO/FSDP, TP, PP, collectives)"

[[items]]
id = "quiz-passed"
title = "Phase quiz passed with at least 70%"
how = "distcheck quiz 35"
checks = ["checks/test_mine.py::test_quiz"]
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def _attempts(root: Path, marks: Path) -> None:
    """A bare Phase 35 workspace (the checks and the labs' code, nothing done) carrying every attempt."""
    from quiz_support import LOG_REL, attempt_record

    shutil.copytree(REPO / "checks", root / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "experiments", root / "experiments", ignore=shutil.ignore_patterns("__pycache__", "results"))
    sol = REPO / "solutions"
    # Notes excluded from git, present in the work tree only.
    (root / ".gitignore").write_text("docs/notes/\n")
    (root / "docs" / "notes").mkdir(parents=True)
    for name in ("megatron", "fsdp"):
        shutil.copy(sol / "docs" / "notes" / f"{name}.md", root / "docs" / "notes" / f"{name}.md")
    init = root / "experiments" / "__init__.py"
    init.write_text(init.read_text() + WRITES_THE_NOTES % str(marks / "lab-ran"))
    lab = root / "experiments" / "ddp_cpu" / "lab.py"
    lab.write_text(lab.read_text() + RUNS_CODE_WHEN_UNPICKLED % str(marks / "unpickled"))
    # The reference diagram in look-alike letters, its SVG copied.
    page = (sol / "docs" / "tp-sharding.md").read_text()
    (root / "docs" / "tp-sharding.md").write_text(page.translate(CYRILLIC).replace("```" + "mermaid".translate(
        CYRILLIC), "```mermaid"))
    shutil.copy(sol / "docs" / "tp-sharding.svg", root / "docs" / "tp-sharding.svg")
    # A quiz attempt answered at 0.2 s per item (its answers computed from the shipped bank).
    (root / LOG_REL).parent.mkdir(parents=True)
    (root / LOG_REL).write_text(json.dumps(attempt_record(7, seconds=0.2)) + "\n")
    # Code that would run in the gate's process: a root conftest, a package init of the checks, a package named
    # like a check, committed bytecode; another workspace file through the ini file.
    (root / "conftest.py").write_text(WRITES_A_MARKER % str(marks / "conftest") + "import pytest_distcheck\n"
                                      "pytest_distcheck.pending = print\n")
    (root / "checks" / "__init__.py").write_text(WRITES_A_MARKER % str(marks / "checks-init"))
    (root / "checks" / "test_quiz_passed").mkdir()
    (root / "checks" / "test_quiz_passed" / "__init__.py").write_text(WRITES_A_MARKER % str(marks / "shadow"))
    (root / "checks" / "__pycache__").mkdir()
    (root / "checks" / "__pycache__" / "test_quiz_passed.cpython-311-pytest-9.2.0.pyc").write_bytes(b"\0" * 64)
    (root / "checks" / "mine.toml").write_text(OTHER_TOML)
    (root / "checks" / "test_mine.py").write_text('import pytest\n@pytest.mark.dod("quiz-passed")\n'
                                                  'def test_quiz():\n    pass\n')
    (root / "pytest.ini").write_text("[pytest]\ndistcheck_config = checks/mine.toml\n")
    # The committed DDP log staged behind `git replace`: plain git shows the reference log.
    log = root / "experiments" / "ddp_cpu" / "results" / "allreduce-cpu.json"
    log.parent.mkdir(parents=True)
    log.write_text("{}\n")
    git_commit_all(root)
    forged = subprocess.run(["git", "hash-object", "-w", str(sol / "experiments/ddp_cpu/results/allreduce-cpu.json")],
                            cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    _git(root, "replace", _git(root, "rev-parse", "HEAD:experiments/ddp_cpu/results/allreduce-cpu.json"), forged)


def test_every_attempt_at_once_fails_the_gate_and_the_example_workflow(tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    root, marks, site = tmp_path / "ws", tmp_path / "marks", tmp_path / "site"
    for folder in (root, marks, site):
        folder.mkdir()
    _attempts(root, marks)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE % str(marks / "sitecustomize"))
    steps = workflow_steps()
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(root / "summary.md"), "PYTHONPATH": str(site),
           "PYTEST_ADDOPTS": "-o distcheck_config=checks/mine.toml -p no:distcheck",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-c", steps["Run the gate"]["run"]], cwd=root / "docs", env=env, capture_output=True,
                         text=True, timeout=600)
    verdict = subprocess.run(["bash", "-c", steps["Check the report's verdict"]["run"]], cwd=root / "docs", env=env,
                             capture_output=True, text=True)
    assert run.returncode == FAILED and verdict.returncode != 0, run.stdout[-3000:]
    assert (marks / "sitecustomize").exists() and (marks / "lab-ran").exists()  # both ran, neither counted
    assert not {p.name for p in marks.iterdir()} & {"conftest", "checks-init", "shadow", "unpickled"}
    report = json.loads((root / "docs" / "dod-report.json").read_text())
    items = {it["id"]: it for it in report["items"]}
    assert report["gate"]["verdict"] == "failed" and report["workspace"]["path"] == "checks/distcheck.toml"
    assert items["reading-notes-cited"]["state"] == "pending"  # not in the commit; written later by the lab
    assert items["ddp-allreduce-logged"]["state"] in ("broken", "error")  # the commit's log, not the replacement
    assert items["tp-diagram-committed"]["state"] == "untrusted" and "copied" in items["tp-diagram-committed"]["flags"]
    assert items["quiz-passed"]["state"] == "done" and "quiz-passed (fast-quiz)" in report["gate"]["noted"]
    assert "gate: FAILED" in run.stdout and "gate: PASSED" not in run.stdout


def _fake_pod_id(tmp_path: Path) -> str:
    from pytest_distcheck.pods.fake.state import CATALOGUE, Account, Clock

    return Account("key", tmp_path, Clock()).new_pod({"gpuTypeId": next(iter(CATALOGUE)), "name": "x"}, 0).id


def test_outputs_of_the_rehearsal_and_of_the_fake_provider_are_never_gpu_evidence(tmp_path):
    """The free rehearsal's CPU result relabelled as a 2-GPU CUDA run, with the fake provider's rows in the ledger."""
    from types import SimpleNamespace

    fake = _fake_pod_id(tmp_path)
    assert provenance.FAKE_POD_ID.fullmatch(fake)
    text = (REPO / "fixtures" / "tp_inference" / "synthetic-cuda-2gpu.json").read_text()
    result = json.loads(text.replace("SYNTHETIC", "NVIDIA").replace("synthetic", "mine"))
    result.update(run_id="r1-mine", notes="", measurements=[{"tp": 1, "mine": True}], pod={"provider": "runpod",
                                                                                          "id": fake})
    path = tmp_path / "speedup.json"
    path.write_text(json.dumps(result))
    assert "one of the bundled fake RunPod's" in provenance.fixture_result(path, result)
    result["pod"]["id"] = "abcd1234efgh56"
    result["preflight"] = {"rehearsal": True}
    path.write_text(json.dumps(result))
    assert "came from a rehearsal" in provenance.fixture_result(path, result)
    result["preflight"] = {"rehearsal": False}
    result["settings"]["timer"] = "wall-clock"
    path.write_text(json.dumps(result))
    assert "a CPU run relabelled" in provenance.fixture_result(path, result)
    result["settings"]["timer"] = "cuda-events"
    path.write_text(json.dumps(result))
    assert provenance.fixture_result(path, result) is None
    rows = [SimpleNamespace(run_id="r1-mine", resource="pod", resource_id=fake),
            SimpleNamespace(run_id="r2-mine", resource="pod", resource_id="abcd1234efgh56")]
    assert provenance.fixture_rows(rows) == rows[:1]


DDP_LIKE = '''
import pathlib
import pytest
import pytest_distcheck

@pytest.fixture
def dist_world():
    return None

@pytest.mark.dod("alpha")
def test_alpha(dist_world, distcheck_workspace):
    # a check that runs the learner's code: it writes beta's evidence
    distcheck_workspace.resolve("beta.txt").write_text("written while the gate ran")

@pytest.mark.dod("beta")
def test_beta(distcheck_workspace):
    if not distcheck_workspace.resolve("beta.txt").is_file():
        pytest_distcheck.pending("no beta.txt in the commit", "make beta")
'''


def test_the_checks_that_run_the_learners_code_run_after_every_other(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(
        (workspace_dir.path / "checks" / "distcheck.toml").read_text().replace('requires = ["alpha"]', ""))
    workspace_dir.makepyfile(**{"checks/test_checks": DDP_LIKE})
    result = gate_run(workspace_dir, "-v")
    result.stdout.fnmatch_lines(["*test_beta SKIPPED*", "*test_alpha PASSED*"])
    result.stdout.fnmatch_lines(["PENDING  beta   no beta.txt in the commit"])
    assert gate.LEARNER_CODE == ("dist_world",)


def _passing_doc(ids: list[str]) -> dict:
    from pytest_distcheck.dod import report

    return {"format": report.FORMAT, "version": report.VERSION,
            "gate": {"requested": True, "passed": True, "verdict": "passed", "failing": [], "flagged": [],
                     "commit": "a" * 40},
            "canonical": {"trusted": True}, "summary": {"total": len(ids), "done": len(ids)},
            "items": [{"id": i, "state": "done", "flags": ["self-reported"], "evidence": []} for i in ids]}


@pytest.mark.parametrize("forge", ["none", "summary", "pending", "copied-flag", "fast-quiz", "copied-evidence",
                                   "no-items", "no-commit", "not-shipped"])
def test_the_workflow_verdict_reads_the_items_and_refuses_any_flag(tmp_path, forge):
    """A hand-written report whose ``gate`` section says passed; the workflow's jq also requires every item done,
    none flagged (copied; fast-quiz is a note for a grader and passes), the commit judged and
    ``summary.done == summary.total``."""
    doc = _passing_doc(["a", "b"])
    item = doc["items"][0]
    if forge == "summary":
        doc["summary"]["done"] = 1
    elif forge == "pending":
        doc["items"][1]["state"] = "pending"
    elif forge in ("copied-flag", "fast-quiz"):
        item["flags"].append(forge.removesuffix("-flag"))
    elif forge == "copied-evidence":
        item["evidence"] = [{"path": "x", "sha256": "sha256:0", "copied": "the reference"}]
    elif forge == "no-items":
        doc["items"], doc["summary"] = [], {"total": 0, "done": 0}
    elif forge == "no-commit":
        doc["gate"]["commit"] = None
    elif forge == "not-shipped":
        doc["canonical"] = None
    report = tmp_path / "report.json"
    report.write_text(json.dumps(doc))
    assert workflow_accepts(report) is (forge in ("none", "fast-quiz"))


def test_the_workflow_installs_the_pinned_kit_runs_distcheck_gate_and_needs_its_success():
    import yaml
    from dod_support import WORKFLOW

    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    runs = "\n".join(s.get("run", "") for s in jobs["gate"]["steps"])
    install = next(s for s in jobs["gate"]["steps"] if "pip install" in s.get("run", ""))
    assert "pip install -e" not in runs and 'pip install "$DISTCHECK_KIT"' in install["run"]
    assert install["working-directory"] == "${{ runner.temp }}" and "python -m " not in install["run"]
    assert "distcheck gate" in runs and "pytest --gate" not in runs
    verdict = jobs["verdict"]
    assert verdict["needs"] == "gate" and "jq -e" not in runs
    assert "needs.gate.result" in json.dumps(verdict["steps"])  # a report rewritten after a failed gate fails too


def test_the_gates_process_is_isolated_and_its_environment_clean(monkeypatch):
    env = {"PYTHONPATH": "/x", "PYTHONSTARTUP": "/y", "PYTEST_ADDOPTS": "-p evil", "DISTCHECK_X": "1", "HOME": "/h",
           "GITHUB_ENV": "/r/env"}
    assert gate.clean_env(env) == {"HOME": "/h", "GITHUB_ENV": "/r/env", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                                   "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    assert gate.command(["--root", "."])[1:5] == ["-I", "-m", "pytest_distcheck.cli", "gate"]
    assert not gate.isolated()  # this test process: not python -I


def test_the_readme_set_up_gets_one_line_for_a_grader_not_a_refusal(tmp_path):
    """The kit's clone as the workspace, installed editable: the gate says what a grader needs; a `.venv/` inside
    the workspace holds an installed kit and needs nothing said."""
    fork = tmp_path / "pytest_distcheck"
    assert gate.kit_note(tmp_path, fork, "/usr") == gate.EDITABLE.format(kit=fork)
    venv_kit = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "pytest_distcheck"
    assert gate.kit_note(tmp_path, venv_kit, str(tmp_path / ".venv")) is None


def test_pytest_gate_runs_distcheck_gate_with_none_of_the_learners_arguments(workspace_dir, monkeypatch):
    """From a subfolder, with -n 2 and -k: the gate walks up, judges every item, and says what it did not take."""
    from dod_support import unverified, write_checks

    from pytest_distcheck.dod.options import ignored_args

    write_checks(workspace_dir)
    (workspace_dir.path / "conftest.py").write_text("# the learner's\n")
    git_commit_all(workspace_dir.path)
    monkeypatch.chdir(workspace_dir.mkdir("notes"))
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate", "-n", "2", "-k", "beta",
                                     "--dod-json", "g.json")
    result.stdout.fnmatch_lines(["pytest --gate: runs `distcheck gate`; not passed on: *-n 2 -k beta*",
                                 "distcheck gate: judging commit *", "DONE     alpha  evidence checked",
                                 unverified(2, 2)])
    assert result.ret == FAILED
    # The report names the command line as typed, the arguments the gate did not take included.
    doc = json.loads((workspace_dir.path / "notes" / "g.json").read_text())
    assert doc["run"]["command"].startswith("pytest -p no:cacheprovider --gate -n 2 -k beta --dod-json g.json")
    assert ignored_args(["--gate", "--dod-json", "a.json", "--color=yes", "-x"]) == ["-x"]


def test_the_gates_no_workspace_hint_names_a_flag_that_distcheck_gate_takes(tmp_path, capsys):
    """The other commands' hint says --config FILE, which `distcheck gate` rejects; the gate's names its own
    --root DIR, and the gate takes it."""
    import re

    from pytest_distcheck.cli import build_parser
    from pytest_distcheck.errors import DistcheckError
    from pytest_distcheck.i18n import _

    flag, metavar = re.search(r"distcheck gate (--[a-z-]+) ([A-Z]+)", gate.NOT_FOUND).groups()
    assert "--config" not in gate.NOT_FOUND
    with pytest.raises(SystemExit):
        build_parser().parse_args(["gate", "--help"])
    assert f"{flag} {metavar}" in capsys.readouterr().out
    args = build_parser().parse_args(["gate", flag, str(tmp_path)])  # argparse exits on a flag it does not know
    with pytest.raises(DistcheckError) as raised:
        gate.run(Path(args.root), None, None, "no", print)
    assert str(raised.value) == _(gate.NOT_FOUND).format(start=tmp_path.resolve())


def test_a_gate_that_cannot_start_exits_with_pytests_usage_error(tmp_path):
    # its other statuses are pytest's; 2 is pytest's "interrupted" (a pytest maintainer's review)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pytest_distcheck.cli", "gate", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert "distcheck gate: no checks/distcheck.toml in" in proc.stderr


def test_distcheck_gate_hands_its_process_the_command_line_as_typed(tmp_path, monkeypatch):
    """The report's run.command is what the learner typed, options and all (paths as given, not made absolute)."""
    from pytest_distcheck import cli
    from pytest_distcheck.commands import gate as gate_command

    started = []
    monkeypatch.setattr(gate_command.subprocess, "call", lambda argv, env: started.append(argv) or 0)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["gate", "--dod-json", "dod-report.json", "--dod-markdown", "summary.md"]) == 0
    assert "--typed-as=distcheck gate --dod-json dod-report.json --dod-markdown summary.md" in started[0]
    assert f"--dod-json={tmp_path / 'dod-report.json'}" in started[0]


def test_run_again_the_gate_names_its_command_and_not_its_own_reports_as_uncommitted(workspace_dir):
    """`distcheck gate` as CI runs it, twice: the report names the command line, and the second run does not ask
    to commit the reports the first one wrote."""
    from dod_support import write_checks

    write_checks(workspace_dir)
    git_commit_all(workspace_dir.path)
    argv = [sys.executable, "-m", "pytest_distcheck.cli", "gate", "--color=no", "--dod-json", "dod-report.json",
            "--dod-markdown", "summary.md"]
    for _ in range(2):
        run = subprocess.run(argv, cwd=workspace_dir.path, capture_output=True, text=True, timeout=300)
        assert "distcheck gate: judging commit" in run.stdout, run.stdout + run.stderr
        assert "differ" not in run.stdout and "dod-report.json" not in run.stdout, run.stdout
    doc = json.loads((workspace_dir.path / "dod-report.json").read_text())
    assert doc["run"]["command"] == "distcheck gate --color=no --dod-json dod-report.json --dod-markdown summary.md"
    (workspace_dir.path / "notes.md").write_text("not committed\n")
    run = subprocess.run(argv, cwd=workspace_dir.path, capture_output=True, text=True, timeout=300)
    assert "1 file here differs" in run.stdout and "(notes.md)" in run.stdout, run.stdout
