"""Subcommands of the ``distcheck`` CLI, one module each.

Each module defines ``add_arguments(parser)`` and ``run(args) -> int`` and a one-line docstring that
becomes its help. Register it in ``pytest_distcheck.cli.COMMANDS``.
"""

import argparse
import os
from pathlib import Path

from pytest_distcheck.workspace import DEFAULT_PATH as DEFAULT_CONFIG
from pytest_distcheck.workspace import find_workspace_file


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--config TOML``: the workspace file, as in every subcommand (default: the nearest
    checks/distcheck.toml in the current folder or above, see :func:`resolve_config`)."""
    parser.add_argument("--config", default=None, metavar="TOML",
                        help=f"workspace file (default: the nearest {DEFAULT_CONFIG} here or in a folder above)")


def resolve_config(args: argparse.Namespace, cwd: Path | None = None) -> None:
    """Fill in ``args.config`` when ``--config`` was not given: the nearest ``checks/distcheck.toml``
    walking up from ``cwd`` (default: the current folder), written relative to it for messages
    (``checks/distcheck.toml`` at the workspace root, ``../checks/distcheck.toml`` one level down).
    Found nowhere: the default path, so a command that needs the file says it is missing."""
    if getattr(args, "config", "") is not None:
        return
    cwd = Path.cwd() if cwd is None else Path(cwd)
    found = find_workspace_file(cwd)
    args.config = os.path.relpath(found, cwd) if found is not None else DEFAULT_CONFIG
