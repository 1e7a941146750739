"""The paid path, explained in the run itself (a pytest plugin module, listed by the main plugin).

- A DoD item whose ``how`` is this very ``pytest -m EXPR`` command (``pytest -m gpu --max-usd 3``
  completes ``tp-speedup-committed``) also gets its free checks, and its prerequisites', run after
  the paid tests: the table then says what the paid run achieved instead of "blocked (not-run)".
- Paid tests that were skipped are listed with their reasons, without ``-rs``.
"""

from __future__ import annotations

import shlex

import pytest


def items_completed_by(ws, markexpr: str) -> list[str]:
    """Ids of the workspace's items whose ``how`` is a ``pytest`` command with ``-m markexpr``."""
    found = []
    for it in ws.items:
        try:
            words = shlex.split(it.how)
        except ValueError:
            continue
        if words[:1] == ["pytest"] and any(a == "-m" and b == markexpr for a, b in zip(words, words[1:], strict=False)):
            found.append(it.id)
    return found


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(PaidPath(config), "distcheck-paid")


class PaidPath:
    """Per-run state: the items this ``-m`` run completes, and the paid tests it skipped."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.followup: list[str] = []
        self.skips: list[tuple[str, str]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        from pytest_distcheck.dod.plugin import PLUGIN_NAME, get_workspace
        from pytest_distcheck.dod.selection import order_prerequisites_first
        from pytest_distcheck.workspace import with_prerequisites

        collected = list(items)
        result = yield
        ws, expr = get_workspace(config), config.getoption("markexpr", "")
        wanted = with_prerequisites(ws, items_completed_by(ws, expr)) if ws is not None and expr else []
        if not wanted or config.getoption("distcheck_dod"):
            return result
        kept = set(map(id, items))
        back = [t for t in collected if id(t) not in kept and _item_of(t) in wanted]
        record = getattr(config.pluginmanager.get_plugin(PLUGIN_NAME), "record", None)
        for test in back:  # deselected by -m a moment ago: tell the DoD bookkeeping they run after all
            info = record.checks.get(test.nodeid) if record is not None else None
            if info is not None:
                info.selected, info.not_run = True, ""
        order_prerequisites_first(ws, back, _item_of)
        items.extend(back)  # after the paid tests, whose evidence they check
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and back:  # so "N deselected" counts only what did not run
            again = set(map(id, back))
            reporter.stats["deselected"] = [t for t in reporter.stats.get("deselected", []) if id(t) not in again]
        self.followup = [it for it in wanted if any(_item_of(t) == it for t in back)]
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # A paid test on rented pods needs the gpu extra (runpod, asyncssh): say so before any setup runs.
        from pytest_distcheck.budget.plugin import max_usd
        from pytest_distcheck.deps import missing_dependencies, missing_extra_message
        from pytest_distcheck.pods.plugin import GPU_PROVIDER

        if item.get_closest_marker("gpu") is None or max_usd(item.config) is None:
            return  # skipped anyway, with its reason
        if GPU_PROVIDER.raw(item.config)[0] != "runpod":
            return

        missing = missing_dependencies(extra="gpu")
        if missing:
            pytest.fail(missing_extra_message("gpu", missing), pytrace=False)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and report.when in ("setup", "call") and "gpu" in report.keywords:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.skips.append((report.nodeid, reason.removeprefix("Skipped: ")))

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.followup:
            terminalreporter.write_line(f"distcheck: -m {self.config.getoption('markexpr')!r} completes "
                                        f"{', '.join(self.followup)}: its free checks (and its prerequisites') "
                                        f"ran after the paid tests")
        for nodeid, reason in self.skips:
            terminalreporter.write_line(f"distcheck: paid test skipped: {nodeid}: {reason}", yellow=True)


def _item_of(test: pytest.Item) -> str | None:
    marker = test.get_closest_marker("dod")
    return marker.args[0] if marker is not None and marker.args else None
