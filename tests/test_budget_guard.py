"""The budget guard: ceilings, reservations across processes, recording and settling paid runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from pytest_distcheck.budget.errors import BudgetRefused, PriceUnknown
from pytest_distcheck.budget.guard import (
    CAP_BUYS_NOTHING,
    DID_YOU_MEAN,
    LAUNCH,
    PHASE_CEILING,
    REFUSED,
    SESSION_CEILING,
    UNDECLARED_EXPERIMENT,
    BudgetGuard,
)
from pytest_distcheck.budget.ledger import Ledger, LedgerError
from pytest_distcheck.budget.pricing import NO_BILLING_RULE, NO_PRICE, UNKNOWN_CLOUD
from pytest_distcheck.workspace import load_workspace


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock")


def make_guard(ledger: Ledger, session: str = "sess0001", max_usd: float | None = 3.0) -> BudgetGuard:
    return BudgetGuard(ledger, phase_ceiling_usd=5.0, experiment_ceilings_usd={"tp-inference": 3.0},
                       session_ceiling_usd=max_usd, session_id=session)


def test_reserve_prices_the_worst_case_from_the_table(ledger: Ledger):
    g = make_guard(ledger)
    res = g.reserve("runpod", "RTX 4090", 2, 1800, "t::a", experiment="tp-inference")
    assert res.usd == Decimal("0.5900")  # 0.59 $/GPU-h x 2 GPUs x 0.5 h (shipped table)
    assert res.run_id.startswith("sess0001-") and res.max_seconds == 1800
    st = g.status()
    assert st.limits["phase"].spent == Decimal("0.59") and st.limits["session"].left == Decimal("2.41")
    (opened,) = ledger.read()  # the open row is in the ledger before anything is created
    assert (opened.status, opened.resource_id, opened.billed_s, opened.cost) == ("open", "-", 1800, res.usd)
    assert res.open_row == opened and list(st.in_progress) == [res.run_id]


def test_a_ledger_with_only_an_open_run_is_not_said_to_have_nothing_spent(ledger: Ledger):
    from pytest_distcheck.budget import accounting

    assert accounting.confirmation(ledger.read()) == accounting.NOTHING_SPENT
    make_guard(ledger).reserve("runpod", "RTX 4090", 2, 1800, "t::a", experiment="tp-inference")
    # The open row counts at its worst case in the totals; "nothing spent" beside them would contradict them.
    assert accounting.confirmation(ledger.read()) == accounting.NOTHING_SETTLED


def test_refusal_names_the_figures_and_the_binding_ceiling(ledger: Ledger):
    g = make_guard(ledger)
    g.reserve("runpod", "RTX 4090", 2, 3600 * 2, "t::a", experiment="tp-inference")  # $2.36
    with pytest.raises(BudgetRefused) as exc:
        g.reserve("runpod", "RTX 4090", 2, 3600, "t::b", experiment="tp-inference")  # $1.18 > $0.64 left
    launch = LAUNCH.format(purpose="t::b", count=2, gpu="RTX 4090", provider="runpod", cloud=" secure", rate="$0.59")
    assert str(exc.value) == REFUSED.format(launch=launch, seconds=3600, cost="$1.18", left="$0.64", ceiling="$3.00",
                                            limit=SESSION_CEILING.format(usd=Decimal("3.0")), spent="$2.36")
    assert exc.value.would_cost == pytest.approx(1.18) and exc.value.left == pytest.approx(0.64)
    assert len(ledger.read()) == 1  # the refused one wrote nothing


def test_phase_ceiling_counts_the_ledger_and_other_sessions(ledger: Ledger):
    a = make_guard(ledger, "sessaaaa", max_usd=5.0)
    res = a.reserve("runpod", "H100 PCIe", 1, 3600, "t::a")  # $2.39
    res.record_pod("pod-a", usd_per_hour=2.39)
    res.settle(3600)
    b = make_guard(ledger, "sessbbbb", max_usd=5.0)
    assert b.status().limits["session"].left == Decimal(5)  # another session's spend is not its own
    with pytest.raises(BudgetRefused) as exc:
        b.reserve("runpod", "H100 PCIe", 1, 3600 + 600, "t::b")
    launch = LAUNCH.format(purpose="t::b", count=1, gpu="H100 PCIe", provider="runpod", cloud=" secure", rate="$2.39")
    assert str(exc.value) == REFUSED.format(launch=launch, seconds=4200, cost="$2.79", left="$2.61", ceiling="$5.00",
                                            limit=PHASE_CEILING.format(usd="$5.00", source="the workspace file"),
                                            spent="$2.39")


def test_budget_cap_shrinks_the_reservation_and_its_time(ledger: Ledger):
    g = make_guard(ledger)
    res = g.reserve("runpod", "RTX 4090", 2, 3600, "t::a", cap_usd=0.25)
    assert res.usd <= Decimal("0.25") and res.max_seconds == 762  # floor(0.25 / (1.18 / 3600))
    with pytest.raises(BudgetRefused) as exc:
        BudgetGuard(ledger, phase_ceiling_usd=5, prices=_prices_with_minimum(3600), session_id="x").reserve(
            "hourly", "T4", 1, 60, "t::b", cloud="on-demand", cap_usd=0.01)
    launch = LAUNCH.format(purpose="t::b", count=1, gpu="T4", provider="hourly", cloud="", rate="$0.50")
    assert str(exc.value) == CAP_BUYS_NOTHING.format(launch=launch, cap="$0.01", minimum=3600)


def _prices_with_minimum(minimum: int):
    from pytest_distcheck.budget.pricing import PriceBook

    return PriceBook.from_table({
        "currency": "USD",
        "billing": {"hourly": {"granularity_s": 3600, "minimum_s": minimum, "source": "a test's billing rule",
                               "recorded": "2026-11-29"}},
        "prices": [{"provider": "hourly", "cloud": "on-demand", "gpu": "T4", "provider_gpu_id": "t4",
                    "usd_per_gpu_hour": 0.5, "source": "a test's price entry", "source_date": "undated",
                    "recorded": "2026-11-29", "confidence": "low"}]}, "test-prices.json")


def test_hourly_billing_reserves_whole_hours(ledger: Ledger):
    g = BudgetGuard(ledger, phase_ceiling_usd=5, prices=_prices_with_minimum(3600), session_id="x")
    est = g.estimate("hourly", "T4", 2, 61, cloud="on-demand")
    assert est.billed_s == 3600 and est.usd == Decimal("1.0")


def test_unknown_gpu_or_cloud_is_refused_never_guessed(ledger: Ledger):
    g = make_guard(ledger)
    book = g.prices
    with pytest.raises(PriceUnknown) as exc:
        g.reserve("runpod", "B300", 2, 60, "t::a")
    assert str(exc.value) == NO_PRICE.format(cloud="secure", gpu="B300", provider="runpod", path=book.path,
                                             known=", ".join(book.known("runpod", "secure")),
                                             hint="set RUNPOD_API_KEY for live prices")
    with pytest.raises(PriceUnknown) as exc:
        g.reserve("runpod", "RTX 4090", 2, 60, "t::a", cloud="ALL")
    assert str(exc.value) == UNKNOWN_CLOUD.format(cloud="ALL", clouds="secure, community")
    with pytest.raises(PriceUnknown) as exc:
        g.reserve("lambda", "A100", 1, 60, "t::a")
    assert str(exc.value) == NO_BILLING_RULE.format(provider="lambda", path=book.path,
                                                    known=", ".join(sorted(book.table["billing"])))
    assert not ledger.path.exists()


def test_an_undeclared_or_misspelt_experiment_is_refused_before_anything_is_written(ledger: Ledger):
    g = make_guard(ledger)
    for bad, hint in (("tp_inference", DID_YOU_MEAN.format(name="tp-inference")),
                      ("tp inference", DID_YOU_MEAN.format(name="tp-inference")), ("nope", "")):
        with pytest.raises(BudgetRefused) as exc:
            g.reserve("runpod", "RTX 4090", 2, 600, "t::a", experiment=bad)
        assert str(exc.value) == UNDECLARED_EXPERIMENT.format(experiment=bad, source="the workspace file",
                                                              known="tp-inference", hint=hint)
    assert not ledger.path.exists()
    uncapped = BudgetGuard(ledger, phase_ceiling_usd=5.0, uncapped_experiments=["smoke"], session_id="s")
    assert uncapped.reserve("runpod", "A40", 1, 60, "t::b", experiment="smoke").open_row.experiment == "smoke"


def test_record_pod_writes_an_open_row_then_settle_a_settled_row(ledger: Ledger):
    g = make_guard(ledger)
    res = g.reserve("runpod", "RTX 4090", 2, 1800, "t::a", experiment="tp-inference")
    started = res.record_pod("pod-xyz", usd_per_hour=1.38, started_at=0.0)  # dearer than the table
    assert (started.status, started.resource_id, started.rate_per_hour) == ("started", "pod-xyz", Decimal("1.38"))
    assert started.billed_s == 1539 and started.cost <= res.usd  # shrunk to what $0.59 buys at $1.38/h
    assert res.limit_usd == started.cost and res.max_seconds == 1539
    st = g.status()
    assert st.totals.unsettled == (res.run_id,) and st.limits["phase"].spent == started.recomputed_cost
    settled = res.settle(611.2)
    assert (settled.status, settled.billed_s, settled.cost) == ("settled", 612, Decimal("0.2346"))
    assert res.settle(999) is settled  # idempotent: a second settle writes nothing
    rows = ledger.read()
    assert [r.status for r in rows] == ["open", "started", "settled"]
    st = g.status()
    assert st.in_progress == {} and st.totals.total == Decimal("1.38") * 612 / 3600


@pytest.mark.parametrize("reported", [0, None, 0.5, -1.0])
def test_a_reported_rate_of_zero_missing_or_below_the_priced_one_is_metered_at_the_priced_rate(ledger, reported):
    g = make_guard(ledger)
    res = g.reserve("runpod", "RTX 4090", 2, 1800, "t::a", experiment="tp-inference")  # priced 1.18/h
    started = res.record_pod("pod-0", usd_per_hour=reported, started_at=0.0)
    assert started.rate_per_hour == Decimal("1.18") and started.billed_s == 1800
    assert res.usd_per_hour == Decimal("1.18")


def test_seconds_past_the_reservation_are_recorded_as_an_overrun_row(ledger: Ledger):
    g = make_guard(ledger)
    res = g.reserve("runpod", "RTX 4090", 2, 600, "t::a", experiment="tp-inference")
    res.record_pod("pod-1", usd_per_hour=1.18, started_at=0.0)
    settled = res.settle(1000.2)  # the pod outlived its reservation: every second is recorded
    assert (settled.billed_s, res.overrun_row.status, res.overrun_row.billed_s) == (600, "overrun", 401)
    t = g.status().totals
    assert t.overruns == (res.run_id,) and t.total == Decimal("1.18") * 1001 / 3600


def test_a_run_that_never_got_a_pod_is_released_without_a_row(ledger: Ledger):
    g = make_guard(ledger)
    with g.reserve("runpod", "A40", 2, 600, "t::a") as res:
        assert g.status().limits["phase"].spent == res.open_row.recomputed_cost
    assert g.status().in_progress == {} and [(r.status, r.billed_s) for r in ledger.read()] == [("open", 600),
                                                                                               ("settled", 0)]
    assert g.status().totals.total == 0 and res.settle(10).billed_s == 0


def test_settle_on_failure_still_releases(ledger: Ledger):
    g = make_guard(ledger)
    res = g.reserve("runpod", "A40", 2, 600, "t::a")
    with pytest.raises(RuntimeError):
        try:
            res.record_pod("pod-1", 0.8, started_at=0)
            raise RuntimeError("the run failed")
        finally:
            res.settle(42)
    assert [r.status for r in ledger.read()] == ["open", "started", "settled"] and g.status().in_progress == {}


DEAD_RESERVER = textwrap.dedent("""
    import sys
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.budget.ledger import Ledger
    g = BudgetGuard(Ledger(sys.argv[1], sys.argv[2]), phase_ceiling_usd=5.0, session_id="deadbeef")
    print(g.reserve("runpod", "RTX 4090", 2, 3600, "t::a").run_id, flush=True)
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_killed_runs_reservation_is_no_longer_in_progress_at_once(ledger: Ledger):
    proc = subprocess.run([sys.executable, "-c", DEAD_RESERVER, str(ledger.path), str(ledger.lock_path)],
                          capture_output=True, text=True, timeout=60)
    run_id = proc.stdout.strip()
    g = make_guard(ledger)
    st = g.status()
    assert st.in_progress == {} and st.abandoned == (run_id,)  # not "in progress" for max_seconds + slack
    assert st.limits["phase"].spent == Decimal("1.18")  # its worst case counts until settled or reconciled
    held = json.loads(g.state_path.read_text())["reservations"]
    assert held == []


def test_a_reused_pid_does_not_keep_a_run_in_progress(ledger: Ledger):
    import os

    from pytest_distcheck.budget.guard import process_alive, process_start

    me = os.getpid()
    assert process_alive(me, process_start(me)) and not process_alive(me, process_start(me) - 3600)


def test_a_malformed_ledger_refuses_to_reserve_and_stays_unchanged(ledger: Ledger):
    ledger.path.write_text("# L\n\n| time_utc | run_id |\n|---|---|\n")
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError, match="line 3"):
        make_guard(ledger).reserve("runpod", "A40", 1, 60, "t::a")
    assert ledger.path.read_bytes() == before


def test_corrupt_reservations_file_is_an_error_naming_it(ledger: Ledger):
    g = make_guard(ledger)
    g.state_path.parent.mkdir(parents=True)
    g.state_path.write_text("{not json")
    with pytest.raises(Exception, match="budget-reservations.json: reservations file is malformed"):
        g.status()


def test_guard_from_the_phase_workspace_reads_the_ceilings(tmp_path: Path):
    (tmp_path / "checks").mkdir()
    src = Path(__file__).resolve().parents[1] / "checks" / "distcheck.toml"
    (tmp_path / "checks" / "distcheck.toml").write_text(src.read_text())
    g = BudgetGuard.from_workspace(load_workspace(tmp_path / "checks" / "distcheck.toml"))
    assert g.phase_ceiling == 5 and g.experiment_ceilings == {"tp-inference": 3}
    assert g.ledger.path == tmp_path / "experiments" / "35-cloud-budget.md"
    assert g.state_path == tmp_path / ".distcheck" / "budget-reservations.json"


RACER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.budget.errors import BudgetRefused
    from pytest_distcheck.budget.ledger import Ledger
    ledger_path, lock, go, who = sys.argv[1:5]
    guard = BudgetGuard(Ledger(ledger_path, lock), phase_ceiling_usd=5.0, session_id="race" + who)
    while not Path(go).exists():
        time.sleep(0.005)
    try:
        # 0.9 $/GPU-h x 1 GPU x 1 h = $0.90: five fit in $5, a sixth does not
        res = guard.reserve("runpod", "RTX 4090", 1, 3600, "racer " + who, usd_per_gpu_hour=0.9)
        print(json.dumps({"ok": True, "usd": str(res.usd)}))
    except BudgetRefused as exc:
        print(json.dumps({"ok": False, "why": str(exc)}))
""")


def test_eight_processes_racing_never_reserve_more_than_the_ceiling(ledger: Ledger, tmp_path: Path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(ledger.path), str(ledger.lock_path), str(go),
                               str(k)], stdout=subprocess.PIPE, text=True) for k in range(8)]
    go.touch()
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    won = [o for o in outs if o["ok"]]
    assert sum(Decimal(o["usd"]) for o in won) <= 5
    assert len(won) == 5, outs
    assert all("$0.50 left of $5.00" in o["why"] for o in outs if not o["ok"])
    opened = [r for r in ledger.read() if r.status == "open"]
    assert len(opened) == 5 and sum(r.recomputed_cost for r in opened) == Decimal("4.5")
