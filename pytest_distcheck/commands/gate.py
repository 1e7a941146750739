"""Run the phase gate in the isolated pytest sub-session, as CI should (no conftest.py loads here at all).

  distcheck gate --dod-json dod-report.json --dod-markdown "$GITHUB_STEP_SUMMARY"

Same verdict as `pytest --gate`, without starting pytest in the learner's configuration first: the DoD
checks of the workspace file run in one pytest process that no conftest.py, plugin, ini file, -o or
PYTEST_ADDOPTS reaches (see docs/ci/threat-model.md). Exit status: pytest's (0 only when the gate passed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_distcheck.errors import DistcheckError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--root", default=".", metavar="DIR",
                        help="the workspace root, holding checks/distcheck.toml (default: the current folder)")
    parser.add_argument("--dod-json", metavar="PATH", help="write the DoD report as JSON")
    parser.add_argument("--dod-markdown", metavar="PATH", help="write the DoD report as Markdown")
    parser.add_argument("--color", choices=("yes", "no", "auto"), default="auto")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.dod import isolation
    from pytest_distcheck.workspace import DEFAULT_PATH

    root = Path(args.root).resolve()
    if not (root / DEFAULT_PATH).is_file():
        raise DistcheckError(f"no workspace file {DEFAULT_PATH} under {root}")

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    absolute = {p: str(Path(p).resolve()) if p else None for p in (args.dod_json, args.dod_markdown)}
    return isolation.run_gate(root, DEFAULT_PATH, absolute[args.dod_json], absolute[args.dod_markdown],
                              args.color, write)
