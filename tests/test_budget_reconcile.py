"""`distcheck budget --reconcile` and BudgetGuard.reconcile against the fake RunPod's billing (REST
/v1/billing/pods, synthetic): the ledger's total equals the provider's bill afterwards, and every
difference is named."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pytest_distcheck.budget import accounting
from pytest_distcheck.pods.base import GpuRequest
from pytest_distcheck.pods.fake.fixtures import fake, guard, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.reaper import Reaper
from pytest_distcheck.pods.runpod_api import pod_bills

REQ = GpuRequest(gpus=2, gpu_type="NVIDIA GeForce RTX 4090", seconds=60, image="fake/image:1")


def run_one(provider, guard, timings):  # noqa: F811
    def reserve(max_seconds, rate):
        return guard.reserve("runpod", REQ.gpu_type, REQ.gpus, max_seconds, "tests::rec", experiment="tp-inference",
                             cloud=REQ.cloud, usd_per_gpu_hour=rate)

    lease = Lease(provider, REQ, reserve, Reaper(timings.confirm_timeout), timings)
    with lease as pod:
        pod.run("true", timeout=30)
    return lease


def provider_total(fake) -> Decimal:  # noqa: F811
    now = fake.clock.now()
    return sum((Decimal(str(round(p.billed_usd(now), 6))) for p in fake.pods), Decimal(0))


def test_a_normal_run_is_confirmed_by_the_provider_and_totals_agree(fake, provider, guard, timings):  # noqa: F811
    run_one(provider, guard, timings)
    findings = guard.reconcile(pod_bills)
    assert [f.state for f in findings] == ["confirmed"], [f.line() for f in findings]
    rows = guard.ledger.read()
    assert rows[-1].status == "reconciled" and "confirmed by the provider" in findings[0].line()
    assert abs(accounting.totals(rows).total - provider_total(fake)) <= Decimal("0.0001")
    assert accounting.confirmation(rows) == "confirmed by the provider"
    assert accounting.provider_confirmed(rows, rows[0].run_id) is True
    assert guard.reconcile(pod_bills)[0].row == rows[-1] and len(guard.ledger.read()) == len(rows)  # nothing new


def test_a_wrong_provider_clock_is_flagged_and_the_ledger_then_counts_the_bill(fake, provider, guard, timings):  # noqa: F811
    run_one(provider, guard, timings)
    (pod,) = fake.pods
    kit = accounting.totals(guard.ledger.read()).total
    pod.billing_extra_s = 3600.0  # the provider's billing clock jumped an hour: $1.18 more
    (finding,) = guard.reconcile(pod_bills)
    assert finding.state == "difference" and "DIFFERENCE: the provider billed $1.18" in finding.line()
    rows = guard.ledger.read()
    t = accounting.totals(rows)
    assert abs(t.total - provider_total(fake)) <= Decimal("0.0001") and t.total > kit + Decimal("1.17")
    assert t.differences and accounting.confirmation(rows) == "self-reported"


def test_a_crashed_run_is_settled_by_the_providers_bill(fake, provider, guard, timings):  # noqa: F811
    res = guard.reserve("runpod", REQ.gpu_type, 2, 600, "tests::crash", experiment="tp-inference")
    pod_id = provider.create(REQ, "distcheck-5e55101d-00cc01-1900000000", 590, float(res.usd), 5)
    res.record_pod(pod_id, usd_per_hour=1.18)
    provider.terminate(pod_id)  # ended by a kill path; the process that reserved it "died": no settle
    assert fake.wait_until(lambda: not fake.live_pods(), 10)
    worst = accounting.totals(guard.ledger.read()).total
    (finding,) = guard.reconcile(pod_bills)
    t = accounting.totals(guard.ledger.read())
    assert t.unsettled == () and t.total < worst and abs(t.total - provider_total(fake)) <= Decimal("0.0001")
    assert finding.state == "difference"  # the kit only had the worst case: a difference, shown


def test_the_cli_reconciles_and_exits_1_on_a_difference(fake, provider, timings, tmp_path, monkeypatch, capsys):  # noqa: F811
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.cli import main
    from pytest_distcheck.pods.fake.fixtures import write_workspace
    from pytest_distcheck.workspace import load_workspace

    write_workspace(tmp_path)
    monkeypatch.chdir(tmp_path)
    g = BudgetGuard.from_workspace(load_workspace(tmp_path / "checks" / "distcheck.toml"), session_id="5e55101d")
    run_one(provider, g, timings)
    assert main(["budget", "--reconcile"]) == 0
    out = capsys.readouterr().out
    assert "confirmed by the provider" in out and "Ledger: confirmed by the provider" in out
    fake.pods[0].billing_extra_s = 600.0
    assert main(["budget", "--reconcile"]) == 1
    assert "DIFFERENCE: the provider billed" in capsys.readouterr().out


def test_a_billing_outage_writes_nothing(fake, provider, guard, timings):  # noqa: F811
    from pytest_distcheck.pods.base import ProviderError

    run_one(provider, guard, timings)
    before = guard.ledger.path.read_bytes()
    fake.inject("billing", "http_502")
    with pytest.raises(ProviderError, match="billing"):
        guard.reconcile(pod_bills)
    assert guard.ledger.path.read_bytes() == before
