"""The ``distcheck`` command line. Subcommands live in ``pytest_distcheck.commands`` and load lazily."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from pytest_distcheck.commands import resolve_config
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import LANG, SUPPORTED, LanguageError, use_from

# name -> module in pytest_distcheck.commands (imported only when that command runs or --help lists it)
COMMANDS: dict[str, str] = {
    "budget": "budget",
    "estimate": "estimate",
    "cite": "cite",
    "diagram": "diagram",
    "quiz": "quiz",
    "strategy": "strategy",
    "bubble": "bubble",
    "memory": "memory",
    "layout": "layout",
    "pods": "pods",
    "init": "init",
    "gate": "gate",
    "rehearse": "rehearse",
}


def _load(name: str):
    return importlib.import_module(f"pytest_distcheck.commands.{COMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distcheck", description="pytest-distcheck: distributed PyTorch checks on a budget"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = _load(name)
        doc = (module.__doc__ or "").strip().splitlines()
        p = sub.add_parser(name, help=doc[0] if doc else None, description=module.__doc__)
        module.add_arguments(p)
        p.add_argument(LANG.flag, dest="lang", default=None, metavar="|".join(SUPPORTED),
                       help=f"{LANG.help} (env {LANG.env})")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``distcheck`` console script. Returns the exit status.

    Errors of the kit (:class:`DistcheckError`) are printed as one line to stderr, exit status 2.
    """
    args = build_parser().parse_args(argv)
    try:
        use_from(args.lang)
    except LanguageError as exc:
        print(f"distcheck {args.command}: {exc}", file=sys.stderr)
        return 2
    resolve_config(args)
    try:
        return int(_load(args.command).run(args) or 0)
    except DistcheckError as exc:
        print(f"distcheck {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"distcheck {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `distcheck budget | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
