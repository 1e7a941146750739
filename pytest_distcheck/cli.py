"""The ``distcheck`` command line. Subcommands live in ``pytest_distcheck.commands`` and load lazily."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from pytest_distcheck.commands import resolve_config
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, SUPPORTED, LanguageError, _, use_from
from pytest_distcheck.settings import LANG

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
INTERRUPTED = N_("interrupted")


def _load(name: str):
    return importlib.import_module(f"pytest_distcheck.commands.{COMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distcheck", description="pytest-distcheck: distributed PyTorch checks on a budget"
    )
    lang_help = f"{LANG.help} (env {LANG.env})"
    # Before the command (`distcheck --lang es memory ...`) or after it; main() reads it first either way.
    parser.add_argument(LANG.flag, dest="lang", default=None, metavar="|".join(SUPPORTED), help=lang_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = _load(name)
        doc = (module.__doc__ or "").strip().splitlines()
        p = sub.add_parser(name, help=doc[0] if doc else None, description=module.__doc__)
        module.add_arguments(p)
        # SUPPRESS: a subcommand without its own --lang keeps the one given before it
        p.add_argument(LANG.flag, dest="lang", default=argparse.SUPPRESS, metavar="|".join(SUPPORTED),
                       help=lang_help)
    return parser


# What the language depends on, read before the whole command line is (argparse's own words stay English).
_LANGUAGE_ONLY = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
_LANGUAGE_ONLY.add_argument(LANG.flag, dest="lang", default=None)
_LANGUAGE_ONLY.add_argument("--config", default=None)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``distcheck`` console script. Returns the exit status.

    The language: ``--lang``, ``$DISTCHECK_LANG``, the workspace's ini ``distcheck_lang``, the locale
    (:mod:`pytest_distcheck.i18n`). Errors of the kit (:class:`DistcheckError`) are printed as one line to
    stderr, exit status 2.
    """
    # The language first, so the argument types' errors that argparse prints while parsing speak it too.
    pre, _rest = _LANGUAGE_ONLY.parse_known_args(argv)
    try:
        use_from(pre.lang, _workspace_lang(pre))
        bad_language = None
    except LanguageError as exc:
        bad_language = exc
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed, for a report that names its command line
    if bad_language is not None:
        print(f"distcheck {args.command}: {bad_language}", file=sys.stderr)
        return 2
    resolve_config(args)
    try:
        return int(_load(args.command).run(args) or 0)
    except DistcheckError as exc:
        print(f"distcheck {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"distcheck {args.command}: {_(INTERRUPTED)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `distcheck budget | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _workspace_lang(args: argparse.Namespace) -> str:
    """The ``distcheck_lang`` of the pytest configuration at the root of the command's workspace (its
    ``--config``, else the nearest workspace file), so a command speaks as ``pytest`` there does; else ``""``."""
    from pytest_distcheck.workspace import find_workspace_file, workspace_root
    from pytest_distcheck.workspace_init import configured_lang

    config = getattr(args, "config", None)
    path = Path(config) if config else find_workspace_file(Path.cwd())
    return configured_lang(workspace_root(path)) if path is not None and path.is_file() else ""


if __name__ == "__main__":
    sys.exit(main())
