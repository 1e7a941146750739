"""The DoD options (``--dod``, ``--dod-json``, ``--dod-markdown``) and the hand-over of ``--gate`` to the gate's
own process (:mod:`pytest_distcheck.dod.gate`). A pytest plugin module, listed in ``pytest_plugins`` of the main
plugin.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from pytest_distcheck.dod import gate, snapshot
from pytest_distcheck.i18n import FLAG, N_, _, language

# The learner's options the gate passes on (paths made absolute; the language as chosen); every other argument
# is not passed on.
CARRIED = ("--gate", "--dod-json", "--dod-markdown", "--color", FLAG)
HANDED_OVER = N_("pytest --gate: runs `distcheck gate`")
NOT_PASSED_ON = N_("; not passed on: {args}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck")
    group.addoption("--dod", action="append", dest="distcheck_dod", metavar="ITEM", default=[],
                    help="run only the checks of this DoD item and of its prerequisites (repeatable)")
    group.addoption("--dod-json", dest="distcheck_dod_json", metavar="PATH", default=None,
                    help="write the DoD report as JSON (schema: pytest_distcheck/schemas/dod-report.schema.json)")
    group.addoption("--dod-markdown", dest="distcheck_dod_markdown", metavar="PATH", default=None,
                    help="write the DoD report as Markdown, e.g. to $GITHUB_STEP_SUMMARY")
    parser.addini(gate.INVOKED_IN_INI, "set by distcheck gate: the subfolder of the workspace it started in",
                  default="")


def ignored_args(args: list[str]) -> list[str]:
    """The learner's command-line arguments the gate does not receive."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in CARRIED:
            skip = "=" not in arg and name != "--gate"
            continue
        out.append(arg)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--gate``: run ``distcheck gate`` (its own isolated process) instead of this session; its status is this
    run's."""
    opt = config.option
    if not opt.distcheck_gate or snapshot.exported(config.rootpath) or opt.help or opt.version:
        return None
    here = Path(config.invocation_params.dir)
    color = {"yes": "yes", "no": "no"}.get(getattr(opt, "color", "auto"), "auto")
    # The gate's process reads no DISTCHECK_* variable and no ini file: the language travels as --lang.
    args = ["--root", str(here), f"--color={color}", f"{FLAG}={language()}",
            f"{gate.TYPED_FLAG}={shlex.join(['pytest', *map(str, config.invocation_params.args)])}"]
    for flag, path in (("--dod-json", opt.distcheck_dod_json), ("--dod-markdown", opt.distcheck_dod_markdown)):
        if path:
            args.append(f"{flag}={here / path}")
    ignored = ignored_args(list(config.invocation_params.args))

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    write(_(HANDED_OVER) + (_(NOT_PASSED_ON).format(args=" ".join(ignored)) if ignored else "") + "\n")
    return gate.relay(args, write)
