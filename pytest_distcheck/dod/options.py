"""The DoD options (``--dod``, ``--dod-json``, ``--dod-markdown``) and the guards that keep ``--gate``
from passing when the DoD bookkeeping (:class:`~pytest_distcheck.dod.plugin.DodPlugin`) is disabled
or removed. A pytest plugin module, listed in ``pytest_plugins`` of the main plugin.
"""

from __future__ import annotations

import pytest

from pytest_distcheck.dod.plugin import PLUGIN_NAME, DodPlugin


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck")
    group.addoption("--dod", action="append", dest="distcheck_dod", metavar="ITEM", default=[],
                    help="run only the checks of this DoD item and of its prerequisites (repeatable)")
    group.addoption("--dod-json", dest="distcheck_dod_json", metavar="PATH", default=None,
                    help="write the DoD report as JSON (schema: pytest_distcheck/schemas/dod-report.schema.json)")
    group.addoption("--dod-markdown", dest="distcheck_dod_markdown", metavar="PATH", default=None,
                    help="write the DoD report as Markdown, e.g. to $GITHUB_STEP_SUMMARY")


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
