"""pytest_distcheck.committed: what git says about evidence a DoD item says is committed (issue 12)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_distcheck
from pytest_distcheck.committed import NOT_COMMITTED, STAGED, STAGED_IN_HOOK, require_committed, uncommitted


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_each_state_is_named(tmp_path):
    """A workspace in a subfolder of a repository: untracked, staged only, changed, ignored and
    committed files."""
    ws = tmp_path / "repo" / "ws"
    (ws / "docs").mkdir(parents=True)
    for name in ("done.md", "edited.md", "staged.md", "new.md", "skip.log"):
        (ws / "docs" / name).write_text(name)
    (tmp_path / "repo" / ".gitignore").write_text("*.log\n")
    git(tmp_path / "repo", "init", "-q")
    git(tmp_path / "repo", "add", ".gitignore", "ws/docs/done.md", "ws/docs/edited.md")
    git(tmp_path / "repo", "commit", "-qm", "c")
    git(tmp_path / "repo", "add", "ws/docs/staged.md")
    (ws / "docs" / "edited.md").write_text("changed")
    got = uncommitted(["docs/done.md", "docs/edited.md", "docs/staged.md", "docs/new.md", "docs/skip.log"], ws)
    assert got == ["docs/edited.md has uncommitted changes", STAGED.format(path="docs/staged.md"),
                   "docs/new.md is not committed",
                   "docs/skip.log is ignored by git (see .gitignore), so it cannot be committed"]
    assert uncommitted([ws / "docs" / "done.md"], ws) == []
    git(ws, "add", "docs/edited.md")  # staged as it is: the next commit holds it
    assert uncommitted(["docs/edited.md"], ws) == [STAGED.format(path="docs/edited.md")]
    (ws / "docs" / "edited.md").write_text("changed again")  # staged, then changed: the commit would not hold it
    assert uncommitted(["docs/edited.md"], ws) == ["docs/edited.md has uncommitted changes"]
    (ws / "docs" / "staged.md").write_text("changed after add")
    assert uncommitted(["docs/staged.md"], ws) == ["docs/staged.md is not committed"]


def test_outside_a_repository_the_item_is_pending_with_git_init(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # whatever holds the temp folder
    (tmp_path / "a.md").write_text("a")
    with pytest.raises(pytest_distcheck.Pending) as info:
        require_committed(["a.md"], tmp_path)
    assert info.value.reason == f"{tmp_path} is not in a git repository"
    assert info.value.command == "git init && git add a.md && git commit -m \"DoD evidence\" -- a.md"


def test_untracked_is_pending_with_the_git_command(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a b.md").write_text("a")
    with pytest.raises(pytest_distcheck.Pending) as info:
        require_committed(["a b.md"], tmp_path)
    assert info.value.reason == "a b.md is not committed"
    assert info.value.command == "git add 'a b.md' && git commit -m \"DoD evidence\" -- 'a b.md'"
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "c")
    require_committed(["a b.md"], tmp_path)  # returns: committed as it is


def test_staged_as_it_is_is_pending_with_git_commit_alone(tmp_path):
    """A file the index holds as it is (what a pre-commit hook sees) is said to be staged, and nothing is to be
    added; beside a file that is not staged, only that one is."""
    git(tmp_path, "init", "-q")
    (tmp_path / "a b.md").write_text("a")
    (tmp_path / "log.json").write_text("{}")
    git(tmp_path, "add", "a b.md")
    assert STAGED.format(path="a b.md") == "a b.md is staged but not committed yet: it counts once the commit is made"
    with pytest.raises(pytest_distcheck.Pending) as info:
        require_committed(["a b.md"], tmp_path)
    assert info.value.reason == STAGED.format(path="a b.md")
    assert info.value.command == 'git commit -m "DoD evidence" -- \'a b.md\''
    with pytest.raises(pytest_distcheck.Pending) as info:
        require_committed(["a b.md", "log.json"], tmp_path)
    assert info.value.reason == STAGED.format(path="a b.md") + "; " + NOT_COMMITTED.format(path="log.json")
    assert info.value.command == "git add log.json && git commit -m \"DoD evidence\" -- 'a b.md' log.json"
    git(tmp_path, "add", "log.json")
    git(tmp_path, "commit", "-qm", "c")
    require_committed(["a b.md", "log.json"], tmp_path)


HOOK_CHECK = """
from pathlib import Path

import pytest

from pytest_distcheck.committed import require_committed


@pytest.mark.local
@pytest.mark.dod("alpha")
def test_alpha():
    require_committed(["evidence.md"], Path(__file__).resolve().parents[1])
"""


@pytest.mark.parametrize("commit", [["commit"], ["commit", "-a"], ["commit", "evidence.md"]])
def test_a_pre_commit_hook_sees_its_staged_evidence_as_staged(workspace_dir, commit):
    """`pytest -m local` run by .git/hooks/pre-commit during `git commit`: the evidence staged for that commit
    is said to be staged (still pending: the gate judges a commit), with `git commit` and no `git add`. With -a
    or a path, git commits from a temporary index (GIT_INDEX_FILE), which the kit reads then."""
    ws = workspace_dir.path
    (ws / "checks" / "test_checks.py").write_text(HOOK_CHECK)
    (ws / "evidence.md").write_text("done\n")
    out = ws.parent / "hook-output.txt"
    hook = ws / ".git" / "hooks" / "pre-commit"
    git(ws, "init", "-q")
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        "{sys.executable}" -m pytest -m local -p no:cacheprovider > "{out}" 2>&1
        """))
    hook.chmod(0o755)
    git(ws, "add", "-A")
    if commit != ["commit"]:  # tracked before, changed now: only the commit's own index has it staged
        git(ws, "commit", "-qm", "first", "--no-verify")
        (ws / "evidence.md").write_text("done, again\n")
    git(ws, *commit, "-qm", "evidence")  # the hook ends 0: the commit is made
    text = out.read_text()
    assert "PENDING  alpha  " + STAGED_IN_HOOK.format(path="evidence.md") in text, text  # git sets GIT_INDEX_FILE
    assert "-> git commit -m \"DoD evidence\" -- evidence.md\n" in text, text
    assert "git add" not in text, text
    require_committed(["evidence.md"], ws)  # once the commit is made, it counts




def test_git_variables_of_a_hook_or_a_shell_do_not_shadow_the_repository(tmp_path, monkeypatch):
    """GIT_DIR/GIT_WORK_TREE (set by git for its hooks, or left in a shell) point at another repository in which
    the log is committed; every git call of the kit still reads the workspace's own repository."""
    from pytest_distcheck.dod.report import _git_commit

    ws, shadow = tmp_path / "ws", tmp_path / "shadow"
    ws.mkdir()
    shadow.mkdir()
    (ws / "log.json").write_text("{}")
    (ws / "other.md").write_text("x")
    git(ws, "init", "-q")
    git(ws, "add", "other.md")
    git(ws, "commit", "-qm", "real")
    real_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()
    env = {"GIT_DIR": str(shadow / ".git"), "GIT_WORK_TREE": str(ws)}
    for args in (("init", "-q"), ("add", "log.json"), ("commit", "-qm", "shadow")):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=ws, check=True,
                       capture_output=True, env={**os.environ, **env})
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert uncommitted(["log.json"], ws) == ["log.json is not committed"]
    assert _git_commit(ws) == real_head
