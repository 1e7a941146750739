"""Run the phase gate on the commit of the workspace here or above, in a process of its own (as CI should).

  distcheck gate --dod-json dod-report.json --dod-markdown "$GITHUB_STEP_SUMMARY"

The DoD checks judge HEAD's files, read from git before any check runs, in a `python -I` process that no
conftest.py, plugin, ini file or PYTEST_*/PYTHON* variable of the repository reaches (what a pass means:
docs/ci/known-limitations.md). Exit status: pytest's (0 only when the gate passed; 4 when it could not start: no
workspace, no git repository, a workspace file not committed).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pytest_distcheck.dod.gate import TYPED_FLAG


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--root", default=".", metavar="DIR",
                        help="where to look for checks/distcheck.toml, walking up (default: the current folder)")
    parser.add_argument("--dod-json", metavar="PATH", help="write the DoD report as JSON")
    parser.add_argument("--dod-markdown", metavar="PATH", help="write the DoD report as Markdown")
    parser.add_argument("--color", choices=("yes", "no", "auto"), default="auto")
    # Set when this command starts the gate's own process (or pytest --gate does): the command line as typed.
    parser.add_argument(TYPED_FLAG, dest="typed_as", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.dod import gate
    from pytest_distcheck.i18n import FLAG, language

    paths = {k: str(Path(v).resolve()) if v else None for k, v in (("json", args.dod_json), ("md", args.dod_markdown))}
    typed = getattr(args, "typed_as", None) or shlex.join(["distcheck", *getattr(args, "argv", ["gate"])])
    if not gate.isolated():
        # The language travels as --lang: the gate's process reads no DISTCHECK_* variable and no ini file of yours.
        argv = ["--root", str(Path(args.root).resolve()), f"--color={args.color}", f"{TYPED_FLAG}={typed}",
                f"{FLAG}={language()}"]
        argv += [f"--dod-{k}={v}" for k, v in (("json", paths["json"]), ("markdown", paths["md"])) if v]
        return subprocess.call(gate.command(argv), env=gate.clean_env(dict(os.environ)))

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    from pytest import ExitCode

    from pytest_distcheck.errors import DistcheckError

    try:
        return gate.run(Path(args.root), paths["json"], paths["md"], args.color, write, typed)
    except DistcheckError as exc:  # the gate could not start: pytest's usage error, as its other statuses are pytest's
        print(f"distcheck gate: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
