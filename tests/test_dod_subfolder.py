"""A run started in a subfolder of the workspace (`cd docs && pytest -m local`): every command the DoD table
prints for the learner to copy starts with `cd UP && ` (workspace.at_root), so it works from there; the paths in
it stay relative to the root, where it runs. From the root the table is unchanged (tests/test_dod_table.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dod_support import CHECKS, MINI_WORKSPACE, gate_run, write_checks

from pytest_distcheck.commands.diagram import PAGE_MISSING
from pytest_distcheck.dod.table import FROM_SUBFOLDER
from pytest_distcheck.workspace import at_root, shell_folder, way_to_root

PENDING = "pytest_distcheck.pending('no log yet', 'make alpha --out results/alpha.json')"


def _in_subfolder(pytester, monkeypatch, sub="docs/deep"):
    pytester.makeini("[pytest]\ntestpaths = checks\n")
    here = pytester.path / sub
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    return here


def _command(out: str, prefix: str) -> str:
    """The first command printed after ``prefix`` (``rerun: ``, ``-> ``)."""
    return next(line.split(prefix, 1)[1] for line in out.splitlines() if prefix in line)


def test_way_to_root(tmp_path):
    (tmp_path / "a b" / "c").mkdir(parents=True)
    assert way_to_root(tmp_path, tmp_path) is None
    assert way_to_root(tmp_path, tmp_path / "a b" / "c") == "../.."
    assert way_to_root(tmp_path / "a b", tmp_path) is None  # outside the workspace: nothing known
    assert at_root("pytest --dod x", tmp_path, tmp_path / "a b") == "(cd .. && pytest --dod x)"
    assert at_root("pytest --dod x", tmp_path, tmp_path) == "pytest --dod x"


def test_every_command_of_the_table_starts_with_the_way_to_the_root(workspace_dir, monkeypatch):
    write_checks(workspace_dir, PENDING, "pass")
    _in_subfolder(workspace_dir, monkeypatch)
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([
        "*= Definition of Done: phase t1 =*",
        FROM_SUBFOLDER.format(here="docs/deep/", up="../.."),
        "PENDING  alpha  no log yet",
        "*  -> (cd ../.. && make alpha --out results/alpha.json)",
        "*  rerun: (cd ../.. && pytest --dod alpha)",
        "BLOCKED  beta   blocked by alpha (pending)*",
        "*  -> (cd ../.. && make alpha --out results/alpha.json)",
        "*  rerun: (cd ../.. && pytest --dod beta)",
    ])


def test_in_a_git_hook_the_commands_suit_the_subfolder_the_commit_was_typed_in(workspace_dir, monkeypatch):
    """git runs a pre-commit hook at the top of the working tree; $GIT_PREFIX says where `git commit` was typed."""
    write_checks(workspace_dir, PENDING, "pass")
    (workspace_dir.path / ".git").mkdir()  # the top of a working tree, as git starts a hook there
    (workspace_dir.path / "docs").mkdir()
    monkeypatch.setenv("GIT_PREFIX", "docs/")
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([FROM_SUBFOLDER.format(here="docs/", up=".."),
                                 "*  -> (cd .. && make alpha --out results/alpha.json)"])
    assert shell_folder(workspace_dir.path / "docs") == workspace_dir.path / "docs"  # not a top: as it is


def test_an_item_blocked_by_one_to_fix_gets_the_way_to_the_root_on_its_rerun(workspace_dir, monkeypatch):
    write_checks(workspace_dir, "pytest_distcheck.broken('line 4: not valid JSON')", "pass")
    _in_subfolder(workspace_dir, monkeypatch, "docs")
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*rerun: (cd .. && pytest --dod alpha)",
                                 "*-> first fix alpha (broken), then: (cd .. && pytest --dod alpha)"])


def test_the_printed_rerun_works_from_the_subfolder_in_a_path_with_spaces(pytester, monkeypatch):
    """The rerun line, run as printed (by a shell) in the folder the table was printed in, checks the item again,
    also in a workspace whose path has spaces and with a workspace file that is not the default one."""
    root = pytester.path / "my work"
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "my dod.toml").write_text(MINI_WORKSPACE)
    (root / "checks" / "test_checks.py").write_text(CHECKS.format(alpha=PENDING, beta="pass"))
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = checks\n")
    here = root / "my docs"
    here.mkdir()
    monkeypatch.chdir(here)
    first = pytester.runpytest("-p", "no:cacheprovider", "-m", "local", "--rootdir", str(root),
                               "--workspace", "../checks/my dod.toml")
    rerun = _command(first.stdout.str(), "rerun: ")
    assert rerun == "(cd .. && pytest --dod alpha --workspace 'checks/my dod.toml')"
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    again = subprocess.run(rerun.removesuffix(")") + " -p no:cacheprovider)", shell=True, cwd=here, env=env,
                           capture_output=True, text=True, timeout=300)
    assert "PENDING  alpha  no log yet" in again.stdout, again.stdout + again.stderr
    assert "Definition of Done: phase t1" in again.stdout


def test_the_gate_from_a_subfolder_prints_commands_for_it(workspace_dir):
    """The gate runs pytest in its snapshot of the commit; its table's commands still suit the folder it started in
    (``distcheck gate`` passes it on: dod/gate.py)."""
    write_checks(workspace_dir, PENDING, "pass")
    result = gate_run(workspace_dir, invoked_in="notes")
    result.stdout.fnmatch_lines([FROM_SUBFOLDER.format(here="notes/", up=".."),
                                 "*-> (cd .. && make alpha --out results/alpha.json)",
                                 "*rerun: (cd .. && pytest --dod alpha)"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_distcheck_diagram_names_the_workspace_page_from_the_root(tmp_path, monkeypatch, capsys):
    from pytest_distcheck.cli import main

    (tmp_path / "checks").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "plan.py").write_text("PLAN = {'mlp.up': 'colwise', 'mlp.down': 'rowwise'}\n")
    (tmp_path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'd'\ntitle = 'd'\nhow = 'draw'\n"
        "[diagram]\npage = 'docs/tp sharding.md'\nplan = 'lab.plan:PLAN'\nworld_size = 2\n")
    monkeypatch.chdir(tmp_path / "docs")
    assert main(["diagram", "--check"]) == 2
    said = capsys.readouterr().err
    assert PAGE_MISSING.format(command="(cd .. && distcheck diagram > 'docs/tp sharding.md')") in said
