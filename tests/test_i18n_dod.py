"""The DoD table, its reasons and the gate's human verdict in Spanish; the reports' identifiers (item ids, states,
the gate's verdict) the same in every language."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dod_support import gate_run, write_checks

from pytest_distcheck import i18n
from pytest_distcheck.cmdline import CHECK_IT
from pytest_distcheck.commands import gate as gate_command
from pytest_distcheck.dod.collection import CollectionRecord
from pytest_distcheck.dod.report import UNVERIFIED, unverified_reason
from pytest_distcheck.dod.state import BLOCKED_BY, OWN_CHECKS, CheckOutcome, State, combine
from pytest_distcheck.dod.table import (
    GATE_LINE,
    HEADING,
    ITEMS_DONE,
    NOT_CHECKED,
    NOT_GATED,
    RERUN,
    VERDICTS,
    not_checked_at_all,
)
from pytest_distcheck.i18n import _
from pytest_distcheck.workspace import load_workspace

# The two-item workspace of tests/conftest.py with the Spanish title and step of alpha.
WORKSPACE = """[phase]
id = "t1"
title = "test phase"

[[items]]
id = "alpha"
title = "first deliverable"
title_es = "primer entregable"
how = "make alpha"
how_es = "haz alpha"

[[items]]
id = "beta"
title = "second deliverable"
how = "make beta"
requires = ["alpha"]
"""


@pytest.fixture(autouse=True)
def _english_after():
    """An in-process run in Spanish leaves the kit speaking Spanish: the session's own summary must not."""
    yield
    i18n.use(i18n.DEFAULT)


def _workspace(tmp_path):
    path = tmp_path / "checks" / "distcheck.toml"
    path.parent.mkdir()
    path.write_text(WORKSPACE)
    return load_workspace(path)


def _spanish_locale(monkeypatch) -> None:
    for name in ("DISTCHECK_LANG", *i18n.LOCALE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "es_ES.UTF-8")


def test_a_spanish_locale_prints_the_dod_table_in_spanish_and_the_json_report_keeps_its_identifiers(
        workspace_dir, monkeypatch):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(WORKSPACE)
    write_checks(workspace_dir, "pytest_distcheck.pending('no log yet')", "pass")
    _spanish_locale(monkeypatch)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--dod-json=report.json")
    i18n.use("es")
    pending, blocked = State.PENDING.label, State.BLOCKED.label
    result.stdout.fnmatch_lines([
        f"*= {_(HEADING).format(phase='t1')} =*",
        f"{pending}  alpha  no log yet",
        "*-> haz alpha",
        "*" + _(RERUN).format(command="pytest --dod alpha"),
        f"{blocked}  beta   " + _(BLOCKED_BY).format(blockers=f"alpha ({State.PENDING.word})"),
        _(NOT_GATED).format(summary=_(ITEMS_DONE).format(done=0, total=2)),
    ])
    assert pending != "PENDING" and result.ret == 0
    items = json.loads((workspace_dir.path / "report.json").read_text())["items"]
    assert [(it["id"], it["state"]) for it in items] == [("alpha", "pending"), ("beta", "blocked")]
    assert items[0]["title"] == "primer entregable"


def test_a_state_reads_as_its_identifier_in_english_and_as_a_word_in_spanish():
    assert [s.word for s in State] == [s.value for s in State]
    assert State.NOT_RUN.label == "NOT RUN"
    i18n.use("es")
    assert all(s.word != s.value for s in State if s is not State.ERROR)
    assert State.NOT_RUN.label == _(State.NOT_RUN.word).upper() == "SIN EJECUTAR"


def test_reasons_and_steps_speak_spanish_while_states_stay_identifiers(tmp_path):
    """A check that names its item's English step (item.how) gets the Spanish one; the blocked reason names the
    blocker's state as a word."""
    ws = _workspace(tmp_path)
    i18n.use("es")
    outcomes = [CheckOutcome("alpha", "checks/t.py::a", State.PENDING, "no log yet", "make alpha"),
                CheckOutcome("beta", "checks/t.py::b", State.DONE, "evidence checked")]
    alpha, beta = combine(ws, outcomes)
    assert (alpha.state, alpha.title, alpha.command) == (State.PENDING, "primer entregable", "haz alpha")
    assert beta.state is State.BLOCKED and beta.title == "second deliverable"  # no title_es: the English one
    assert beta.reason == (_(BLOCKED_BY).format(blockers=f"alpha ({_('pending')})")
                           + _(OWN_CHECKS).format(state=_("done")))
    assert beta.command == "haz alpha"  # what unblocks it: its blocker's step


def test_a_run_that_collected_no_check_is_recognised_in_spanish_too(tmp_path):
    ws = _workspace(tmp_path)
    for lang in i18n.SUPPORTED:
        i18n.use(lang)
        assert not_checked_at_all(combine(ws, [], CollectionRecord())), lang


def test_a_run_of_tests_alone_says_in_spanish_that_the_dod_was_not_checked(workspace_dir, monkeypatch):
    """Lab 02's `pytest tests/test_tp_model.py ...` in a workspace: no DoD check collected, one Spanish line."""
    workspace_dir.makepyfile(test_alone="def test_x(): pass")
    monkeypatch.setenv("DISTCHECK_LANG", "es")
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "test_alone.py")
    i18n.use("es")
    line = _(NOT_CHECKED).format(phase="t1", checks="checks", next=_(CHECK_IT))
    assert line.startswith("distcheck: el DoD de la fase t1 no se ha comprobado")
    result.stdout.fnmatch_lines([line])
    assert result.ret == 0


def test_the_kit_s_own_tests_end_in_the_language_the_run_was_started_in():
    """tests/conftest.py makes every test speak English, not the run's DoD line: `DISTCHECK_LANG=es pytest
    tests/test_tp_model.py` in the kit's own checkout ends in Spanish, as it does in a workspace."""
    root = Path(__file__).resolve().parents[1]
    test = "tests/test_i18n_dod.py::test_a_state_reads_as_its_identifier_in_english_and_as_a_word_in_spanish"
    env = {**os.environ, "DISTCHECK_LANG": "es"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", test], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    i18n.use("es")
    phase = load_workspace(root / "checks" / "distcheck.toml").phase_id
    assert _(NOT_CHECKED).format(phase=phase, checks="checks", next=_(CHECK_IT)) in proc.stdout.splitlines()


def test_the_gate_says_its_verdict_in_spanish_and_its_report_keeps_the_identifier(workspace_dir):
    write_checks(workspace_dir, "pass", "pass")
    i18n.use("es")
    result = gate_run(workspace_dir)
    summary = _(ITEMS_DONE).format(done=2, total=2) + f"; {unverified_reason('t1')}"
    result.stdout.fnmatch_lines([_(GATE_LINE).format(verdict=_(VERDICTS[UNVERIFIED]), summary=summary)])
    gate = json.loads(result.report.read_text())["gate"]
    assert gate["verdict"] == UNVERIFIED and gate["passed"] is False


def test_distcheck_gate_hands_its_language_to_the_gate_s_own_process(monkeypatch, tmp_path):
    """The gate's process reads no DISTCHECK_LANG and no ini file of the workspace: the language goes as --lang."""
    calls = []
    monkeypatch.setattr(gate_command.subprocess, "call", lambda argv, env: calls.append(argv) or 0)
    i18n.use("es")
    args = gate_command.argparse.Namespace(root=str(tmp_path), dod_json=None, dod_markdown=None, color="no")
    assert gate_command.run(args) == 0
    assert calls[0][-1] == "--lang=es" and "DISTCHECK_LANG" not in str(calls)
