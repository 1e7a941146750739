"""Start a phase workspace in your own repository: DoD file, checks, quiz bank, labs, empty ledger.

  distcheck init            here
  distcheck init DIR        in DIR (created if missing)
  distcheck init --lang es  a workspace whose kit speaks Spanish (its pytest.ini sets distcheck_lang = es)

Copies the phase pack (checks/, the labs' code, the pages in English and Spanish; no reference solutions), an empty
spend ledger, the .gitignore lines missing, and a conftest.py and pytest.ini when DIR has none. Never overwrites: a
file there with other contents stops it before anything is written (exit 1); running it again is harmless. It ends
with the git line that commits the workspace, then pytest -m local and the phase's start page. docs/kit/README.md.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from pytest_distcheck.i18n import N_, _, language

# The last lines: {where} is the folder (HERE when it is the current one), {go} the cd into it, {commit} the git line,
# {start} the phase's start page in the language spoken (START_PAGES).
READY = N_("Phase workspace ready in {where}. Next, commit it (the DoD items whose evidence is committed need it in "
           "git), then check it:\n  {go}{commit}\n  pytest -m local   (the DoD table says what to do next)\n"
           "The phase starts at {start}: what to read and do, in order.")
READY_COMMITTED = N_("Phase workspace ready in {where}: {go}pytest -m local (the DoD table says what to do next); "
                     "the phase starts at {start}")
HERE = N_("this folder ({path})")
START_PAGES = {"en": "docs/README.md", "es": "docs/es/README.md"}
CONFLICTS = N_("distcheck init: nothing written; these files exist in {dest} with other contents:")
MOVE_THEM = N_("move them away (or start in another folder) and run it again")
WROTE = N_("  wrote  {path}")
KEPT = N_("  kept   {path} (already there)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to start the workspace (default .)")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.workspace_init import init_workspace

    dest = Path(args.dir)
    # --lang given: the workspace keeps that language (its pytest.ini); otherwise it follows each run's setting.
    report = init_workspace(dest, lang=language() if getattr(args, "lang", None) else None)
    if report.conflicts:
        print(_(CONFLICTS).format(dest=dest))
        for rel in report.conflicts:
            print(f"  {rel}")
        print(_(MOVE_THEM))
        return 1
    for rel in report.written:
        print(_(WROTE).format(path=rel))
    for rel in report.kept:
        print(_(KEPT).format(path=rel))
    if report.pytest_config_hint:
        print(report.pytest_config_hint)
    here = dest.resolve() == Path.cwd().resolve()
    go = "" if here else f"cd {shlex.quote(str(dest))} && "
    where = _(HERE).format(path=Path.cwd()) if here else str(dest)
    commit = _commit_line(dest, report.written)
    start = START_PAGES[language()]
    print(_(READY).format(where=where, go=go, commit=commit, start=start) if commit
          else _(READY_COMMITTED).format(where=where, go=go, start=start))
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
