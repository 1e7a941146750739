"""pytest hooks that turn DoD checks' outcomes into item states, print the DoD table and gate the run.

Outcomes travel in ``report.user_properties`` so the table is right under pytest-xdist too: workers
classify, the controller (or the single process) combines and prints.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_distcheck import workspace as ws_mod
from pytest_distcheck.dod.outcome import Broken, DodOutcome
from pytest_distcheck.dod.state import CheckOutcome, ItemResult, State, combine
from pytest_distcheck.errors import ConfigError

PROPERTY = "distcheck_dod"
LOG_PROPERTY = "distcheck_log"
workspace_key = pytest.StashKey["ws_mod.Workspace | None"]()

_COLOURS = {
    State.DONE: {"green": True},
    State.PENDING: {"yellow": True},
    State.STALE: {"yellow": True},
    State.BLOCKED: {"yellow": True},
    State.BROKEN: {"red": True, "bold": True},
    State.ERROR: {"red": True, "bold": True},
}


def get_workspace(config: pytest.Config) -> ws_mod.Workspace | None:
    """The workspace of this run, loaded once; ``None`` when the configured file does not exist.

    Raises:
        pytest.UsageError: the file exists but is malformed (names the file and field).
    """
    if workspace_key in config.stash:
        return config.stash[workspace_key]
    rel = config.getini("distcheck_config")
    path = config.rootpath / rel
    ws = None
    if path.is_file():
        try:
            ws = ws_mod.load_workspace(path, root=config.rootpath)
        except ConfigError as exc:
            raise pytest.UsageError(f"distcheck: {exc}") from None
    config.stash[workspace_key] = ws
    return ws


def _classify(item: pytest.Item, rep: pytest.TestReport, call: pytest.CallInfo[Any]) -> CheckOutcome | None:
    item_id = item.get_closest_marker("dod").args[0]  # type: ignore[union-attr]
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, DodOutcome):
        return CheckOutcome(item_id, item.nodeid, State(exc.state), exc.reason, exc.command)
    if rep.passed and rep.when == "call":
        return CheckOutcome(item_id, item.nodeid, State.DONE, "evidence checked")
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        return CheckOutcome(item_id, item.nodeid, State.PENDING, reason.removeprefix("Skipped: "))
    if rep.failed:
        if rep.when == "call" and isinstance(exc, AssertionError):
            first = (str(exc).strip().splitlines() or ["assertion failed"])[0]
            return CheckOutcome(item_id, item.nodeid, State.BROKEN, first)
        what = f"{type(exc).__name__}: {exc}" if exc is not None else "failed"
        return CheckOutcome(item_id, item.nodeid, State.ERROR, f"check crashed in {rep.when}: {what}")
    return None


class DodPlugin:
    """Per-run DoD bookkeeping, registered by the main plugin in ``pytest_configure``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: list[CheckOutcome] = []
        self.logs: list[tuple[str, str, str]] = []  # (nodeid, title, text)
        self.results: list[ItemResult] | None = None
        self.workspace = get_workspace(config)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("dod")
            if marker is None:
                continue
            if len(marker.args) != 1 or not isinstance(marker.args[0], str):
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.dod takes one item id, got {marker.args!r}"
                )
            if self.workspace is None:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.dod({marker.args[0]!r}) but no workspace file "
                    f"{config.getini('distcheck_config')!r} under {config.rootpath}"
                )
            try:
                self.workspace.item(marker.args[0])
            except KeyError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc.args[0]}") from None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]):
        rep: pytest.TestReport = yield
        if item.get_closest_marker("dod") is None:
            return rep
        exc = call.excinfo.value if call.excinfo is not None else None
        if isinstance(exc, DodOutcome) and not isinstance(exc, Broken):
            # pending and stale are not test failures; the gate decides what they mean for the run.
            path, lineno, _ = item.location
            rep.outcome = "skipped"
            rep.longrepr = (path, (lineno or 0) + 1, f"{exc.state}: {exc.reason}")
        elif isinstance(exc, Broken):
            rep.longrepr = f"DoD item broken: {exc.reason}"
        outcome = _classify(item, rep, call)
        if outcome is not None and (rep.when == "call" or not rep.passed):
            rep.user_properties.append(
                (PROPERTY, json.dumps({**outcome.__dict__, "state": outcome.state.value}))
            )
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == LOG_PROPERTY:
                data = json.loads(value)
                self.logs.append((report.nodeid, data["title"], data["text"]))
            if name == PROPERTY:
                data = json.loads(value)
                data["state"] = State(data["state"])
                self.outcomes.append(CheckOutcome(**data))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.workspace is None or hasattr(self.config, "workerinput"):
            return
        self.results = combine(self.workspace, self.outcomes)
        gate = self.config.getoption("distcheck_gate")
        if gate and any(r.state is not State.DONE for r in self.results):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.results is None or self.workspace is None:
            return
        tr = terminalreporter
        for nodeid, title, text in self.logs:
            tr.write_sep("-", f"{title} ({nodeid})")
            tr.write_line(text)
        tr.write_sep("=", f"Definition of Done: phase {self.workspace.phase_id}")
        width = max(len(r.item_id) for r in self.results)
        for r in self.results:
            tr.write(f"{r.state.value.upper():<8} ", **_COLOURS[r.state])
            tr.write_line(f"{r.item_id:<{width}}  {r.reason}")
            if r.state is not State.DONE:
                tr.write_line(f"{'':<8} {'':<{width}}  -> {r.command}")
        done = sum(r.state is State.DONE for r in self.results)
        summary = f"{done}/{len(self.results)} items done"
        if self.config.getoption("distcheck_gate"):
            ok = done == len(self.results)
            tr.write_line(f"gate: {'PASSED' if ok else 'FAILED'} ({summary})", green=ok, red=not ok, bold=True)
        else:
            tr.write_line(f"{summary} (not gated; use --gate to require every item)")
