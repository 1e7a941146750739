"""Every distcheck command and the plugin find the workspace file walking up from the current folder,
as git finds its repository; messages name --config; kit options' PATHs never move pytest's rootdir."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all, unverified, write_checks

from pytest_distcheck.cli import main
from pytest_distcheck.cmdline import as_written_and_fixed, separate_path_values
from pytest_distcheck.workspace import find_workspace_file

REPO = Path(__file__).resolve().parents[1]
NOTES = REPO / "fixtures" / "notes"


def test_find_walks_up_to_the_nearest_workspace(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_workspace_file(deep) == tmp_path / "checks" / "distcheck.toml"
    assert find_workspace_file(tmp_path) == tmp_path / "checks" / "distcheck.toml"


@pytest.fixture
def phase(tmp_path):
    """A copy of the phase's workspace file and its (empty) ledger, and a subfolder docs/deep."""
    (tmp_path / "checks").mkdir()
    shutil.copy(REPO / "checks" / "distcheck.toml", tmp_path / "checks")
    (tmp_path / "experiments").mkdir()
    shutil.copy(REPO / "experiments" / "35-cloud-budget.md", tmp_path / "experiments")
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    return tmp_path


def test_distcheck_budget_works_from_a_subfolder(phase, monkeypatch, capsys):
    monkeypatch.chdir(phase / "docs" / "deep")
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert "$5.00" in out


def test_no_workspace_anywhere_names_config_and_init(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["budget"]) == 2
    err = capsys.readouterr().err
    assert "--config" in err and "distcheck init" in err and "distcheck_config" not in err


def test_distcheck_cite_checks_the_listed_notes_from_a_subfolder(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(NOTES / "site"))
    (tmp_path / "checks").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(NOTES / "good.md", tmp_path / "docs" / "a.md")
    (tmp_path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'reading-notes-cited'\ntitle = 'n'\nhow = 'write'\n"
        "[notes]\npaths = ['docs/a.md']\nmin_cited_decisions = 1\npackages = ['toyparallel']\n")
    monkeypatch.chdir(tmp_path / "docs")
    assert main(["cite"]) == 0
    assert "a.md" in capsys.readouterr().out


def test_pytest_gate_from_a_subfolder_checks_the_workspace(workspace_dir, monkeypatch):
    write_checks(workspace_dir, "pass", "pass")
    workspace_dir.makeini("[pytest]\n")  # the rootdir is the workspace root; no distcheck_config key
    sub = workspace_dir.mkdir("notes")
    (sub / "test_mine.py").write_text("def test_mine():\n    pass\n")
    monkeypatch.chdir(sub)
    git_commit_all(workspace_dir.path)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate")
    # --gate runs `distcheck gate` (pytest_distcheck/dod/gate.py), which walks up to the workspace
    result.stdout.fnmatch_lines(["pytest --gate: runs `distcheck gate`*", unverified(2, 2)])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the test phase ships no DoD: all done, never PASSED


def test_a_workspace_above_the_rootdir_is_named_with_what_to_do(workspace_dir, monkeypatch):
    write_checks(workspace_dir, "pass", "pass")
    sub = workspace_dir.mkdir("sub")
    (sub / "pytest.ini").write_text("[pytest]\n")  # pytest's rootdir will be sub/, not the workspace root
    monkeypatch.chdir(sub)
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*checks/distcheck.toml: found walking up from *sub, but pytest's rootdir is "
                                 "*sub (no ini file at *): run pytest from there, or add a pytest.ini there*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_separate_path_values():
    assert separate_path_values(["--gate", "--dod-json", "a.json", "--dod-markdown=b.md", "-x"]) == [
        ("--dod-json", "a.json")]


def test_the_fixed_form_of_a_path_with_a_space_pastes_as_one_word():
    assert as_written_and_fixed([("--dod-json", "/tmp/odd setups/r.json"), ("--workspace", "w.toml")]) == (
        "--dod-json '/tmp/odd setups/r.json' --workspace w.toml",
        "'--dod-json=/tmp/odd setups/r.json' --workspace=w.toml")


def test_an_existing_report_path_never_moves_the_rootdir(workspace_dir, tmp_path_factory):
    """`--dod-json /elsewhere/dod.json` a second time (the file exists): pytest would take it for a test
    path and check nothing under another rootdir; the run stops and says to write PATH with '='."""
    write_checks(workspace_dir, "pass", "pass")
    workspace_dir.makeini("[pytest]\n")
    git_commit_all(workspace_dir.path)  # the gate judges the commit
    out = tmp_path_factory.mktemp("reports") / "dod.json"
    first = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider", "--gate", "--dod-json", str(out))
    assert first.ret == pytest.ExitCode.TESTS_FAILED and json.loads(out.read_text())["gate"]["verdict"] == "unverified"
    again = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider", "--gate", "--dod-json", str(out))
    again.stderr.fnmatch_lines([f"*--dod-json {out}: pytest took the existing file for a test path*"
                                f"write it with '=': --dod-json={out}"])
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    fixed = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider", "--gate", f"--dod-json={out}")
    assert fixed.ret == pytest.ExitCode.TESTS_FAILED and "gate: UNVERIFIED (2/2 items done;" in fixed.stdout.str()


@pytest.mark.parametrize("args", [("-m", "local"), (), ("-m", "gpu", "--max-usd", "3")])
def test_pytest_from_a_subfolder_without_tests_checks_the_workspace(workspace_dir, monkeypatch, args):
    """`cd docs && pytest -m local` (or plain pytest, or -m gpu): pytest's testpaths apply only at the
    rootdir, so it would collect docs/ (nothing, exit 5); the kit collects the workspace's checks as --dod does."""
    write_checks(workspace_dir, "pass", "pass")
    workspace_dir.makeini("[pytest]\ntestpaths = checks\n")
    monkeypatch.chdir(workspace_dir.mkdir("docs"))
    result = workspace_dir.runpytest("-p", "no:cacheprovider", *args)
    result.stdout.fnmatch_lines(["*started in a subfolder without paths: collecting checks*",
                                 "collected 2 items*", "*Definition of Done: phase t1*"])
    assert result.stdout.str().count("was not checked in this run") <= 1


def test_pytest_from_a_subfolder_with_its_own_tests_collects_them(workspace_dir, monkeypatch):
    write_checks(workspace_dir, "pass", "pass")
    workspace_dir.makeini("[pytest]\ntestpaths = checks\n")
    sub = workspace_dir.mkdir("mine")
    (sub / "test_mine.py").write_text("def test_mine():\n    pass\n")
    monkeypatch.chdir(sub)
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("was not checked in this run") == 1


def test_pytest_gate_speaks_the_learners_language_in_the_gates_process(workspace_dir, monkeypatch):
    from pytest_distcheck import i18n
    from pytest_distcheck.dod.gate import HEADER
    from pytest_distcheck.dod.options import HANDED_OVER
    from pytest_distcheck.i18n import _

    write_checks(workspace_dir, "pass", "pass")
    workspace_dir.makeini("[pytest]\n")
    git_commit_all(workspace_dir.path)
    monkeypatch.setenv(i18n.ENV, "es")  # the gate's process reads no DISTCHECK_* variable: it gets --lang
    try:
        result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate")
        i18n.use("es")
        handed_over, judging = _(HANDED_OVER), _(HEADER).split("{")[0]
    finally:
        i18n.use(i18n.DEFAULT)
    assert handed_over != HANDED_OVER and judging.strip() not in (HEADER.split("{")[0].strip(), "")
    result.stdout.fnmatch_lines([handed_over + "*", "*" + judging + "*"])
