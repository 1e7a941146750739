"""pytest hooks that turn DoD checks' outcomes into item states, print the DoD table, write the
reports and gate the run.

Outcomes travel in ``report.user_properties`` so the table is right under pytest-xdist too: workers
classify, the controller (or the single process) combines and prints. What was collected and
selected travels from the workers in xdist's ``workeroutput``.

:class:`DodPlugin` is registered by the main plugin as ``distcheck-dod``; its options and the
guards around it are in :mod:`pytest_distcheck.dod.options`.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_distcheck import workspace as ws_mod
from pytest_distcheck.dod import selection
from pytest_distcheck.dod.classify import classify, normalise
from pytest_distcheck.dod.collection import CheckInfo, CollectionRecord
from pytest_distcheck.dod.integrity import (
    ModuleSnapshot,
    Observer,
    Origins,
    code_file,
    foreign_hooks,
    foreign_raise,
    static_problems,
)
from pytest_distcheck.dod.outcome import Blocked
from pytest_distcheck.dod.state import GATE_NODEID, CheckOutcome, ItemResult, State, combine, worst
from pytest_distcheck.errors import ConfigError

PROPERTY = "distcheck_dod"
LOG_PROPERTY = "distcheck_log"
EVIDENCE_PROPERTY = "distcheck_evidence"
PLUGIN_NAME = "distcheck-dod"
WORKEROUTPUT_KEY = "distcheck_dod_collection"
workspace_key = pytest.StashKey["ws_mod.Workspace | None"]()
# One line a plugin puts in place of the DoD table when the table would describe another folder than the
# learner's (the rehearsal's scratch copy).
table_instead_key = pytest.StashKey[str]()


def get_workspace(config: pytest.Config) -> ws_mod.Workspace | None:
    """The workspace of this run, loaded once; ``None`` when the configured file does not exist.

    Raises:
        pytest.UsageError: the file exists but is malformed (names the file and field).
    """
    if workspace_key in config.stash:
        return config.stash[workspace_key]
    ws = None
    try:
        path = ws_mod.run_workspace_file(config)
        if path.is_file():
            ws = ws_mod.load_workspace(path, root=config.rootpath)
    except ConfigError as exc:
        raise pytest.UsageError(f"distcheck: {exc}") from None
    config.stash[workspace_key] = ws
    return ws


def workspace_label(config: pytest.Config) -> str:
    """The run's workspace file as messages show it: relative to the rootdir when under it."""
    return ws_mod.display_path(ws_mod.run_workspace_file(config), config.rootpath)


def _item_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("dod")
    return marker.args[0] if marker is not None else None


def _with_evidence(outcome: CheckOutcome, rep: pytest.TestReport) -> CheckOutcome:
    """``outcome`` with the evidence its check recorded (``distcheck_evidence``); untrusted when a file of
    it is a copy of a reference solution (red-team R3)."""
    files: dict[str, dict[str, Any]] = {}
    flags: list[str] = []
    for name, value in rep.user_properties:
        if name == EVIDENCE_PROPERTY:
            data = json.loads(value)
            files.update((f["path"], f) for f in data["files"])
            flags += data["flags"]
    if not files and not flags:
        return outcome
    state, reason, command = outcome.state, outcome.reason, outcome.command
    copied = [f for f in files.values() if f["copied"]]
    if copied and state is not State.UNTRUSTED:
        state, command = State.UNTRUSTED, None
        reason = ("copied from the kit: " + "; ".join(f"{f['path']}: {f['copied']}" for f in copied)
                  + " (its reference solutions, course pages and fixtures are teaching material, never counted as"
                  " your work)")
    return CheckOutcome(outcome.item_id, outcome.nodeid, state, reason, command, tuple(files.values()),
                        tuple(dict.fromkeys(flags)))


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
        self.origins = Origins(self.workspace.checks_dir, config.rootpath) if self.workspace else None
        self.record: CollectionRecord | None = None
        self.observer = Observer()
        self.snapshot: ModuleSnapshot | None = None
        self.static: dict[str, list[str]] = {}
        self.suspects: dict[str, list[str]] = {}
        self.runtime: dict[str, list[str]] = defaultdict(list)
        self.local: dict[str, list[CheckOutcome]] = defaultdict(list)  # this process's outcomes, by item
        self.recorded: dict[tuple[str, str], str] = {}  # (nodeid, when) -> the property we attached
        self.seen_reports: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)
        self.write_errors: list[str] = []
        self.subsession = bool(config.getoption("distcheck_subsession", False)) and not self.is_worker
        self.isolation: list[str] | None = None  # problems with this process's isolation; None: not the gate's
        self.early: ModuleSnapshot | None = None
        self.root_watch: Any = None  # isolation.RootWatch in the gate's sub-session
        self.late_imports: Any = None  # isolation.LateKitImports in the gate's sub-session
        self.canonical: dict[str, Any] | None = None  # how the workspace matches the shipped DoD of its phase
        self.session: pytest.Session | None = None
        self._exit = os._exit  # taken before any learner code runs: the sub-session ends through it
        if self.workspace is not None and not self.is_worker:
            from pytest_distcheck.dod import manifest

            canon = manifest.shipped(self.workspace.phase_id)
            if canon is not None:
                self.canonical = manifest.compare(self.workspace.path, config.rootpath, self.workspace.raw, canon)
        if self.subsession and self.workspace is not None:
            self._start_isolated()

    def _start_isolated(self) -> None:
        """In the gate's sub-session, before any of the learner's code loads: check the isolation, import
        the kit modules the registered checks use and snapshot them."""
        from pytest_distcheck.dod import isolation
        from pytest_distcheck.ranks.plugin import plain_results_only

        assert self.workspace is not None and self.origins is not None
        plain_results_only(self.config)  # the ranks run the learner's lab: nothing they return may run code here
        self.isolation = isolation.problems(self.config)
        files = {self.config.rootpath / c.split("::", 1)[0] for it in self.workspace.items for c in it.checks}
        # The whole folder for an item that registers no check, and for a phase the kit ships no DoD for,
        # whose checks may import helper modules beside them (its gate is at best "unverified").
        registers_none = any(not it.checks for it in self.workspace.items)
        whole = [self.workspace.checks_dir] if self.canonical is None or registers_none else []
        self.root_watch = isolation.RootWatch(self.config.rootpath, self.origins, [*files, *whole])
        if not any(f.is_file() for f in files):  # the whole folder is collected then too (isolation.targets)
            whole = [self.workspace.checks_dir]
        files |= {p for d in whole for p in d.rglob("*.py")}
        isolation.preimport(sorted(f for f in files if f.is_file()))
        isolation.import_dod_modules()  # the verdict's own (report, state, ...) are lazy imports: snapshot them now
        self.early = ModuleSnapshot(self.origins, [], since="after the gate's sub-session started")
        if self.canonical is None:
            isolation.expose_root(self.config.rootpath)
        self.late_imports = isolation.LateKitImports()
        self.late_imports.arm()

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
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.dod takes one item id, got {marker.args!r}"
                )
            if self.workspace is None:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.dod({marker.args[0]!r}) but no workspace file "
                    f"{workspace_label(config)!r} ({ws_mod.NOT_FOUND_HINT})"
                )
            try:
                self.workspace.item(marker.args[0])
            except KeyError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc.args[0]}") from None
        if self.workspace is None:
            return
        ws, origins = self.workspace, self.origins
        assert origins is not None
        record = CollectionRecord(checks_dir=origins.rel(str(ws.checks_dir)))
        for item in items:
            item_id = _item_of(item)
            if item_id is not None:
                func = getattr(item, "obj", None)
                record.checks[item.nodeid] = CheckInfo(item_id, origins.rel(code_file(func)),
                                                       getattr(func, "__qualname__", item.name))
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
            for item in drop:
                if item.nodeid in record.checks:
                    record.checks[item.nodeid].selected = False
                    record.checks[item.nodeid].not_run = f"not selected (--dod {' '.join(self.scope)})"
            if drop:
                config.hook.pytest_deselected(items=drop)
            items[:] = keep
        selection.order_prerequisites_first(ws, items, _item_of)

    def _why_missing(self, pattern: str, collected_files: set[str]) -> str:
        file = pattern.split("::", 1)[0]
        if not (self.config.rootpath / file).is_file():
            return "file missing"
        if file in collected_files:
            return "no such check in the file, or not marked for this item"
        return "its file was not among the paths this run collected"

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if self.record is None:
            return
        for item in items:
            info = self.record.checks.get(item.nodeid)
            if info is not None and info.selected:
                info.selected = False
                info.not_run = selection.deselect_reason(self.config)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.record is None or self.origins is None or self.workspace is None:
            return
        final = {item.nodeid for item in session.items}
        for nodeid, info in self.record.checks.items():
            if info.selected and nodeid not in final:
                info.selected = False
                info.not_run = "removed from the run by a collection hook without being deselected"
        modules = []
        for item in session.items:
            item_id = _item_of(item)
            if item_id is None:
                continue
            problems = static_problems(item, self.origins, self, self.workspace.item(item_id).checks)
            if item.nodeid not in self.record.checks:
                problems.append("it was added to the run by a hook after the kit saw the collected checks")
                func = getattr(item, "obj", None)
                self.record.checks[item.nodeid] = CheckInfo(item_id, self.origins.rel(code_file(func)),
                                                            getattr(func, "__qualname__", item.name))
            self.record.checks[item.nodeid].problems = problems
            self.static[item.nodeid] = problems
            self.suspects[item.nodeid] = foreign_hooks(item, self.origins)
            if isinstance(item, pytest.Function):
                self.observer.remember(item)
                modules.append(item.module)
        self.snapshot = ModuleSnapshot(self.origins, modules)

    # -- running ---------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item_id = _item_of(item)
        if item_id is None or self.workspace is None or self.record is None:
            return
        blocked = self._blocked_by(item_id)
        if blocked is not None:
            req, state, reason = blocked
            raise Blocked(f"blocked by {req} ({state.value}: {reason})", self.workspace.item(req).how)

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
    def pytest_runtest_call(self, item: pytest.Item):
        if _item_of(item) is None or self.workspace is None or not isinstance(item, pytest.Function):
            return (yield)
        problem = self.observer.start(item, self.origins)
        if problem:
            self.runtime[item.nodeid].append(problem)
        try:
            return (yield)
        finally:
            self.observer.finish(item)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]):
        rep: pytest.TestReport = yield
        item_id = _item_of(item)
        if item_id is None or self.workspace is None:
            return rep
        seen = self.observer.seen(item.nodeid) if rep.when == "call" else None
        module = getattr(item, "module", None)
        # (kit namespaces: the sub-session's, from before lab code; read only when an outcome was raised)
        outcome = classify(item_id, rep, call, seen, self.suspects.get(item.nodeid, []),
                           lambda exc: foreign_raise(exc, module, self.origins,
                                                     self.early.namespaces() if self.early is not None else None))
        if outcome is None:
            return rep
        problems = self.static.get(item.nodeid, []) + self.runtime.pop(item.nodeid, [])
        if self.snapshot is not None:
            problems += self.snapshot.problems({getattr(getattr(item, "module", None), "__name__", "")})
        if self.early is not None:
            named = {p.split(" ", 1)[0] for p in problems}
            problems += [p for p in self.early.problems() if p.split(" ", 1)[0] not in named]
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            outcome = CheckOutcome(item_id, item.nodeid, State.UNTRUSTED,
                                   "not the kit's own check: " + "; ".join(problems[:3]) + more)
        if rep.when == "call":
            outcome = _with_evidence(outcome, rep)
        exc = call.excinfo.value if call.excinfo is not None else None
        normalise(rep, item, outcome, exc)
        value = json.dumps({**outcome.__dict__, "state": outcome.state.value, "outcome": rep.outcome})
        rep.user_properties.append((PROPERTY, value))
        self.recorded[(item.nodeid, rep.when)] = value
        self.local[item_id].append(outcome)
        return rep

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        mine = [value for name, value in report.user_properties if name == PROPERTY]
        self.seen_reports[report.nodeid].append((report.when, report.outcome, bool(mine)))
        recorded = self.recorded.get((report.nodeid, report.when))
        if recorded is not None and recorded not in mine:
            self.outcomes.append(CheckOutcome(
                json.loads(recorded)["item_id"], report.nodeid, State.UNTRUSTED,
                f"the kit's classification of {report.nodeid} ({report.when}) was removed from its report "
                "or rewritten after the kit made it"))
        for name, value in report.user_properties:
            if name == LOG_PROPERTY and report.when == "call":
                data = json.loads(value)
                self.logs.append((report.nodeid, data["title"], data["text"]))
        for value in mine:
            data = json.loads(value)
            expected = data.pop("outcome")
            data["state"] = State(data["state"])
            outcome = CheckOutcome(**data)
            if report.outcome != expected:
                outcome = CheckOutcome(outcome.item_id, outcome.nodeid, State.UNTRUSTED,
                                       f"its report was changed after the kit classified it {outcome.state.value} "
                                       f"({expected}; now {report.outcome}): {outcome.reason}", None,
                                       outcome.evidence, outcome.flags)
            self.outcomes.append(outcome)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if data and self.record is None:
            self.record = CollectionRecord.from_json(data)

    # -- end of session --------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.session = session
        if self.workspace is None:
            return
        if self.is_worker:
            if self.record is not None:
                self.config.workeroutput[WORKEROUTPUT_KEY] = self.record.to_json()  # type: ignore[attr-defined]
            return
        if self.record is not None:
            for nodeid, reports in self.seen_reports.items():
                if nodeid in self.record.checks and not any(has for _, _, has in reports):
                    bad = [outcome for _, outcome, _ in reports if outcome != "passed"]
                    if bad:
                        self.record.unclassified[nodeid] = bad[0]
                    elif any(when == "call" for when, _, _ in reports):
                        self.record.unclassified[nodeid] = "passed"
                    # setup and teardown alone (--setup-only): the check did not run
        self.results = combine(self.workspace, self.outcomes + self._isolation_outcomes(), self.record)
        self._write_reports()
        from pytest_distcheck.dod.report import PASSED, gate_verdict

        self.verdict = gate_verdict(self.results, self.canonical)
        failing = self.config.getoption("distcheck_gate") and self.verdict != PASSED
        untrusted = any(r.state is State.UNTRUSTED for r in self.results)
        if (failing or untrusted or self.write_errors) and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The gate's sub-session (python -I, so never a test's in-process run) ends here, its report
        written: no atexit hook of lab code can rewrite the report or the exit status (red-team A01)."""
        if self.late_imports is not None:
            self.late_imports.disarm()
        if self.isolation is None or not sys.flags.isolated:
            return
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        status = self.session.exitstatus if self.session is not None else pytest.ExitCode.INTERNAL_ERROR
        self._exit(int(status))

    def _isolation_facts(self) -> dict[str, Any]:
        """The report's ``isolation`` section: whether the checks ran in the gate's isolated sub-session."""
        from pytest_distcheck.dod import isolation

        ok = self.isolation is not None and not self.isolation
        return {"subsession": self.isolation is not None, "isolated": ok, "problems": list(self.isolation or []),
                "what": list(isolation.WHAT) if ok else []}

    def _isolation_outcomes(self) -> list[CheckOutcome]:
        """Untrusted for every item when the gate's process is not isolated or the workspace is not the
        shipped DoD of its phase (only under ``--gate``: a learner editing a check sees its own result)."""
        from pytest_distcheck.dod import isolation

        if self.workspace is None:
            return []
        whys = []
        if self.isolation and isolation.REQUIRED:
            whys.append("the gate's sub-session is not isolated: " + "; ".join(self.isolation))
        if self.root_watch is not None:  # also in the kit's in-process tests: a conftest that got in is named
            whys += self.root_watch.problems()
        if self.late_imports is not None:
            whys += self.late_imports.problems()
        if self.early is not None:  # the gate's sub-session: kit code or data changed by the end of the run (A12)
            tampered = list(dict.fromkeys(self.early.problems()
                                          + (self.snapshot.problems(set()) if self.snapshot is not None else [])))
            named = " ".join(o.reason for o in self.outcomes)
            tampered = [p for p in tampered if p.split(" ", 1)[0] + " " not in named]  # an item names it already
            if tampered:
                more = f" (and {len(tampered) - 3} more)" if len(tampered) > 3 else ""
                whys.append("the kit was changed while the checks ran: " + "; ".join(tampered[:3]) + more)
        if self.canonical is not None and not self.canonical["trusted"] and self.config.getoption("distcheck_gate"):
            more = len(self.canonical["problems"]) - 3
            whys.append(f"the workspace is not the shipped DoD of phase {self.canonical['phase']}: "
                        + "; ".join(self.canonical["problems"][:3]) + (f" (and {more} more)" if more > 0 else ""))
        if not whys:
            return []
        return [CheckOutcome(it.id, GATE_NODEID, State.UNTRUSTED, "; ".join(whys))
                for it in self.workspace.items]

    def _write_reports(self) -> None:
        json_path = self.config.getoption("distcheck_dod_json")
        md_path = self.config.getoption("distcheck_dod_markdown")
        if not (json_path or md_path):
            return
        from pytest_distcheck.dod import markdown, report

        assert self.workspace is not None and self.results is not None
        doc = report.build(self.workspace, self.results, self.config, self._isolation_facts(), self.canonical)
        outputs = ((json_path, lambda: json.dumps(doc, indent=2) + "\n"), (md_path, lambda: markdown.render(doc)))
        for path, text in outputs:
            if not path:
                continue
            target = Path(path)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text(), encoding="utf-8")
            except OSError as exc:
                self.write_errors.append(f"cannot write {path}: {exc.strerror or exc}")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.results is None or self.workspace is None:
            return
        from pytest_distcheck.dod import table

        tr = terminalreporter
        for nodeid, title, text in self.logs:
            tr.write_sep("-", f"{title} ({nodeid})")
            tr.write_line(text)
        instead = self.config.stash.get(table_instead_key, "")
        if instead:
            tr.write_line(instead, yellow=True, bold=True)
        else:
            table.write(tr, self.workspace, self.results, bool(self.config.getoption("distcheck_gate")), self.verdict)
        for problem in self.write_errors:
            tr.write_line(f"distcheck: {problem}", red=True, bold=True)
