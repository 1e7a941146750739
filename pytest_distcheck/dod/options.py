"""The DoD options (``--dod``, ``--dod-json``, ``--dod-markdown``), the hand-over of ``--gate`` to the
isolated sub-session (:mod:`pytest_distcheck.dod.isolation`), and the guards that keep ``--gate`` from
passing when the DoD bookkeeping (:class:`~pytest_distcheck.dod.plugin.DodPlugin`) is disabled or
removed. A pytest plugin module, listed in ``pytest_plugins`` of the main plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_distcheck.dod import isolation
from pytest_distcheck.dod.plugin import PLUGIN_NAME, DodPlugin


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck")
    group.addoption("--dod", action="append", dest="distcheck_dod", metavar="ITEM", default=[],
                    help="run only the checks of this DoD item and of its prerequisites (repeatable)")
    group.addoption("--dod-json", dest="distcheck_dod_json", metavar="PATH", default=None,
                    help="write the DoD report as JSON (schema: pytest_distcheck/schemas/dod-report.schema.json)")
    group.addoption("--dod-markdown", dest="distcheck_dod_markdown", metavar="PATH", default=None,
                    help="write the DoD report as Markdown, e.g. to $GITHUB_STEP_SUMMARY")
    group.addoption(isolation.FLAG, action="store_true", dest="distcheck_subsession", default=False,
                    help=argparse_suppress())


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS  # the gate's own sub-session; not for people


def _absolute(config: pytest.Config, path: str | None) -> str | None:
    return str(Path(config.invocation_params.dir, path)) if path else None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--gate``: run the DoD checks in the isolated sub-session instead of here; its status is the run's."""
    opt = config.option
    if not opt.distcheck_gate or opt.distcheck_subsession or opt.help or opt.version:
        return None
    from pytest_distcheck import workspace as ws_mod
    from pytest_distcheck.errors import ConfigError

    try:  # the file this run would check (--workspace, ini, found walking up): the manifest judges it
        ws_file = ws_mod.run_workspace_file(config)
    except ConfigError as exc:
        raise pytest.UsageError(f"distcheck: {exc}") from None
    rel = ws_mod.display_path(ws_file, config.rootpath)
    ignored = isolation.ignored_args(config.invocation_params.args)
    color = {"yes": "yes", "no": "no"}.get(getattr(opt, "color", "auto"), "auto")

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    write(f"distcheck gate: the DoD checks of {rel} run in an isolated pytest sub-session (python -I, "
          "--noconftest, plugin autoload off, the kit's own ini; no PYTEST_*/DISTCHECK_* variables)"
          + (f"; not passed on: {' '.join(ignored)}" if ignored else "") + "\n")
    return isolation.run_gate(config.rootpath, rel, _absolute(config, opt.distcheck_dod_json),
                              _absolute(config, opt.distcheck_dod_markdown), color, write)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("distcheck_gate") and not isinstance(config.pluginmanager.get_plugin(PLUGIN_NAME), DodPlugin):
        raise pytest.UsageError(f"--gate needs the DoD plugin {PLUGIN_NAME!r}, which was disabled "
                                f"(-p no:{PLUGIN_NAME}?); the gate cannot pass without it")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # A conftest that unregisters the DoD plugin after configure must not leave a silent gate.
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("distcheck_gate"):
        return
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if not isinstance(plugin, DodPlugin) or plugin.results is None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"gate: FAILED (the DoD plugin {PLUGIN_NAME!r} did not run to the end of the session)",
                          red=True, bold=True)
