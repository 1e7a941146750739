"""The phase gate: the DoD checks of one commit, in a process no learner code reaches before the verdict.

``distcheck gate`` (and ``pytest --gate``, which runs it) starts ``python -I -m pytest_distcheck.cli gate``
with :func:`clean_env` unless it already is that process. There, before any check runs, HEAD's files are
copied out of git (:mod:`~pytest_distcheck.dod.snapshot`) and pytest runs the workspace's registered checks
on that copy with the kit's own ini file, no conftest.py, no plugin but the kit's, and the ``__init__.py``
files along the checks' folders left out. Checks that run the learner's code (:data:`LEARNER_CODE`: the DDP
item's live run, on its ranks) run after every other check has judged its evidence; the verdict is the DoD
plugin's, in this process. What this establishes and what not: docs/ci/known-limitations.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest_distcheck
from pytest_distcheck.dod import snapshot
from pytest_distcheck.errors import ConfigError, DistcheckError
from pytest_distcheck.i18n import N_, _, language, ngettext
from pytest_distcheck.workspace import (
    DEFAULT_PATH,
    at_root,
    find_workspace_file,
    load_workspace,
    shell_folder,
    workspace_root,
)

# How the gate's own process learns the command line that started it, as typed (hidden: not for learners).
TYPED_FLAG = "--typed-as"
# The fixtures through which a check runs the learner's code: such checks run last under the gate.
LEARNER_CODE = ("dist_world",)
INI = "# written by pytest-distcheck for the gate\n[pytest]\ndistcheck_config = {ws}\naddopts =\n"
# The gate's ini key: the subfolder of the workspace `distcheck gate` started in, relative to its root, so that the
# DoD table's commands suit the learner's folder, not the snapshot's root (dod/table.py).
INVOKED_IN_INI = "distcheck_invoked_in"
HEADER = N_("distcheck gate: judging commit {commit} of {root} ({files} files; what is not committed is not part of "
             "it), in a process of its own: python -I, no conftest.py, plugins, ini file or PYTEST_*/PYTHON* "
             "variables\n")
EDITABLE = N_("distcheck gate: note: the kit runs from {kit}, inside this workspace (an editable install): a grader "
              "runs the gate with the course's pinned kit installed (docs/ci/known-limitations.md)\n")
# The gate's own words for workspace.NOT_FOUND_HINT: it takes --root DIR, not the other commands' --config FILE.
NOT_FOUND = N_("no checks/distcheck.toml in {start} or any folder above it; run the gate from your workspace, name "
               "its folder (distcheck gate --root DIR), or start one with `distcheck init`")
# {command}: git add {path} && git commit, as typed in the folder the gate started in (workspace.at_root).
NOT_COMMITTED = N_("{path} is not in commit {commit}: {command}")


def clean_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without ``PYTEST_*``, ``DISTCHECK_*`` and ``PYTHON*`` variables, plugin autoload off."""
    env = {k: v for k, v in environ.items() if not k.startswith(("PYTEST_", "DISTCHECK_", "PYTHON"))}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    return env


def isolated() -> bool:
    """Whether this process is the gate's own: ``python -I`` with :func:`clean_env`'s environment."""
    return bool(sys.flags.isolated) and clean_env(dict(os.environ)) == dict(os.environ)


def command(args: list[str]) -> list[str]:
    """The gate's own process: ``python -I -m pytest_distcheck.cli gate ARGS``."""
    return [sys.executable, "-I", "-m", "pytest_distcheck.cli", "gate", *args]


def relay(args: list[str], write: Callable[[str], None]) -> int:
    """Run :func:`command` ``(args)`` with :func:`clean_env`, its output through ``write``; its exit status."""
    proc = subprocess.Popen(command(args), env=clean_env(dict(os.environ)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    for line in proc.stdout:
        write(line)
    return proc.wait()


def kit_note(root: Path, kit: Path | None = None, prefix: str | None = None) -> str | None:
    """:data:`EDITABLE` when the kit imported lies under the workspace ``root`` but outside the Python environment
    (``sys.prefix``: a ``.venv/`` inside the workspace holds an installed kit); else ``None``."""
    kit = Path(kit or Path(pytest_distcheck.__file__).parent).resolve()
    inside = Path(root).resolve() in kit.parents and Path(prefix or sys.prefix).resolve() not in kit.parents
    return _(EDITABLE).format(kit=kit) if inside else None


def targets(folder: Path, ws_rel: str) -> list[str]:
    """What the gate collects in the snapshot ``folder``: every registered check (``file::function``) whose file
    is there; the checks folder too for an item that registers none or a workspace file that does not load."""
    try:
        ws = load_workspace(folder / ws_rel, root=folder)
    except (ConfigError, OSError):
        return [str(folder / Path(ws_rel).parent)]
    out = list(dict.fromkeys(str(folder / c) for it in ws.items for c in it.checks
                             if (folder / c.split("::", 1)[0]).is_file()))
    if not out or any(not it.checks for it in ws.items):
        out.append(str(ws.checks_dir))
    return out


def drop_package_inits(folder: Path, targets: list[str]) -> None:
    """Remove the ``__init__.py`` of every folder from ``folder`` down to each target's: pytest would import
    them as packages of the checks (learner code), and the registered checks need none."""
    for target in targets:
        path = Path(target.split("::", 1)[0])
        for parent in (path if path.is_dir() else path.parent, *path.parents):
            (parent / "__init__.py").unlink(missing_ok=True)
            if parent == folder:
                break


def pytest_args(snap: snapshot.Snapshot, ws_rel: str, json_path: str | None, md_path: str | None,
                color: str, invoked_in: str = "") -> list[str]:
    """The gate's pytest command line on the snapshot (its registered checks, the kit's ini file in its parent);
    ``invoked_in``: the subfolder of the workspace the gate started in (``""``: its root)."""
    ini = snap.folder.parent / "distcheck-gate.ini"
    ini.write_text(INI.format(ws=ws_rel) + (f"{INVOKED_IN_INI} = {invoked_in}\n" if invoked_in else ""),
                   encoding="utf-8")
    found = targets(snap.folder, ws_rel)
    drop_package_inits(snap.folder, found)
    args = ["-c", str(ini), "--rootdir", str(snap.folder), "--noconftest", "-p", "pytest_distcheck.plugin",
            "-p", "no:cacheprovider", "--import-mode=importlib", "-W", "ignore::pytest.PytestAssertRewriteWarning",
            # the workspace's own markers are registered in its ini file, which the gate does not read
            "-W", "ignore::pytest.PytestUnknownMarkWarning", "--gate", f"--color={color}", f"--lang={language()}"]
    args += [f"--dod-json={json_path}"] * bool(json_path) + [f"--dod-markdown={md_path}"] * bool(md_path)
    return args + ["--", *found]


def not_all_committed(root: Path, commit: str, outputs: Iterable[str | Path | None] = ()) -> str:
    """A note naming the files ``git status`` under ``root`` lists (changed, staged or untracked
    and not ignored), else ``""`` (also when git cannot say). An untracked virtual environment (a folder
    holding a ``pyvenv.cfg``, such as ``venv/`` where .gitignore names only ``.venv/``) is never evidence
    and is left out, and so are ``outputs``: the gate's own reports (``--dod-json``, ``--dod-markdown``; relative
    paths are to the current folder), which its previous run wrote there."""
    from pytest_distcheck.git import run_git

    try:
        proc = run_git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".")
        top = run_git(root, "rev-parse", "--show-toplevel").stdout.strip() if outputs else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""
    entries = [e[3:] for e in proc.stdout.split("\0") if len(e) > 3 and e[2] == " "] if proc.returncode == 0 else []
    venvs = tuple(e[: -len("pyvenv.cfg")] for e in entries if e.endswith("/pyvenv.cfg"))
    entries = [e for e in entries if not e.startswith(venvs)]
    # git status names paths from the top of the repository, which may lie above root.
    ours = {Path(p).resolve() for p in outputs if p}
    entries = [e for e in entries if not top or (Path(top) / e).resolve() not in ours]
    if not entries:
        return ""
    some = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    return ngettext("distcheck gate: note: {n} file here differs from commit {commit} or is not in it ({some}): the "
                    "gate judges the commit, so commit it first; a command below that makes a file would overwrite "
                    "yours\n",
                    "distcheck gate: note: {n} files here differ from commit {commit} or are not in it ({some}): the "
                    "gate judges the commit, so commit them first; a command below that makes a file would overwrite "
                    "yours\n", len(entries)).format(n=len(entries), commit=commit, some=some)


def run(start: Path, json_path: str | None, md_path: str | None, color: str, write: Callable[[str], None],
        typed: str = "distcheck gate") -> int:
    """The gate for the workspace found walking up from ``start``, in this (isolated) process: pytest's exit
    status, 0 only when the gate passed. ``typed``: the command line that started it, as the learner typed it
    (the report's ``run.command``).

    Raises:
        DistcheckError: no workspace file, or the commit cannot be read (what git said and the fix).
    """
    import pytest

    found = find_workspace_file(start)
    if found is None:
        raise DistcheckError(_(NOT_FOUND).format(start=Path(start).resolve()))
    root, ws_rel = workspace_root(found), DEFAULT_PATH
    note = kit_note(root)
    cwd = os.getcwd()
    here = shell_folder(cwd).resolve()  # where the learner typed it (in a git hook, not the hook's folder)
    with snapshot.export(root, typed) as snap:
        if not (snap.folder / ws_rel).is_file():
            raise DistcheckError(_(NOT_COMMITTED).format(path=ws_rel, commit=snap.commit[:12],
                                                         command=at_root(f"git add {ws_rel} && git commit", root,
                                                                         here)))
        write(_(HEADER).format(commit=snap.commit[:12], root=root, files=snap.files) + (note or "")
              + not_all_committed(root, snap.commit[:12], (json_path, md_path)))
        sub = here.relative_to(root.resolve()).as_posix() if root.resolve() in here.parents else ""
        args = pytest_args(snap, ws_rel, json_path, md_path, color, sub)
        os.chdir(snap.folder)
        try:
            return int(pytest.main(args))
        finally:
            os.chdir(cwd)
