"""The gate judges the commit (issue 26, points 1 and 4): HEAD's files under the workspace root, read from
git's objects with replace refs off before any check runs. What is not in the commit does not exist; the honest
ways a learner keeps a repository (line endings, worktrees, submodules, shallow clones, hooks, signatures, a
repository owned by another user and trusted) all give the commit's files and a workspace the kit trusts."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from pytest_distcheck.dod import manifest, snapshot
from pytest_distcheck.git import TRUST

REPO = Path(__file__).resolve().parents[1]
NOTE = "docs/notes/megatron.md"


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always",
                           *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}).stdout


def workspace(root: Path, crlf: bool = False) -> Path:
    """A Phase 35 workspace (the shipped checks folder, one note) committed in a new repository at ``root``."""
    shutil.copytree(REPO / "checks", root / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    if crlf:  # files that hold CRLF in the commit itself (core.autocrlf=false on Windows)
        for path in (root / "checks").rglob("*"):
            if path.is_file():
                path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    (root / NOTE).parent.mkdir(parents=True)
    (root / NOTE).write_text("# my notes\n")
    if not (root / ".git").exists() and not _in_repo(root):
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "work")
    return root


def _in_repo(path: Path) -> bool:
    return subprocess.run(["git", "-C", str(path), "rev-parse"], capture_output=True).returncode == 0


def trusted(snap: snapshot.Snapshot) -> dict:
    ws = snap.folder / "checks" / "distcheck.toml"
    raw = tomllib.loads(ws.read_text(encoding="utf-8"))
    return manifest.compare(ws, snap.folder, raw, manifest.shipped("35"))


def test_what_is_not_in_the_commit_does_not_exist(tmp_path):
    root = workspace(tmp_path / "ws")
    (root / ".gitignore").write_text("docs/notes/fsdp.md\n.venv/\n")
    (root / "docs" / "notes" / "fsdp.md").write_text("ignored, only in the work tree\n")
    (root / "untracked.md").write_text("never added\n")
    (root / "staged.md").write_text("staged, never committed\n")
    git(root, "add", "staged.md")
    (root / NOTE).write_text("changed after the commit\n")
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "x.py").write_text("")
    with snapshot.export(root) as snap:
        files = {p.relative_to(snap.folder).as_posix() for p in snap.folder.rglob("*") if p.is_file()}
        assert (snap.folder / NOTE).read_text() == "# my notes\n"
        assert snapshot.exported(snap.folder) is snap and snap.root == root.resolve()
    assert not {"docs/notes/fsdp.md", "untracked.md", "staged.md", ".gitignore"} & files and NOTE in files
    assert not any(f.startswith(".venv/") for f in files)
    assert snapshot.exported(snap.folder) is None and not snap.folder.exists()


def test_a_blob_replaced_with_git_replace_is_read_as_committed(tmp_path):
    """Red team: a made-up log staged behind `git replace`: the commit's own blob is what the gate reads."""
    root = workspace(tmp_path / "ws")
    original = git(root, "rev-parse", f"HEAD:{NOTE}").strip()
    forged = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input="forged\n", text=True,
                            capture_output=True, check=True).stdout.strip()
    git(root, "replace", original, forged)
    assert git(root, "show", f"HEAD:{NOTE}") == "forged\n"  # what plain git shows now
    with snapshot.export(root) as snap:
        assert (snap.folder / NOTE).read_text() == "# my notes\n"


def test_bytecode_and_links_out_of_the_root_are_not_written(tmp_path):
    root = workspace(tmp_path / "ws")
    (root / "checks" / "__pycache__").mkdir()
    (root / "checks" / "__pycache__" / "test_quiz_passed.cpython-311-pytest-9.pyc").write_bytes(b"forged")
    (root / "outside").symlink_to("/etc/hostname")
    (root / "inside").symlink_to("docs/notes/megatron.md")
    git(root, "add", "-Af")
    git(root, "commit", "-qm", "more")
    with snapshot.export(root) as snap:
        assert not (snap.folder / "checks" / "__pycache__").exists()
        assert not (snap.folder / "outside").exists() and (snap.folder / "inside").read_text() == "# my notes\n"


def test_no_repository_no_commit_and_another_users_repository_name_the_fix(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(snapshot.SnapshotError, match="is not in a git repository.*git init && git add -A"):
        snapshot.export(tmp_path / "plain").__enter__()
    git(tmp_path / "plain", "init", "-q")
    with pytest.raises(snapshot.SnapshotError, match="has no commit yet.*git add -A && git commit"):
        snapshot.export(tmp_path / "plain").__enter__()


def _chowned(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository to another user")
    root = workspace(tmp_path / "ws")
    for path in (root, *root.rglob("*")):
        os.lchown(path, 65534, 65534)
    return root


def test_a_repository_owned_by_another_user_names_safe_directory(tmp_path, monkeypatch):
    root = _chowned(tmp_path)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "empty.gitconfig"))
    with pytest.raises(snapshot.SnapshotError) as err:
        snapshot.export(root).__enter__()
    assert str(err.value).endswith("if you trust it: " + TRUST.format(path=root.resolve()))


def _plain(tmp_path):
    return workspace(tmp_path / "ws")


def _autocrlf_clone(tmp_path):
    """Git for Windows' default: the work tree holds CRLF, the commit LF."""
    workspace(tmp_path / "origin")
    git(tmp_path, "-c", "core.autocrlf=true", "clone", "-q", "origin", "ws")
    git(tmp_path / "ws", "config", "core.autocrlf", "true")
    assert b"\r\n" in (tmp_path / "ws" / "checks" / "distcheck.toml").read_bytes()
    return tmp_path / "ws"


def _crlf_committed(tmp_path):
    return workspace(tmp_path / "ws", crlf=True)


def _eol_attributes(tmp_path):
    root = workspace(tmp_path / "origin")
    (root / ".gitattributes").write_text("* text eol=crlf\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    git(tmp_path, "clone", "-q", "origin", "ws")
    return tmp_path / "ws"


def _worktree(tmp_path):
    workspace(tmp_path / "main")
    git(tmp_path / "main", "worktree", "add", "-q", str(tmp_path / "ws"))
    return tmp_path / "ws"


def _inside_a_bigger_repository(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("other things\n")
    return workspace(tmp_path / "courses" / "phase 35")


def _with_a_submodule(tmp_path):
    other = tmp_path / "vendored"
    other.mkdir()
    git(other, "init", "-q")
    (other / "x.py").write_text("")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "v")
    root = workspace(tmp_path / "ws")
    git(root, "submodule", "add", "-q", str(other), "third_party/vendored")
    git(root, "commit", "-qm", "submodule")
    return root


def _shallow_clone(tmp_path):
    root = workspace(tmp_path / "origin")
    (root / "more.md").write_text("a second commit\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "second")
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{root}", "ws")
    return tmp_path / "ws"


def _odd_path(tmp_path):
    return workspace(tmp_path / "my work, ñandú 35")


def _signed_commit(tmp_path):
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    root = workspace(tmp_path / "ws")
    (root / "more.md").write_text("signed\n")
    git(root, "add", "-A")
    git(root, "-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-qS", "-m", "signed")
    return root


def _trusted_other_owner(tmp_path):
    root = _chowned(tmp_path)
    os.environ.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
    return root


VARIANTS = {f.__name__.lstrip("_"): f for f in (_plain, _autocrlf_clone, _crlf_committed, _eol_attributes, _worktree,
                                                _inside_a_bigger_repository, _with_a_submodule, _shallow_clone,
                                                _odd_path, _signed_commit, _trusted_other_owner)}


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_an_honest_repository_gives_the_commits_files_and_a_trusted_workspace(tmp_path, monkeypatch, variant):
    for key in ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "empty.gitconfig"))
    root = variant(tmp_path)
    # A pre-commit hook's variables (git sets them for the hook) point at another repository and index.
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "nowhere" / "index"))
    try:
        with snapshot.export(root) as snap:
            assert (snap.folder / NOTE).read_bytes().replace(b"\r\n", b"\n") == b"# my notes\n"
            canonical = trusted(snap)
            assert canonical["trusted"], canonical["problems"]
            assert len(snap.commit) == 40
    finally:
        for key in ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"):
            os.environ.pop(key, None)


def test_the_gate_says_when_the_folder_has_work_its_commit_lacks(tmp_path):
    """Run where the learner works, the gate judges the commit; files changed or never committed are named
    first, since a hint like `distcheck diagram > docs/tp-sharding.md` would overwrite a drawn page."""
    from dod_support import git_commit_all

    from pytest_distcheck.dod.gate import not_all_committed

    (tmp_path / "a.md").write_text("a\n")
    git_commit_all(tmp_path)
    assert not_all_committed(tmp_path, "abc") == ""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tp-sharding.md").write_text("drawn\n")
    (tmp_path / "a.md").write_text("changed\n")
    said = not_all_committed(tmp_path, "abc")
    assert said.startswith("distcheck gate: note: 2 files here differ from commit abc or are not in it (a.md, "
                           "docs/tp-sharding.md): the gate judges the commit, so commit them first"), said
    (tmp_path / "a.md").write_text("a\n")
    assert not_all_committed(tmp_path, "abc").startswith("distcheck gate: note: 1 file here differs from commit abc")
    # A venv under another name than .gitignore's .venv/ is no work the commit lacks (nor told to be committed).
    for name in ("venv/pyvenv.cfg", "venv/bin/activate", "venv/lib/python3.11/site-packages/x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    assert not_all_committed(tmp_path, "abc").startswith("distcheck gate: note: 1 file here differs from commit abc "
                                                         "or is not in it (docs/tp-sharding.md)")


def test_the_note_on_work_the_commit_lacks_leaves_out_the_gates_own_reports(tmp_path, monkeypatch):
    """Run a second time, the gate does not ask to commit the reports its first run wrote (--dod-json,
    --dod-markdown), named relative to the folder it started in or absolute, in a workspace below the top of its
    repository; any other file still counts."""
    from dod_support import git_commit_all

    from pytest_distcheck.dod.gate import not_all_committed

    ws = tmp_path / "course" / "lab"
    ws.mkdir(parents=True)
    (ws / "a.md").write_text("a\n")
    git_commit_all(tmp_path)
    for name in ("dod-report.json", "summary.md", "notes.md"):
        (ws / name).write_text("x\n")
    monkeypatch.chdir(ws)
    said = not_all_committed(ws, "abc", ("dod-report.json", str(ws / "summary.md"), None))
    assert said.startswith("distcheck gate: note: 1 file here differs from commit abc or is not in it "
                           "(course/lab/notes.md)"), said
    (ws / "notes.md").unlink()
    assert not_all_committed(ws, "abc", ("dod-report.json", ws / "summary.md")) == ""
    assert "dod-report.json" in not_all_committed(ws, "abc")
