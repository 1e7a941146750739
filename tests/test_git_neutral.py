"""No git call of the kit runs a program the repository configures (red team t4, A4).

A4: lab code set ``core.fsmonitor`` in ``.git/config`` to a script; the gate's parent ran ``git status``
(``repo_state``) after its leftover watch ended, git started the script, and the script's daemon rewrote the
learner's report to PASSED after the parent exited. Every kit git call (``pytest_distcheck.git.run_git``) now
turns off what in the repository's, the user's or the system's config runs a program for the commands the kit
runs: the fsmonitor hook, clean and process filters (also in a submodule), hooks, ``log.showSignature`` with
``gpg.program``. The gate's parent also names a config, hook or ``info/attributes`` change as a repository
change.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from dod_support import git_commit_all

from pytest_distcheck.committed import uncommitted
from pytest_distcheck.dod.isolation import repo_changes, repo_state
from pytest_distcheck.dod.report import _git_commit
from pytest_distcheck.git import run_git

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]


def _script(path: Path, marker: Path, body: str = "cat") -> str:
    """An executable shell script that touches ``marker`` then runs ``body``; its path."""
    path.write_text(f"#!/bin/sh\ntouch '{marker}'\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _git(root: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)


def _stat_dirty(path: Path) -> None:
    """Same content, another mtime: git must hash the file again (through its clean filter, if any)."""
    t = path.stat().st_mtime - 3600
    os.utime(path, (t, t))


def _booby_trapped(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A committed repository (with a submodule) whose config runs a marker-writing script from every place
    git may start one for status/ls-files/hash-object/reflog; the user's and the system's config too."""
    marks, bin_ = tmp_path / "ran", tmp_path / "bin"
    marks.mkdir()
    bin_.mkdir()
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / ".gitattributes").write_text("*.txt filter=g\n")
    (sub / "s.txt").write_text("s\n")
    git_commit_all(sub)
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitattributes").write_text("*.txt filter=f\n*.md filter=p\n*.cfg filter=h\n")
    (root / "a.txt").write_text("a\n")
    (root / "c.cfg").write_text("c\n")
    (root / "n.md").write_text("n\n")
    git_commit_all(root)
    _git(root, "submodule", "add", "-q", str(sub), "s")
    _git(root, "commit", "-qm", "sub")
    # A commit with a signature header at HEAD's reflog tip: `log.showSignature` would run gpg.program on it.
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=root, capture_output=True, text=True).stdout
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout
    signed = (f"tree {tree.strip()}\nparent {head.strip()}\nauthor t <t@t> 1 +0000\ncommitter t <t@t> 1 +0000\n"
              "gpgsig -----BEGIN PGP SIGNATURE-----\n x\n -----END PGP SIGNATURE-----\n\nsigned\n")
    commit = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=root, input=signed,
                            capture_output=True, text=True, check=True).stdout.strip()
    _git(root, "update-ref", "-m", "signed", "HEAD", commit)
    for key, name, body in (("core.fsmonitor", "fsmonitor", "exit 1"), ("filter.f.clean", "clean", "cat"),
                            ("filter.f.required", None, None), ("filter.p.process", "process", "exit 1"),
                            ("gpg.program", "gpg", "exit 1"), ("log.showSignature", None, None)):
        value = _script(bin_ / name, marks / name, body) if name else "true"
        _git(root, "config", key, value)
    _git(root / "s", "config", "filter.g.clean", _script(bin_ / "subclean", marks / "subclean"))
    _git(root / "s", "config", "core.fsmonitor", _script(bin_ / "subfsmonitor", marks / "subfsmonitor", "exit 1"))
    hooks = Path(subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip())
    hooks = hooks if hooks.is_absolute() else root / hooks
    for hook in ("post-index-change", "reference-transaction"):
        _script(hooks / hook, marks / hook, "exit 0")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[filter \"h\"]\n\tclean = {_script(bin_ / 'global', marks / 'global')}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for f in (root / "a.txt", root / "n.md", root / "c.cfg", root / "s" / "s.txt"):
        _stat_dirty(f)
    return root, marks


def test_no_kit_git_call_runs_a_program_the_configuration_names(tmp_path, monkeypatch):
    root, marks = _booby_trapped(tmp_path, monkeypatch)
    # Without the kit's neutralisation git runs them (so the trap is armed; a failing process filter stops
    # git before it reaches the submodule):
    subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, check=False)
    subprocess.run(["git", "-c", "filter.p.process=", "status", "--porcelain"], cwd=root, capture_output=True)
    subprocess.run(["git", "reflog", "-n1", "--format=%gd: %gs", "HEAD"], cwd=root, capture_output=True)
    assert {p.name for p in marks.iterdir()} == {"fsmonitor", "clean", "process", "post-index-change", "subclean",
                                                 "subfsmonitor", "gpg", "global"}
    for p in marks.iterdir():
        p.unlink()
    for f in (root / "a.txt", root / "n.md", root / "c.cfg", root / "s" / "s.txt"):
        _stat_dirty(f)

    state = repo_state(root)
    assert state is not None and state["tracked"] == "", state
    assert uncommitted(["a.txt", "n.md"], root) == []
    assert _git_commit(root) == state["head"]
    assert run_git(root, "ls-files", "-s").returncode == 0
    assert state["reflog"] == "HEAD@{0}: signed"
    assert sorted(p.name for p in marks.iterdir()) == []


def test_a_config_hook_or_attributes_change_is_a_repository_change(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    git_commit_all(tmp_path)
    start = repo_state(tmp_path)
    assert repo_changes(start, repo_state(tmp_path)) == []
    _git(tmp_path, "config", "core.fsmonitor", "/bin/true")
    _git(tmp_path, "config", "user.name", "me")
    assert repo_changes(start, repo_state(tmp_path)) == [
        "the repository changed while the gate ran: the repository's config changed (core.fsmonitor, user.name)"]
    _git(tmp_path, "config", "--unset", "core.fsmonitor")
    _git(tmp_path, "config", "--unset", "user.name")
    assert repo_changes(start, repo_state(tmp_path)) == []
    hook = tmp_path / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\n")
    assert repo_changes(start, repo_state(tmp_path)) == [
        "the repository changed while the gate ran: the repository's hooks changed (.git/hooks)"]
    hook.unlink()
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "attributes").write_text("* filter=x\n")
    assert repo_changes(start, repo_state(tmp_path)) == [
        "the repository changed while the gate ran: the repository's attributes changed (.git/info/attributes)"]


def test_a_git_dropped_on_path_after_the_kit_was_imported_is_not_run(tmp_path, monkeypatch):
    """Lab code can write into a folder on PATH (a virtual environment's bin); the gate's parent imported the kit
    before any lab code ran."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.txt").write_text("a")
    git_commit_all(tmp_path / "repo")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _script(bin_ / "git", tmp_path / "ran", "exit 1")
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    assert repo_state(tmp_path / "repo") is not None
    assert not (tmp_path / "ran").exists()
