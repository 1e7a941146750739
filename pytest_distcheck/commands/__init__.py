"""Subcommands of the ``distcheck`` CLI, one module each.

Each module defines ``add_arguments(parser)`` and ``run(args) -> int`` and a one-line docstring that
becomes its help. Register it in ``pytest_distcheck.cli.COMMANDS``.
"""
