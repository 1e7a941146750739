"""Is a deliverable committed? For DoD items whose docs say "committed" (a curve, a diagram, a log).

A check calls :func:`require_committed` once its evidence is right: a file that is untracked, only staged, changed
since its last commit, ignored by git, or in a workspace outside any git repository leaves the item pending (never
broken: the evidence is right, only the step that publishes it is missing), with the git command that commits it. A
file staged as it is (a ``pre-commit`` hook running the checks sees every file of the commit in progress so) is said
to be staged, and its command is ``git commit -m ...`` alone. Under the gate the checks run on the commit itself
(:mod:`pytest_distcheck.dod.snapshot`), where everything is committed. git refusing the repository ("dubious
ownership") is a reason that names the fix, never a traceback.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pytest_distcheck.dod import snapshot
from pytest_distcheck.dod.outcome import pending
from pytest_distcheck.git import run_git, said
from pytest_distcheck.i18n import N_, _

NOT_A_REPOSITORY = N_("{root} is not in a git repository")
CANNOT_READ = N_("git cannot read the repository at {root}: {said}")
NOT_RUN = N_("git could not be run ({error})")
GIT_FAILED = N_("git failed at {root}: {said}")
IGNORED = N_("{path} is ignored by git (see .gitignore), so it cannot be committed")
NOT_COMMITTED = N_("{path} is not committed")
CHANGED = N_("{path} has uncommitted changes")
STAGED = N_("{path} is staged but not committed yet: it counts once the commit is made")
# The same seen from a git hook (git sets GIT_INDEX_FILE for it): the commit is the one being made.
STAGED_IN_HOOK = N_("{path} is staged in the commit being made: it counts once that commit is made")
# The commit message of the command a pending item prints: -m so no editor opens when it is pasted. English in
# every language, as the pages and the other commands' commit lines write their messages.
EVIDENCE_MESSAGE = "DoD evidence"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_git(root, *args)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def uncommitted(paths: Sequence[Path | str], root: Path) -> list[str]:
    """Why each of ``paths`` is not committed as it is; ``[]`` when all are.

    Args:
        paths: files, absolute or relative to ``root``.
        root: the workspace root (git is asked there); reasons name paths relative to it.

    Returns:
        One reason per path not committed: ``"<path> is not committed"`` (untracked, or staged with changes
        since), ``"<path> is staged but not committed yet: ..."`` (the index holds it as it is, ``HEAD`` does
        not), ``"<path> has uncommitted changes"``, ``"<path> is ignored by git"``; or a single reason for
        all: ``"<root> is not in a git repository"``, or what git said when it could not be run. Never raises.
    """
    return [reason for _path, reason, _staged in _findings(paths, root)]


def _findings(paths: Sequence[Path | str], root: Path) -> list[tuple[Path | None, str, bool]]:
    """:func:`uncommitted`'s reasons as ``(file, reason, staged)``: ``staged`` when committing the index as
    it is would commit ``file``; ``file`` is ``None`` for a reason about the whole repository."""
    root = Path(root)
    files = [(root / p).resolve() for p in paths]
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            if "not a git repository" in top.stderr:
                return [(None, _(NOT_A_REPOSITORY).format(root=root), False)]
            return [(None, _(CANNOT_READ).format(root=root, said=said(top, root)), False)]
        toplevel = Path(top.stdout.strip()).resolve()
        names = [str(f) for f in files]
        tracked = _git(root, "ls-files", "-s", "-z", "--full-name", "--", *names)
        status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--",
                      *names)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [(None, _(NOT_RUN).format(error=exc), False)]
    for proc in (tracked, status):
        if proc.returncode != 0:
            return [(None, _(GIT_FAILED).format(root=root, said=said(proc, root)), False)]
    blobs = {}  # path -> (mode, blob id) as the index holds it
    for entry in tracked.stdout.split("\0"):
        if entry:
            meta, name = entry.split("\t", 1)
            mode, blob = meta.split()[:2]
            blobs[(toplevel / name).resolve()] = (mode, blob)
    committed = set(blobs)
    changed: dict[Path, str] = {}
    entries = iter(status.stdout.split("\0"))
    for entry in entries:
        if not entry:
            continue
        code, name = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename or copy names its source next
            next(entries, None)
        changed[(toplevel / name).resolve()] = code
    found: list[tuple[Path | None, str, bool]] = []
    for f in files:
        code, rel = changed.get(f), _rel(f, root)
        if code == "!!":
            found.append((f, _(IGNORED).format(path=rel), False))
        elif code is not None and code[0] in "AMRCT" and code[1] == " " and f in committed:
            # index == working tree, HEAD differs: what a pre-commit hook sees of the commit in progress
            found.append((f, _(STAGED_IN_HOOK if os.environ.get("GIT_INDEX_FILE") else STAGED).format(path=rel), True))
        elif code == "??" or code is not None and code[0] == "A" or f not in committed:
            found.append((f, _(NOT_COMMITTED).format(path=rel), False))
        elif code is not None:
            found.append((f, _(CHANGED).format(path=rel), False))
    return found


def commit_command(paths: Sequence[str], message: str, cwd: Path | str = ".") -> str:
    """The one line a person runs in ``cwd`` to commit ``paths`` (as typed from ``cwd``) with ``message``.

    ``git add P && git commit -m "MESSAGE" -- P``: ``-m`` so no editor opens, ``-- P`` so nothing else
    already staged goes into the commit; preceded by ``git init && `` when ``cwd`` is in no git repository
    (the form ``distcheck quiz`` first printed). ``message`` must not hold a double quote. Never raises.
    """
    quoted = " ".join(shlex.quote(str(p)) for p in paths)
    line = f'git add {quoted} && git commit -m "{message}" -- {quoted}'
    try:
        repo = _git(Path(cwd), "rev-parse", "--show-toplevel").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        repo = True  # git cannot be run here: the plain add/commit says what is needed
    return line if repo else "git init && " + line


def require_committed(paths: Sequence[Path | str], root: Path) -> None:
    """Stop the calling DoD check as pending unless every one of ``paths`` is committed as it is (under the
    gate, whose ``root`` is a commit's files, they are).

    The reason lists :func:`uncommitted`'s findings; the command is ``git add <paths> && git commit -m
    "DoD evidence" -- <paths>`` (:data:`EVIDENCE_MESSAGE`; ``--``: nothing else already staged goes in; preceded by
    ``git init`` outside a repository), with the paths already staged as they are left out of ``git add``:
    ``git commit -m ... -- <paths>`` alone when every path not committed is staged.

    Raises:
        pytest_distcheck.Pending: some path is not committed.
    """
    found = [] if snapshot.exported(root) else _findings(paths, root)
    if not found:
        return
    reasons = [reason for _path, reason, _staged in found]
    staged = {f for f, _reason, is_staged in found if is_staged}
    files = [(Path(root) / p).resolve() for p in paths]
    not_committed = {f for f, _reason, _staged in found}
    # `-- PATHS`: the evidence alone, not whatever else is staged (as commit_command does); every path when the
    # finding is about the whole repository (file None)
    only = files if None in not_committed else [f for f in files if f in not_committed]
    command = f'git commit -m "{EVIDENCE_MESSAGE}" -- ' + " ".join(shlex.quote(_rel(f, Path(root))) for f in only)
    if not all(is_staged for _f, _reason, is_staged in found):
        rels = " ".join(shlex.quote(_rel(f, Path(root))) for f in files if f not in staged)
        command = f"git add {rels} && {command}"
    if reasons[0] == _(NOT_A_REPOSITORY).format(root=Path(root)):
        command = "git init && " + command
    pending("; ".join(reasons), command)
