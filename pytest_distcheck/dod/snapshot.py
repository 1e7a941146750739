"""The commit the gate judges: HEAD's files under the workspace root, copied out of git before any check runs.

:func:`export` reads HEAD's tree (``git ls-tree -r -z``) and its blobs (``git cat-file --batch``: raw, no
filter, no textconv, no work tree), replace refs off, and writes them into a fresh folder; the gate's checks
run there, so a file that is not in the commit does not exist for them, whatever the work tree holds.
Submodules, links that leave the root and bytecode (``__pycache__``, ``*.pyc``) are not written.
While it exists the folder is registered (:func:`exported`): a check asks there whether the gate is on, and
:mod:`pytest_distcheck.committed` knows that everything in it is committed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.git import run_git, said
from pytest_distcheck.i18n import N_, _

NO_REPOSITORY = N_("{root} is not in a git repository, and the gate judges a commit: "
                   "git init && git add -A && git commit -m 'my work'")
NO_COMMIT = N_("the repository at {root} has no commit yet, and the gate judges one: git add -A && git commit -m "
               "'my work'")
NOT_IN_COMMIT = N_("the workspace folder {prefix} is not in commit {commit}: git add -A && git commit -m 'my work'")
NO_GIT = N_("git could not be run at {root} ({error})")


class SnapshotError(DistcheckError):
    """The commit cannot be read: what git said, and the command that fixes it."""


@dataclass(frozen=True)
class Snapshot:
    """HEAD's files under a workspace ``root``, written to ``folder``: ``commit`` (its id), ``files`` (how many);
    ``command``: the gate's command line as typed, for the report."""

    root: Path
    commit: str
    folder: Path
    files: int
    command: str = "distcheck gate"


_EXPORTED: dict[Path, Snapshot] = {}


def exported(folder: Path | str) -> Snapshot | None:
    """The snapshot whose files are in ``folder`` (a workspace root), while the gate runs there; else ``None``."""
    return _EXPORTED.get(Path(folder).resolve())


def _git(root: Path, *args: str, text: bool = True, data: bytes | None = None) -> Any:
    try:
        proc = run_git(root, *args, text=text, data=data, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SnapshotError(_(NO_GIT).format(root=root, error=exc)) from None
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
        raise SnapshotError(_(NO_REPOSITORY).format(root=root) if "not a git repository" in err else said(proc, root))
    return proc.stdout.strip() if text and data is None else proc.stdout


def tree(root: Path) -> tuple[str, Path, list[tuple[str, str, str]]]:
    """HEAD's commit id, the repository's top folder and ``(mode, blob id, path)`` of every entry under ``root``
    (paths relative to it, submodules aside).

    Raises:
        SnapshotError: no repository, no commit, the folder not in the commit, or git refused (named, with the fix).
    """
    top = Path(_git(root, "rev-parse", "--show-toplevel"))
    prefix = _git(root, "rev-parse", "--show-prefix")
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except SnapshotError:
        raise SnapshotError(_(NO_COMMIT).format(root=root)) from None
    try:
        listing = _git(top, "ls-tree", "-r", "-z", f"{commit}:{prefix}", text=False)
    except SnapshotError:
        raise SnapshotError(_(NOT_IN_COMMIT).format(prefix=prefix or ".", commit=commit[:12])) from None
    entries = []
    for entry in listing.split(b"\0"):
        if entry:
            meta, path = entry.split(b"\t", 1)
            mode, kind, oid = meta.decode().split()
            if kind == "blob":
                entries.append((mode, oid, os.fsdecode(path)))
    return commit, top, entries


def _blobs(top: Path, oids: list[str]) -> Iterator[bytes]:
    """The raw content of each blob, in order (``git cat-file --batch``)."""
    out, at = _git(top, "cat-file", "--batch", data="".join(f"{o}\n" for o in oids).encode()), 0
    for _oid in oids:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        yield out[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1


def _bytecode(path: str) -> bool:
    return "__pycache__" in path.split("/") or path.endswith(".pyc")


def write(root: Path, dest: Path) -> tuple[str, int]:
    """Write HEAD's files under ``root`` into the folder ``dest``; ``(commit id, files written)``.

    A link is written when its target stays inside ``dest``; bytecode (under ``__pycache__``, ``*.pyc``) never
    is: it is no evidence, and Python would run it in place of the source it claims to be.

    Raises:
        SnapshotError: see :func:`tree`.
    """
    commit, top, entries = tree(root)
    keep = [e for e in entries if not _bytecode(e[2])]
    written = 0
    for (mode, _oid, path), data in zip(keep, _blobs(top, [e[1] for e in keep]), strict=True):
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            link = os.fsdecode(data)
            if os.path.isabs(link) or os.path.normpath(os.path.join(os.path.dirname(path), link)).startswith(".."):
                continue
            target.symlink_to(link)
        else:
            target.write_bytes(data)
        written += 1
    return commit, written


@contextlib.contextmanager
def export(root: Path, command: str = "distcheck gate") -> Iterator[Snapshot]:
    """HEAD's files under ``root`` in a fresh temporary folder, registered for :func:`exported` until the
    ``with`` block ends, then removed; ``command``: the gate's command line (:attr:`Snapshot.command`).

    Raises:
        SnapshotError: see :func:`tree`.
    """
    root = Path(root).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="distcheck-gate-"))
    folder = tmp / root.name
    folder.mkdir()
    try:
        commit, files = write(root, folder)
        snap = _EXPORTED[folder.resolve()] = Snapshot(root, commit, folder, files, command)
        yield snap
    finally:
        _EXPORTED.pop(folder.resolve(), None)
        shutil.rmtree(tmp, ignore_errors=True)
