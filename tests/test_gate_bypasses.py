"""The 8 ways issue 13 measured to pass `pytest --gate` with nothing done, each now failing the gate.

1. a root conftest.py that replaces ``pytest_distcheck.pending`` with a builtin (``print``) at import;
2. a ``-p`` plugin that replaces a kit function the checks call with a ``functools.partial``;
3. another workspace file through the ini file (``distcheck_config``, plus ``--ignore`` in addopts);
4. the same through ``-o distcheck_config=...``;
5. the same through ``PYTEST_ADDOPTS``;
6. forged GPU evidence: the kit's synthetic 2-GPU result and its ledger rows, copied into the workspace;
7. a quiz log line computed from the bank's keyed answers (the log format of old main);
8. a rehearsed quiz (preview ``--seed 1``, then ``--seed 1`` again): tests/test_quiz_integrity.py.

1-5 run the documented gate (``pytest --gate``) in-process, as a learner's repository would; the
kit runs the DoD checks in an isolated sub-session (one extra process each). 1-2 use the two-item
workspace of tests/conftest.py; 3-7 a bare copy of the Phase 35 checks folder (nothing done).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dod_support import git_commit_all, workflow_accepts, write_checks

from pytest_distcheck.evidence import record_sources

REPO = Path(__file__).resolve().parents[1]
FAILED = pytest.ExitCode.TESTS_FAILED

# A second workspace that claims phase 35 with one trivially done item (bypasses 3-5).
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
MINE = """
import pytest

@pytest.mark.dod("quiz-passed")
def test_quiz():
    pass
"""
OTHERS = " ".join(f"--ignore=checks/{p.name}" for p in sorted((REPO / "checks").glob("test_*.py")))


def phase35(pytester: pytest.Pytester) -> Path:
    """A bare copy of the Phase 35 checks folder (workspace file, checks, quiz bank): nothing done."""
    shutil.copytree(REPO / "checks", pytester.path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    return pytester.path


def gate(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The learner's `pytest --gate`, writing the report the example workflow judges (``report.json``)."""
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--dod-json", "report.json", *args)
    result.report = pytester.path / "report.json"
    return result


def assert_gate_fails(result: pytest.RunResult) -> None:
    assert result.ret != 0, result.stdout.str()
    result.stdout.fnmatch_lines(["gate: FAILED*"])
    assert "gate: PASSED" not in result.stdout.str()
    assert not workflow_accepts(result.report)  # the example CI workflow's verdict step fails


def test_1_root_conftest_replacing_pending_with_a_builtin(workspace_dir, monkeypatch):
    import pytest_distcheck

    monkeypatch.setattr(pytest_distcheck, "pending", pytest_distcheck.pending)  # restored after this test
    write_checks(workspace_dir, alpha="pytest_distcheck.pending('no log yet')",
                 beta="pytest_distcheck.pending('no log yet')")
    (workspace_dir.path / "conftest.py").write_text("import pytest_distcheck\npytest_distcheck.pending = print\n")
    result = gate(workspace_dir)
    assert_gate_fails(result)
    result.stdout.fnmatch_lines(["PENDING*alpha*no log yet"])


def test_2_p_plugin_replacing_a_kit_function_with_a_partial(workspace_dir, monkeypatch):
    from pytest_distcheck.quiz import grade

    monkeypatch.setattr(grade, "passes", grade.passes)  # restored after this test
    check = ("from pytest_distcheck.quiz import grade\n    if not grade.passes(0, 10, 0.7):\n"
             "        pytest_distcheck.pending('quiz below the pass mark')")
    write_checks(workspace_dir, alpha=check, beta=check)
    workspace_dir.makepyfile(evil_plugin="""
        import functools
        from pytest_distcheck.quiz import grade
        grade.passes = functools.partial(max, True)
        """)
    workspace_dir.syspathinsert()
    result = gate(workspace_dir, "-p", "evil_plugin")
    assert_gate_fails(result)
    result.stdout.fnmatch_lines(["PENDING*alpha*quiz below the pass mark"])


def _other_workspace_files(root: Path) -> None:
    (root / "checks" / "mine.toml").write_text(OTHER_TOML)
    (root / "checks" / "test_mine.py").write_text(MINE)


def _other_workspace(pytester: pytest.Pytester) -> None:
    _other_workspace_files(phase35(pytester))


def test_3_another_workspace_through_the_ini_file(pytester):
    _other_workspace(pytester)
    pytester.makeini(f"[pytest]\ndistcheck_config = checks/mine.toml\naddopts = {OTHERS}\n")
    assert_gate_fails(gate(pytester, "checks"))


def test_4_another_workspace_through_o(pytester):
    _other_workspace(pytester)
    assert_gate_fails(gate(pytester, "checks", "-o", "distcheck_config=checks/mine.toml", *OTHERS.split()))


def test_5_another_workspace_through_pytest_addopts(pytester, monkeypatch):
    _other_workspace(pytester)
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-o distcheck_config=checks/mine.toml {OTHERS}")
    assert_gate_fails(gate(pytester, "checks"))


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_6_the_kits_synthetic_gpu_result_is_never_evidence(pytester):
    root = phase35(pytester)
    fix = REPO / "fixtures" / "tp_inference"
    results = root / "experiments" / "tp_inference" / "results"
    results.mkdir(parents=True)
    forged = json.loads((fix / "synthetic-cuda-2gpu.json").read_text())
    (root / "experiments" / "tp_inference" / "lab.py").write_text("# the learner's lab\n")
    forged["sources"] = record_sources(["experiments/tp_inference/lab.py"], root)  # as the CPU result's
    (results / "speedup-cuda-2.json").write_text(json.dumps(forged))
    shutil.copy(fix / "synthetic-cuda-2gpu.png", results / "synthetic-cuda-2gpu.png")
    ledger = (fix / "synthetic-ledger.md").read_text().splitlines(keepends=True)
    (root / "experiments" / "35-cloud-budget.md").write_text("".join(x for x in ledger if "s0fixture-0002" not in x))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "forged")
    result = gate(pytester)
    assert_gate_fails(result)
    text = result.stdout.str()
    assert "DONE     tp-speedup-committed" not in text, text
    result.stdout.fnmatch_lines(["BROKEN*tp-speedup-committed*speedup-cuda-2.json: not evidence: its measurements "
                                 "are those of the kit's own synthetic fixture fixtures/tp_inference/"
                                 "synthetic-cuda-2gpu.json*"])


def test_7_a_quiz_line_computed_from_the_key_in_the_old_format(pytester):
    from quiz_support import LOG_REL, attempt_record

    root = phase35(pytester)
    forged = attempt_record(7)
    del forged["mode"], forged["status"]
    for a in forged["answers"]:
        del a["seconds"]
    (root / LOG_REL).parent.mkdir(parents=True)
    (root / LOG_REL).write_text(json.dumps(forged) + "\n")
    result = gate(pytester)
    assert_gate_fails(result)
    result.stdout.fnmatch_lines(["BROKEN*quiz-passed*line 1*'mode' is a required property*"])


def test_7b_a_forged_line_in_the_new_format_is_only_self_reported(pytester):
    from quiz_support import LOG_REL, attempt_record

    root = phase35(pytester)
    (root / LOG_REL).parent.mkdir(parents=True)
    (root / LOG_REL).write_text(json.dumps(attempt_record(8)) + "\n")
    git_commit_all(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "checks/test_quiz_passed.py")
    result.stdout.fnmatch_lines(["DONE*quiz-passed*self-reported*"])


# -- what the sub-session adds beyond the 8 -----------------------------------------------------------


def test_an_edited_check_in_a_phase_35_workspace_is_untrusted(pytester):
    root = phase35(pytester)
    (root / "checks" / "test_quiz_passed.py").write_text(
        'import pytest\n\n@pytest.mark.local\n@pytest.mark.dod("quiz-passed")\ndef test_quiz_passed():\n    pass\n')
    result = gate(pytester)
    assert_gate_fails(result)
    result.stdout.fnmatch_lines(["UNTRUSTED*quiz-passed*the workspace is not the shipped DoD of phase 35: check "
                                 "file checks/test_quiz_passed.py differs from the shipped one*"])
    report = json.loads((root / "report.json").read_text())
    assert report["isolation"]["isolated"] and report["gate"]["isolated"] and not report["gate"]["passed"]
    assert report["canonical"]["trusted"] is False
    assert {c["path"]: c["sha256"] == c["shipped"] for c in report["canonical"]["check_files"]}[
        "checks/test_quiz_passed.py"] is False
    assert report["workspace"]["root"] == str(root)


def test_a_learner_module_a_check_imports_cannot_replace_kit_functions(workspace_dir):
    write_checks(workspace_dir, alpha="pytest_distcheck.pending('no log yet')")
    checks = workspace_dir.path / "checks" / "test_checks.py"
    checks.write_text("import helper  # at import: before the kit's collection snapshot\n" + checks.read_text())
    (workspace_dir.path / "helper.py").write_text("import pytest_distcheck\npytest_distcheck.pending = print\n")
    result = gate(workspace_dir)
    assert_gate_fails(result)
    result.stdout.fnmatch_lines(["UNTRUSTED*alpha*pytest_distcheck.pending was replaced after the gate's "
                                 "sub-session started (now builtin_function_or_method)*"])


def test_claiming_to_be_the_sub_session_by_hand_is_untrusted(workspace_dir):
    write_checks(workspace_dir)  # both checks done: only the isolation can fail the gate
    (workspace_dir.path / "conftest.py").write_text("# the learner's\n")
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate", "--distcheck-subsession")
    result.stdout.fnmatch_lines(["UNTRUSTED*alpha*the gate's sub-session is not isolated: Python was not started "
                                 "with -I*conftest.py files may load (no --noconftest)*", "gate: FAILED*"])
    assert result.ret == FAILED


def test_the_example_workflow_fails_with_the_bypasses_in_the_repository(pytester, monkeypatch):
    """The workflow's own two steps (docs/ci/distcheck-gate.yml), run as CI would, on a Phase 35 workspace
    carrying bypasses 1, 3, 5, 6 and 7 at once (a root conftest patching the kit, an ini file pointing at
    another workspace, PYTEST_ADDOPTS, the kit's synthetic GPU result, a quiz line in the old format)."""
    import os
    import shutil as sh

    from dod_support import workflow_steps
    from quiz_support import LOG_REL, attempt_record

    if sh.which("jq") is None:
        pytest.skip("jq is not installed")
    root = phase35(pytester)
    (root / "conftest.py").write_text("import pytest_distcheck\npytest_distcheck.pending = print\n")
    _other_workspace_files(root)
    pytester.makeini(f"[pytest]\ndistcheck_config = checks/mine.toml\naddopts = {OTHERS}\n")
    results = root / "experiments" / "tp_inference" / "results"
    results.mkdir(parents=True)
    sh.copy(REPO / "fixtures" / "tp_inference" / "synthetic-cuda-2gpu.json", results / "speedup-cuda-2.json")
    forged = attempt_record(7)
    del forged["mode"], forged["status"]
    (root / LOG_REL).parent.mkdir(parents=True)
    (root / LOG_REL).write_text(json.dumps(forged) + "\n")
    steps = workflow_steps()
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(root / "summary.md"),
           "PYTEST_ADDOPTS": f"-o distcheck_config=checks/mine.toml {OTHERS}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    gate_step = subprocess.run(["bash", "-c", steps["Run the gate"]["run"]], cwd=root, env=env, capture_output=True,
                               text=True)
    assert gate_step.returncode != 0, gate_step.stdout
    verdict = subprocess.run(["bash", "-c", steps["Check the report's verdict"]["run"]], cwd=root, env=env,
                             capture_output=True, text=True)
    assert verdict.returncode != 0, verdict.stdout
    assert "gate: FAILED" in gate_step.stdout and "## Definition of Done: phase 35" in (root / "summary.md").read_text()
