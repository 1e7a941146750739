"""Start a phase workspace in your own repository: DoD file, checks, quiz bank, labs, empty ledger.

  distcheck init            here
  distcheck init DIR        in DIR (created if missing)

Copies the phase pack (checks/, the labs' code under experiments/, the pages docs/README.md, docs/theory/
and docs/lab/, docs/notes/TEMPLATE.md; no reference solutions),
writes an empty spend ledger, adds /.distcheck/, .venv/ and Python's caches to .gitignore (only the
lines missing there), a conftest.py that stops a pytest without the kit with one line (when DIR has
none) and, when DIR has no pytest configuration, a pytest.ini (testpaths = checks, pythonpath = .).
Never overwrites: a file that exists with other contents stops the command before anything is written
(exit 1). Running it again is harmless. It ends with the git line that commits the new workspace (git init
first when DIR is in no repository; the DoD items whose evidence is committed read git), then: pytest -m local.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

# The last lines: {where} is the folder (HERE when it is the current one), {go} the cd into it, {commit} the git line.
READY = ("Phase workspace ready in {where}. Next, commit it (the DoD items whose evidence is committed need it in "
         "git), then check it:\n  {go}{commit}\n  pytest -m local   (the DoD table says what to do next)")
READY_COMMITTED = "Phase workspace ready in {where}: {go}pytest -m local (the DoD table says what to do next)"
HERE = "this folder ({path})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to start the workspace (default .)")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.workspace_init import init_workspace

    dest = Path(args.dir)
    report = init_workspace(dest)
    if report.conflicts:
        print(f"distcheck init: nothing written; these files exist in {dest} with other contents:")
        for rel in report.conflicts:
            print(f"  {rel}")
        print("move them away (or start in another folder) and run it again")
        return 1
    for rel in report.written:
        print(f"  wrote  {rel}")
    for rel in report.kept:
        print(f"  kept   {rel} (already there)")
    if report.pytest_config_hint:
        print(report.pytest_config_hint)
    here = dest.resolve() == Path.cwd().resolve()
    go = "" if here else f"cd {shlex.quote(str(dest))} && "
    where = HERE.format(path=Path.cwd()) if here else str(dest)
    commit = _commit_line(dest, report.written)
    print(READY.format(where=where, go=go, commit=commit) if commit else READY_COMMITTED.format(where=where, go=go))
    return 0


def _commit_line(dest: Path, written: list[str]) -> str:
    """The git line that commits the new workspace, run in ``dest``: all of it (``git init`` first) outside a
    repository; inside one, the top-level names init wrote, so the learner's other files stay out. ``""``
    when inside a repository nothing was written."""
    from pytest_distcheck.committed import commit_command

    message = "Start the phase workspace (distcheck init)"
    line = commit_command(["."], message, dest)
    if line.startswith("git init"):
        return line
    tops = sorted({rel.split("/")[0] for rel in written})
    return commit_command(tops, message, dest) if tops else ""
