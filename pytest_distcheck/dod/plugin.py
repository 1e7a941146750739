"""pytest hooks that turn DoD checks' outcomes into item states, print the DoD table, write the
reports and gate the run.

Outcomes travel in ``report.user_properties`` so the table is right under pytest-xdist too: workers
classify, the controller (or the single process) combines and prints. What was collected and
selected travels from the workers in xdist's ``workeroutput``.

:class:`DodPlugin` is registered by the main plugin as ``distcheck-dod``; its options and the hand-over
of ``--gate`` to :mod:`pytest_distcheck.dod.gate` are in :mod:`pytest_distcheck.dod.options`.
"""

from __future__ import annotations

import inspect
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_distcheck import workspace as ws_mod
from pytest_distcheck.dod import selection, snapshot
from pytest_distcheck.dod.classify import classify, normalise
from pytest_distcheck.dod.collection import INTERRUPTED, CheckInfo, CollectionRecord
from pytest_distcheck.dod.outcome import Blocked
from pytest_distcheck.dod.state import CheckOutcome, ItemResult, State, combine, gate_outcomes, judge, worst
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import get_workspace, workspace_label

PROPERTY = "distcheck_dod"
LOG_PROPERTY = "distcheck_log"
EVIDENCE_PROPERTY = "distcheck_evidence"
PLUGIN_NAME = "distcheck-dod"
WORKEROUTPUT_KEY = "distcheck_dod_collection"
# One line a plugin puts in place of the DoD table when the table would describe another folder than the
# learner's (the rehearsal's scratch copy).
table_instead_key = pytest.StashKey[str]()
MARKER_ARGS = N_("{nodeid}: @pytest.mark.dod takes one item id, got {args!r}")
MARKER_WITHOUT_WORKSPACE = N_("{nodeid}: @pytest.mark.dod({item_id!r}) but no workspace file {label!r} ({hint})")
NOT_SELECTED_BY_DOD = N_("not selected (--dod {items})")
OUTSIDE_CHECKS = N_("its function is defined in {file}, outside the workspace's checks folder {checks}/")
NOT_REGISTERED = N_("it is not registered for its item in the workspace file (registered: {registered})")
FILE_MISSING = N_("file missing")
NOT_IN_FILE = N_("no such check in the file, or not marked for this item")
FILE_NOT_COLLECTED = N_("its file was not among the paths this run collected")
NOT_NAMED = N_("not among the tests of its file the command line names")
LAST_FAILED = N_("its file was not collected: --lf reran the last failures only")
REMOVED_BY_HOOK = N_("removed from the run by a collection hook without being deselected")
BLOCKED_BY_REQ = N_("blocked by {item} ({state}: {reason})")
MAXFAIL = N_("{why} (-x or --maxfail)")
STOPPED_BY = N_("the session stopped: {why}")  # pytest's own Interrupted (--sw, xdist's -x), not Ctrl-C
NOTHING_RUNS = N_("{option}: no check runs")
CANNOT_WRITE = N_("cannot write {path}: {error}")


def _item_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("dod")
    return marker.args[0] if marker is not None else None


def _code_file(func: Any) -> str | None:
    try:
        return inspect.getsourcefile(inspect.unwrap(func))
    except (TypeError, ValueError):
        return None


def _evidence(rep: pytest.TestReport) -> tuple[tuple, tuple]:
    """The files and flags a check recorded with ``distcheck_evidence`` (its report's user properties)."""
    files: dict[str, dict[str, Any]] = {}
    flags: list[str] = []
    for name, value in rep.user_properties:
        if name == EVIDENCE_PROPERTY:
            data = json.loads(value)
            files.update((f["path"], f) for f in data["files"])
            flags += data["flags"]
    return tuple(files.values()), tuple(dict.fromkeys(flags))


class DodPlugin:
    """Per-run DoD bookkeeping, registered by the main plugin in ``pytest_configure``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: list[CheckOutcome] = []
        self.logs: list[tuple[str, str, str]] = []  # (nodeid, title, text)
        self.results: list[ItemResult] | None = None
        self.verdict = "failed"  # the gate's, once the session is over (report.gate_verdict)
        self.workspace = get_workspace(config)
        self.is_worker = hasattr(config, "workerinput")
        self.scope = selection.requested(config, self.workspace)
        self.record: CollectionRecord | None = None
        self.local: dict[str, list[CheckOutcome]] = defaultdict(list)  # this process's outcomes, by item
        self.seen_reports: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)
        self.write_errors: list[str] = []
        self.stopped: str | None = None  # why the session ended before every selected check ran
        self.usage_error = False  # the session ended in a usage error before any check ran (sessionfinish)
        self.gate = bool(config.getoption("distcheck_gate"))
        # The gate's commit: this run's rootdir is its snapshot (pytest_distcheck.dod.gate starts such a run only).
        self.snapshot = snapshot.exported(config.rootpath) if self.gate else None
        self.canonical: dict[str, Any] | None = None  # how the workspace matches the shipped DoD of its phase
        if self.workspace is not None and not self.is_worker:
            from pytest_distcheck.dod import manifest

            canon = manifest.shipped(self.workspace.phase_id)
            if canon is not None:
                self.canonical = manifest.compare(self.workspace.path, config.rootpath, self.workspace.raw, canon)
        if self.snapshot is not None:
            from pytest_distcheck.ranks.plugin import plain_results_only

            plain_results_only(config)  # the ranks run the learner's lab: nothing they return may run code here

    # -- collection ------------------------------------------------------------------------------

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        # With --dod only the checks folder is collected: test modules elsewhere may be slow to import.
        if self.scope is None or self.workspace is None:
            return None
        checks = self.workspace.checks_dir.resolve()
        path = collection_path.resolve()
        if path == checks or checks in path.parents or path in checks.parents:
            return None
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("dod")
            if marker is None:
                continue
            if len(marker.args) != 1 or not isinstance(marker.args[0], str):
                raise pytest.UsageError(_(MARKER_ARGS).format(nodeid=item.nodeid, args=marker.args))
            if self.workspace is None:
                raise pytest.UsageError(_(MARKER_WITHOUT_WORKSPACE).format(
                    nodeid=item.nodeid, item_id=marker.args[0], label=workspace_label(config),
                    hint=_(ws_mod.NOT_FOUND_HINT)))
            try:
                self.workspace.item(marker.args[0])
            except KeyError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc.args[0]}") from None
        if self.workspace is None:
            return
        ws = self.workspace
        record = CollectionRecord(checks_dir=ws_mod.display_path(ws.checks_dir, config.rootpath))
        for item in items:
            item_id = _item_of(item)
            if item_id is not None:
                record.checks[item.nodeid] = self._info(item, item_id)
        collected_files = {item.nodeid.split("::", 1)[0] for item in items}
        for it in ws.items:
            collected = {n.split("[", 1)[0] for n, c in record.checks.items() if c.item_id == it.id}
            missing = {p: self._why_missing(p, collected_files) for p in it.checks if p not in collected}
            if missing:
                record.missing_registered[it.id] = missing
        self.record = record
        if self.scope is not None:
            keep, drop = [], []
            for item in items:
                (keep if _item_of(item) in self.scope else drop).append(item)
            typed = " ".join(selection.named(config))  # as given: the prerequisites it also ran go unsaid
            for item in drop:
                if item.nodeid in record.checks:
                    record.checks[item.nodeid].selected = False
                    record.checks[item.nodeid].not_run = _(NOT_SELECTED_BY_DOD).format(items=typed)
            if drop:
                config.hook.pytest_deselected(items=drop)
            items[:] = keep
        selection.order_prerequisites_first(ws, items, _item_of)
        if self.snapshot is not None:  # the learner's code runs after every other check judged its evidence
            from pytest_distcheck.dod.gate import LEARNER_CODE

            items.sort(key=lambda i: bool(set(getattr(i, "fixturenames", ())) & set(LEARNER_CODE)))

    def _info(self, item: pytest.Item, item_id: str) -> CheckInfo:
        """What collection knows of a check, with why its outcome cannot be believed (``problems``): not under the
        workspace's checks folder, or not registered for its item when the workspace registers its checks."""
        assert self.workspace is not None
        func = getattr(item, "obj", None)
        file = _code_file(func)
        problems = []
        checks = self.workspace.checks_dir.resolve()
        if not file or checks not in Path(file).resolve().parents:
            problems.append(_(OUTSIDE_CHECKS).format(file=ws_mod.display_path(Path(file or '?'), self.config.rootpath),
                                                     checks=self.workspace.checks_dir.name))
        registered = self.workspace.item(item_id).checks
        if registered and item.nodeid.split("[", 1)[0] not in registered:
            problems.append(_(NOT_REGISTERED).format(registered=", ".join(registered)))
        return CheckInfo(item_id, ws_mod.display_path(Path(file or "?"), self.config.rootpath),
                         getattr(func, "__qualname__", item.name), problems=problems)

    def _why_missing(self, pattern: str, collected_files: set[str]) -> str:
        file = pattern.split("::", 1)[0]
        if not (self.config.rootpath / file).is_file():
            return _(FILE_MISSING)
        if file in collected_files:
            here, path = self.config.invocation_params.dir, (self.config.rootpath / file).resolve()
            named = [a for a in map(str, self.config.args) if "::" in a]
            if any((here / a.split("::", 1)[0]).resolve() == path for a in named):
                return _(NOT_NAMED)
            return _(NOT_IN_FILE)
        if self.config.getoption("lf", False):
            return _(LAST_FAILED)
        return _(FILE_NOT_COLLECTED)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if self.record is None:
            return
        for item in items:
            info = self.record.checks.get(item.nodeid)
            if info is not None and info.selected:
                info.selected = False
                info.not_run = selection.deselect_reason(self.config)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.record is None:
            return
        final = {item.nodeid for item in session.items}
        for nodeid, info in self.record.checks.items():
            if info.selected and nodeid not in final:
                info.selected = False
                info.not_run = _(REMOVED_BY_HOOK)
        for item in session.items:
            item_id = _item_of(item)
            if item_id is not None and item.nodeid not in self.record.checks:  # a hook added it after collection
                self.record.checks[item.nodeid] = self._info(item, item_id)

    # -- running ---------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item_id = _item_of(item)
        if item_id is None or self.workspace is None or self.record is None:
            return
        blocked = self._blocked_by(item_id)
        if blocked is not None:
            req, state, reason = blocked
            raise Blocked(_(BLOCKED_BY_REQ).format(item=req, state=state.word, reason=reason),
                          self.workspace.item(req).how_in())

    def _blocked_by(self, item_id: str) -> tuple[str, State, str] | None:
        """A prerequisite all of whose selected checks already ran in this process and that is not done."""
        assert self.workspace is not None and self.record is not None
        for req in self.workspace.item(item_id).requires:
            selected = set(self.record.selected(req))
            outs = self.local.get(req, [])
            if not selected or not selected <= {o.nodeid for o in outs}:
                continue  # not in this run, or not all of it ran here: the controller decides
            state = worst(o.state for o in outs)
            if state is not State.DONE:
                bad = next(o for o in outs if o.state is state)
                return req, state, bad.reason
        return None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]):
        rep: pytest.TestReport = yield
        item_id = _item_of(item)
        if item_id is None or self.workspace is None:
            return rep
        outcome = classify(item_id, rep, call)
        if outcome is None:
            return rep
        # A path under the workspace root is said from the root, as the table's paths are (under the gate the
        # root is a temporary copy of the commit, whose name means nothing to the learner).
        reason = outcome.reason
        for root in dict.fromkeys((str(self.workspace.root), str(self.workspace.root.resolve()))):
            reason = reason.replace(root + os.sep, "")
        files, flags = _evidence(rep) if rep.when == "call" else (outcome.evidence, outcome.flags)
        outcome = CheckOutcome(item_id, item.nodeid, outcome.state, reason, outcome.command, files, flags)
        info = self.record.checks.get(item.nodeid) if self.record is not None else None
        outcome = judge(outcome, info.problems if info is not None else [])
        normalise(rep, item, outcome, call.excinfo.value if call.excinfo is not None else None)
        rep.user_properties.append((PROPERTY, json.dumps({**outcome.__dict__, "state": outcome.state.value})))
        self.local[item_id].append(outcome)
        return rep

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        mine = [value for name, value in report.user_properties if name == PROPERTY]
        self.seen_reports[report.nodeid].append((report.when, report.outcome, bool(mine)))
        for name, value in report.user_properties:
            if name == LOG_PROPERTY and report.when == "call":
                data = json.loads(value)
                self.logs.append((report.nodeid, data["title"], data["text"]))
        for value in mine:
            data = json.loads(value)
            data["state"] = State(data["state"])
            data["evidence"], data["flags"] = tuple(data["evidence"]), tuple(data["flags"])
            self.outcomes.append(CheckOutcome(**data))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if data and self.record is None:
            self.record = CollectionRecord.from_json(data)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if isinstance(excinfo.value, pytest.Session.Interrupted):  # --sw, xdist's -x: pytest stopped, no Ctrl-C
            self.stopped = _(STOPPED_BY).format(why=str(excinfo.value).strip() or "?")
        else:
            self.stopped = INTERRUPTED

    # -- end of session --------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.workspace is None:
            return
        if self.is_worker:
            if self.record is not None:
                self.config.workeroutput[WORKEROUTPUT_KEY] = self.record.to_json()  # type: ignore[attr-defined]
            return
        if self.record is not None:
            opt = self.config.option
            nothing_runs = next((flag for flag, on in (  # --setup-plan sets setuponly too: asked first
                ("--collect-only", opt.collectonly), ("--setup-plan", getattr(opt, "setupplan", False)),
                ("--setup-only", getattr(opt, "setuponly", False))) if on), None)
            stop = (_(NOTHING_RUNS).format(option=nothing_runs) if nothing_runs else self.stopped
                    or (_(MAXFAIL).format(why=session.shouldfail) if session.shouldfail else None))
            self.record.stopped = stop or self.record.stopped
            for nodeid, reports in self.seen_reports.items():
                if nodeid in self.record.checks and not any(has for _, _, has in reports):
                    bad = [outcome for _, outcome, _ in reports if outcome != "passed"]
                    if bad:
                        self.record.unclassified[nodeid] = bad[0]
                    elif any(when == "call" for when, _, _ in reports):
                        self.record.unclassified[nodeid] = "passed"
                    # setup and teardown alone (--setup-only): the check did not run
        gated = gate_outcomes(self.workspace, self.canonical) if self.gate else []
        self.results = combine(self.workspace, self.outcomes + gated, self.record)
        self.usage_error = session.exitstatus == pytest.ExitCode.USAGE_ERROR and not self.seen_reports
        if not self.usage_error:  # a bad -m/-k or path: nothing was checked, no report says otherwise
            self._write_reports()
        from pytest_distcheck.dod.report import PASSED, gate_verdict

        self.verdict = gate_verdict(self.results, self.canonical)
        failing = self.gate and self.verdict != PASSED
        untrusted = any(r.state is State.UNTRUSTED for r in self.results)
        if (failing or untrusted or self.write_errors) and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None and failing:  # pytest's last line, green for tests that all passed, says it too
                reporter.stats.setdefault(f"gate {self.verdict}", []).append(self.verdict)

    def _write_reports(self) -> None:
        json_path = self.config.getoption("distcheck_dod_json")
        md_path = self.config.getoption("distcheck_dod_markdown")
        if not (json_path or md_path):
            return
        from pytest_distcheck.dod import markdown, report

        assert self.workspace is not None and self.results is not None
        doc = report.build(self.workspace, self.results, self.config, self.canonical, self.snapshot)
        outputs = ((json_path, lambda: json.dumps(doc, indent=2) + "\n"), (md_path, lambda: markdown.render(doc)))
        for path, text in outputs:
            if not path:
                continue
            target = Path(path)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text(), encoding="utf-8")
            except OSError as exc:
                self.write_errors.append(_(CANNOT_WRITE).format(path=path, error=exc.strerror or exc))

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int) -> None:
        if self.results is None or self.workspace is None:
            return
        from pytest_distcheck.cmdline import bad_markexpr
        from pytest_distcheck.dod import table

        if self.usage_error and not bad_markexpr(self.config):
            return  # pytest's own usage error (a path that does not exist, a bad -m) says it all: no NOT RUN rows

        tr = terminalreporter
        for nodeid, title, text in self.logs:
            tr.write_sep("-", f"{title} ({nodeid})")
            tr.write_line(text)
        instead = self.config.stash.get(table_instead_key, "")
        if instead:
            tr.write_line(instead, yellow=True, bold=True)
        else:
            table.write(tr, self.workspace, self.results, self.gate, self.verdict)
        for problem in self.write_errors:
            tr.write_line(f"distcheck: {problem}", red=True, bold=True)
