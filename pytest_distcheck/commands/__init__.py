"""Subcommands of the ``distcheck`` CLI, one module each.

Each module defines ``add_arguments(parser)`` and ``run(args) -> int`` and a one-line docstring that
becomes its help. Register it in ``pytest_distcheck.cli.COMMANDS``.
"""

import argparse

from pytest_distcheck.workspace import DEFAULT_PATH as DEFAULT_CONFIG


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--config TOML``: the workspace file, as in every subcommand (default checks/distcheck.toml)."""
    parser.add_argument("--config", default=DEFAULT_CONFIG, metavar="TOML",
                        help=f"workspace file (default {DEFAULT_CONFIG})")
