"""Settling by hand a run left open by a crash: `distcheck budget --settle RUN_ID --seconds S` and
`BudgetGuard.settle_open_run`, on the phase's workspace file with the synthetic ledger
fixtures/budget/ledger-within.md (run cccc3333-01: open and started, 1200 s at $1.18/h = $0.3933, pod podC)."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from ledger_support import rechained

from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.errors import SettleRefused
from pytest_distcheck.budget.guard import (
    ALREADY_SETTLED,
    NEGATIVE_SECONDS,
    UNKNOWN_RUN,
    UNSETTLED_RUNS,
    BudgetGuard,
)
from pytest_distcheck.budget.ledger import Ledger, parse
from pytest_distcheck.cli import main
from pytest_distcheck.commands.budget import (
    CANNOT_RECONCILE,
    NOT_WHOLE_SECONDS,
    NOTHING_TO_RECONCILE,
    OVERRUN_LINE,
    OVERRUN_RECORDED,
    PHASE_NOW,
    PHASE_TOTAL,
    SETTLE_COMMAND,
    SETTLE_TOGETHER,
    SETTLED,
)
from pytest_distcheck.workspace import load_workspace

ROOT = Path(__file__).resolve().parents[1]
LEDGER = "experiments/35-cloud-budget.md"


def usd(rate: float, seconds: int) -> Decimal:
    """What a row costs, exactly, as the kit recomputes it (ledger.LedgerRow.recomputed_cost)."""
    return Decimal(str(rate)) * seconds / Decimal(3600)


@pytest.fixture
def phase(pytester: pytest.Pytester, monkeypatch) -> Path:
    """A copy of the phase's workspace file and the within-budget ledger; the working directory."""
    pytester.mkdir("checks")
    pytester.mkdir("experiments")
    shutil.copy(ROOT / "checks" / "distcheck.toml", pytester.path / "checks" / "distcheck.toml")
    shutil.copy(ROOT / "fixtures" / "budget" / "ledger-within.md", pytester.path / LEDGER)
    monkeypatch.chdir(pytester.path)
    return pytester.path / LEDGER


def test_settle_appends_one_row_copying_the_open_row_and_totals_use_it(phase: Path, capsys):
    before = phase.read_bytes()
    rows_before = parse(before.decode(), phase)
    assert accounting.totals(rows_before).total == usd(1.18, 611) + usd(0.4, 900) + usd(1.18, 1200)

    assert main(["budget", "--settle", "cccc3333-01", "--seconds", "300"]) == 0
    out = capsys.readouterr().out
    after = phase.read_bytes()
    assert after.startswith(before)  # nothing rewritten
    added = after[len(before):].decode()
    assert added.count("\n") == 1 and added.startswith("| 2026-") and added.endswith(" |\n")  # one row
    rows = parse(after.decode(), phase)
    assert len(rows) == len(rows_before) + 1
    opened, settled = rows[-2], rows[-1]
    assert (opened.run_id, opened.status, settled.run_id, settled.status) == (
        "cccc3333-01", "started", "cccc3333-01", "settled")
    same = ("provider", "gpu_type", "gpu_count", "rate_per_hour", "experiment", "purpose", "resource_id")
    assert {f: getattr(settled, f) for f in same} == {f: getattr(opened, f) for f in same}
    assert settled.billed_s == 300 and settled.cost == Decimal("0.0983")  # 1.18 x 300 / 3600
    t = accounting.totals(rows)
    assert t.unsettled == ()
    assert t.total == usd(1.18, 611) + usd(0.4, 900) + usd(1.18, 300)
    assert t.experiment("tp-inference") == usd(1.18, 611) + usd(1.18, 300)
    assert SETTLED.format(run="cccc3333-01", pod="podC", ledger=phase, line=settled.line, seconds=300, rate="$1.18",
                          cost="$0.10", worst_s=1200, worst="$0.39") in out
    assert PHASE_NOW.format(spent="$0.40", ceiling="$5.00") in out

    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert PHASE_TOTAL.format(spent="$0.40", ceiling="$5.00", left="$4.60", runs=3) in out and "--settle" not in out


def test_budget_lists_each_unsettled_run_with_its_settle_command(phase: Path, capsys):
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert SETTLE_COMMAND.format(config="", run="cccc3333-01", pod="pod podC", seconds=1200) in out
    assert "--settle aaaa1111-01" not in out and "--settle bbbb2222-01" not in out
    assert main(["budget", "--config", "./checks/distcheck.toml"]) == 0
    out = capsys.readouterr().out
    assert SETTLE_COMMAND.format(config=" --config ./checks/distcheck.toml", run="cccc3333-01", pod="pod podC",
                                 seconds=1200) in out


@pytest.mark.parametrize("argv, message", [
    (["--settle", "zzzz9999-01", "--seconds", "10"],
     lambda ledger: UNKNOWN_RUN.format(run="zzzz9999-01", ledger=ledger,
                                       hint=UNSETTLED_RUNS.format(runs="cccc3333-01"))),
    (["--settle", "aaaa1111-01", "--seconds", "10"],
     lambda ledger: ALREADY_SETTLED.format(run="aaaa1111-01", ledger=ledger, line=13, seconds=611, cost="$0.20")),
    (["--settle", "bbbb2222-01", "--seconds", "10"],
     lambda ledger: ALREADY_SETTLED.format(run="bbbb2222-01", ledger=ledger, line=16, seconds=900, cost="$0.10")),
    (["--settle", "cccc3333-01", "--seconds", "-5"], lambda ledger: NEGATIVE_SECONDS.format(seconds=-5, pod="podC")),
    (["--settle", "cccc3333-01", "--seconds", "9\u00b2"], lambda ledger: NOT_WHOLE_SECONDS.format(text="9\u00b2")),
    (["--settle", "cccc3333-01", "--seconds", "12.5"], lambda ledger: NOT_WHOLE_SECONDS.format(text="12.5")),
    (["--settle", "cccc3333-01"], lambda ledger: SETTLE_TOGETHER),
    (["--seconds", "10"], lambda ledger: SETTLE_TOGETHER),
])
def test_refused_settlements_say_why_in_one_line_and_write_nothing(phase: Path, capsys, argv, message):
    before = phase.read_bytes()
    assert main(["budget", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == f"distcheck budget: {message(phase)}\n"
    assert phase.read_bytes() == before


def test_seconds_past_the_reservation_are_never_refused_but_recorded_as_an_overrun(phase: Path, capsys):
    before = phase.read_bytes()
    assert main(["budget", "--settle", "cccc3333-01", "--seconds", "4000"]) == 0
    out = capsys.readouterr().out
    rows = parse(phase.read_text(), phase)
    assert phase.read_bytes().startswith(before)
    settled, overrun = rows[-2:]
    assert (settled.status, settled.billed_s, overrun.status, overrun.billed_s) == ("settled", 1200, "overrun", 2800)
    t = accounting.totals(rows)
    assert t.overruns == ("cccc3333-01",) and t.total == usd(1.18, 611) + usd(0.4, 900) + usd(1.18, 4000)
    assert OVERRUN_RECORDED.format(line=overrun.line, seconds=2800, cost="$0.92") in out
    assert main(["budget"]) == 0
    assert OVERRUN_LINE.format(run="cccc3333-01", pod="podC", seconds=2800, line=overrun.line,
                               cost="$0.92") in capsys.readouterr().out


def test_a_second_settlement_of_the_same_run_is_refused(phase: Path, capsys):
    assert main(["budget", "--settle", "cccc3333-01", "--seconds", "1200"]) == 0  # the whole reservation is fine
    settled = phase.read_bytes()
    assert main(["budget", "--settle", "cccc3333-01", "--seconds", "5"]) == 2
    line = parse(settled.decode(), phase)[-1].line
    assert capsys.readouterr().err == "distcheck budget: " + ALREADY_SETTLED.format(
        run="cccc3333-01", ledger=phase, line=line, seconds=1200, cost="$0.39") + "\n"
    assert phase.read_bytes() == settled


def test_a_malformed_ledger_is_reported_and_not_written(phase: Path, capsys):
    bad = ("| 2026-12-01T13:00:00Z | dddd4444-01 | open | runpod | A40 x 1 | 900 | 0.4 | 0.0500 | USD | - | x "
           "| - |\n")
    phase.write_text(rechained(phase.read_text() + bad))
    before = phase.read_bytes()
    assert main(["budget", "--settle", "cccc3333-01", "--seconds", "300"]) == 2
    err = capsys.readouterr().err
    assert "line 19: cost 0.0500 does not match rate_per_hour 0.4 x billed_s 900" in err, err
    assert phase.read_bytes() == before


def test_settling_a_crashed_run_drops_its_held_reservation(tmp_path: Path):
    ledger = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock")
    crashed = BudgetGuard(ledger, phase_ceiling_usd=5.0, session_id="sessdead")
    res = crashed.reserve("runpod", "RTX 4090", 2, 1800, "t::a")
    res.record_pod("pod-x", usd_per_hour=1.18)  # then the learner's machine dies: no settle()
    later = BudgetGuard(ledger, phase_ceiling_usd=5.0, session_id="sessnext")
    assert res.run_id in later.status().in_progress  # this test process is still alive
    assert later.status().totals.unsettled == (res.run_id,)
    row = later.settle_open_run(res.run_id, 610)
    assert (row.status, row.billed_s, row.resource_id) == ("settled", 610, "pod-x")
    st = later.status()
    assert st.in_progress == {} and st.totals.unsettled == ()
    assert st.totals.total == Decimal("1.18") * 610 / 3600
    with pytest.raises(SettleRefused, match="already settled"):
        later.settle_open_run(res.run_id, 610)


def test_reconcile_without_a_key_says_it_cannot_ask_the_provider(phase: Path, capsys, monkeypatch):
    """With pods in the ledger and no RUNPOD_API_KEY, --reconcile refuses (exit 2) saying why and what to
    do, writes nothing, and never speaks of paid GPU tests (it is not one)."""
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    before = phase.read_bytes()
    assert main(["budget", "--reconcile"]) == 2
    err = capsys.readouterr().err
    assert err == "distcheck budget: " + CANNOT_RECONCILE.format(env="RUNPOD_API_KEY") + "\n"
    assert "paid GPU tests" not in err
    assert phase.read_bytes() == before


def test_reconcile_with_an_empty_ledger_says_there_is_nothing_to_reconcile(phase: Path, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    phase.unlink()
    assert main(["budget", "--reconcile"]) == 0
    out = capsys.readouterr().out
    assert NOTHING_TO_RECONCILE in out and "Reconciled with" not in out, out


def test_a_torn_last_line_is_repaired_by_the_command_its_error_names(phase: Path, capsys):
    from pytest_distcheck.budget.ledger import REPAIR_COMMAND
    from pytest_distcheck.commands.budget import REPAIRED

    whole = phase.read_bytes()
    phase.write_bytes(whole + b"| 2026-12-01T13:00:00Z | cccc3333-01 | sett")  # a kill in the middle of a write
    assert main(["budget"]) == 2
    err = capsys.readouterr().err
    assert "line 19: cut short" in err and REPAIR_COMMAND in err
    assert main(REPAIR_COMMAND.split()[1:]) == 0
    out = capsys.readouterr().out
    assert out.startswith(REPAIRED.split("{")[0] + "19 of ") and phase.read_bytes() == whole
    assert main(["budget"]) == 0


def test_the_budget_command_names_a_pod_that_may_still_be_billing_and_one_whose_rate_was_unknown(
        phase: Path, capsys):
    from pytest_distcheck.commands.budget import RATE_UNKNOWN_LINE, TERMINATE_FAILED_LINE

    guard = BudgetGuard.from_workspace(load_workspace(phase.parents[1] / "checks" / "distcheck.toml"))
    guard.record_event("cccc3333-01", "rate-unknown")
    guard.record_event("cccc3333-01", "terminate-failed")
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert TERMINATE_FAILED_LINE.format(run="cccc3333-01", pod="podC") in out
    assert RATE_UNKNOWN_LINE.format(run="cccc3333-01", pod="podC") in out
    assert PHASE_TOTAL.format(spent="$0.69", ceiling="$5.00", left="$4.31", runs=3) in out  # events cost nothing


def test_a_run_whose_pod_was_never_recorded_is_not_asked_for_the_seconds_of_pod_dash(phase: Path, capsys):
    from pytest_distcheck.commands.budget import NO_POD_RECORDED

    guard = BudgetGuard.from_workspace(load_workspace(phase.parents[1] / "checks" / "distcheck.toml"),
                                       session_id="abcd0001")
    res = guard.reserve("runpod", "RTX 4090", 2, 600, "t::killed", experiment="tp-inference")
    guard._drop_held(res.run_id)  # its process died before the started row
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert NO_POD_RECORDED.format(run=res.run_id) in out and "pod -" not in out
