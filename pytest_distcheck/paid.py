"""The paid path, explained in the run itself (a pytest plugin module, listed by the main plugin).

- A DoD item whose ``how`` is this very ``pytest -m EXPR`` command (``pytest -m gpu --max-usd 3``
  completes ``tp-speedup-committed``) also gets its free checks, and its prerequisites', run after
  the paid tests: the table then says what the paid run achieved instead of "blocked (not-run)".
- Paid tests that were skipped are listed with their reasons, without ``-rs``; so are paid tests the kit
  refused before anything was rented (:class:`~pytest_distcheck.budget.plugin.Refused`: errors, shown as the
  kit's message alone).
- In a run without a budget (``pytest -m local``, the gate) an item whose ``how`` is a paid command (``pytest``
  with ``--max-usd``) names the free rehearsal as its next step (:data:`REHEARSE_FIRST`), whose last line gives
  the paid command: the command a learner copies from the table never pays.
- A budget was given but every paid test was skipped (no ``RUNPOD_API_KEY``, too few local GPUs): one
  line says nothing paid ran, the run exits 4 (pytest's usage error: what was asked for could not
  start), and with no key the items this command completes name the key as their next step.
"""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.runpod_api import NO_KEY_STEP

# A budget was given and every paid test was skipped; {why} is NO_KEY_WHY, else the skips listed above.
NOTHING_PAID_RAN = N_("nothing paid ran ({why}), so this run exits {status}")
NO_KEY_WHY = N_("RUNPOD_API_KEY is not set; not rehearsed yet? `distcheck rehearse` runs this whole paid path "
                "for $0, no key needed")
SKIPPED_WHY = N_("every paid test was skipped: reasons above")
# The next step of an item completed by a paid command, in a run without a budget: the whole paid path for $0,
# ending with the paid command ({how}) to run for real (pods.rehearsal.FOR_REAL).
REHEARSE_FIRST = "distcheck rehearse"
# The terminal summary's lines: the items this -m run completes, and each paid test it skipped or refused.
COMPLETES = N_("-m {expr!r} completes {items}: its free checks (and its prerequisites') ran after the paid tests")
PAID_SKIPPED = N_("paid test skipped: {nodeid}: {reason}")
# {reason}: the kit's message, after "<test id>: " unless it names the test itself (the guard's refusals do).
PAID_REFUSED = N_("paid test refused before anything was rented: {reason}")


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
    """Per-run state: the items this ``-m`` run completes, and the paid tests it skipped or refused."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.followup: list[str] = []
        self.skips: list[tuple[str, str]] = []
        self.refusals: list[str] = []
        self.ran = 0  # paid tests whose call phase ran
        self.nothing_ran = ""  # NOTHING_PAID_RAN's line, once the session found that nothing paid ran

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        from pytest_distcheck.dod.plugin import PLUGIN_NAME
        from pytest_distcheck.dod.selection import order_prerequisites_first
        from pytest_distcheck.workspace import get_workspace, with_prerequisites

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
        from pytest_distcheck.deps import extra_missing
        from pytest_distcheck.pods.plugin import GPU_PROVIDER

        if item.get_closest_marker("gpu") is None or max_usd(item.config) is None:
            return  # skipped anyway, with its reason
        if GPU_PROVIDER.raw(item.config)[0] != "runpod":
            return

        missing = extra_missing("gpu")
        if missing:
            pytest.fail(missing, pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        from pytest_distcheck.budget.plugin import Refused

        report = yield
        if call.excinfo is not None and isinstance(call.excinfo.value, Refused):
            # The reason alone, for the error block and the short summary (which would start with the class's
            # dotted name); an attribute of the report reaches an xdist controller too.
            report.longrepr = report.distcheck_refused = call.excinfo.value.reason
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "gpu" not in report.keywords:
            return
        refused = getattr(report, "distcheck_refused", None)
        if refused is not None:
            self.refusals.append(refused if report.nodeid in refused else f"{report.nodeid}: {refused}")
        if report.skipped and report.when in ("setup", "call"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.skips.append((report.nodeid, reason.removeprefix("Skipped: ")))
        elif report.when == "call" or report.failed:
            self.ran += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Before the DoD bookkeeping combines its outcomes: when a budget was given and nothing paid ran,
        the exit status, and with no key the next step of the items whose command this run is."""
        from pytest_distcheck.budget.plugin import max_usd

        if hasattr(self.config, "workerinput"):
            return
        if max_usd(self.config) is None:
            _rehearse_first(self.config)
            return
        if not self.skips or self.ran:
            return
        no_key = _runpod_without_key(self.config)
        if no_key:
            _point_at_the_key(self.config, self.followup)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        self.nothing_ran = _(NOTHING_PAID_RAN).format(why=_(NO_KEY_WHY) if no_key else _(SKIPPED_WHY),
                                                      status=int(session.exitstatus))

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.followup:
            terminalreporter.write_line("distcheck: " + _(COMPLETES).format(
                expr=self.config.getoption("markexpr"), items=", ".join(self.followup)))
        for nodeid, reason in self.skips:
            terminalreporter.write_line("distcheck: " + _(PAID_SKIPPED).format(nodeid=nodeid, reason=reason),
                                        yellow=True)
        for reason in self.refusals:
            terminalreporter.write_line("distcheck: " + _(PAID_REFUSED).format(reason=reason), red=True)
        if self.nothing_ran:
            terminalreporter.write_line(f"distcheck: {self.nothing_ran}", yellow=True, bold=True)


def _item_of(test: pytest.Item) -> str | None:
    marker = test.get_closest_marker("dod")
    return marker.args[0] if marker is not None and marker.args else None


def _runpod_without_key(config: pytest.Config) -> bool:
    import os

    from pytest_distcheck.pods.plugin import GPU_PROVIDER
    from pytest_distcheck.pods.runpod_api import API_KEY_ENV

    return GPU_PROVIDER.raw(config)[0] == "runpod" and not os.environ.get(API_KEY_ENV, "").strip()


def is_paid_command(how: str) -> bool:
    """Whether an item's ``how`` is a paid ``pytest`` command (one that gives ``--max-usd``)."""
    try:
        words = shlex.split(how)
    except ValueError:
        return False
    return words[:1] == ["pytest"] and any(w == "--max-usd" or w.startswith("--max-usd=") for w in words)


def _rehearse_first(config: pytest.Config) -> None:
    """Outcomes that ask for their item's paid ``how`` get :data:`REHEARSE_FIRST` as their command (in the DoD
    bookkeeping's list, before it combines them into the table and the reports)."""
    from pytest_distcheck.dod.plugin import PLUGIN_NAME
    from pytest_distcheck.dod.state import NEEDS_EVIDENCE

    dod = config.pluginmanager.get_plugin(PLUGIN_NAME)
    ws = getattr(dod, "workspace", None)
    if ws is None:
        return
    how = {it.id: it.how for it in ws.items if is_paid_command(it.how)}
    dod.outcomes[:] = [dataclasses.replace(o, command=REHEARSE_FIRST.format(how=o.command))
                       if o.item_id in how and o.state in NEEDS_EVIDENCE and o.command == how[o.item_id] else o
                       for o in dod.outcomes]


def _point_at_the_key(config: pytest.Config, item_ids: list[str]) -> None:
    """Outcomes of ``item_ids`` that ask for this very run get :data:`NO_KEY_STEP` as their command (in
    the DoD bookkeeping's list, before it combines them into the table and the reports)."""
    from pytest_distcheck.dod.plugin import PLUGIN_NAME
    from pytest_distcheck.dod.state import NEEDS_EVIDENCE

    dod = config.pluginmanager.get_plugin(PLUGIN_NAME)
    ws = getattr(dod, "workspace", None)
    if ws is None:
        return
    how = {it: ws.item(it).how for it in item_ids}
    dod.outcomes[:] = [dataclasses.replace(o, command=_(NO_KEY_STEP).format(how=o.command))
                       if o.item_id in how and o.state in NEEDS_EVIDENCE and o.command == how[o.item_id] else o
                       for o in dod.outcomes]
