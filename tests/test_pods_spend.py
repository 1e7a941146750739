"""Spend that cannot hide (issue 18), on the fake RunPod API with the real SDK: each scenario with its
figure asserted (pods leaked 0; billed at most the reservation plus one billing step)."""

from __future__ import annotations

import dataclasses
import time
from decimal import Decimal

import pytest

from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.errors import BudgetRefused
from pytest_distcheck.budget.plugin import PAID_REHEARSAL, SPENT_REHEARSAL
from pytest_distcheck.pods import deadman
from pytest_distcheck.pods.base import GpuRequest
from pytest_distcheck.pods.fake.fixtures import fake, guard, pod_dir, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.plugin import RECONCILED_REHEARSAL
from pytest_distcheck.pods.reaper import Reaper

GPU = "NVIDIA GeForce RTX 4090"
REQ = GpuRequest(gpus=2, gpu_type=GPU, seconds=60, image="fake/image:1")
STEP_S = 1  # RunPod bills per second (pytest_distcheck/data/prices.json)


def lease_for(provider, guard, timings, experiment="tp-inference"):  # noqa: F811
    def reserve(max_seconds, rate):
        return guard.reserve("runpod", REQ.gpu_type, REQ.gpus, max_seconds, "tests::spend", experiment=experiment,
                             cloud=REQ.cloud, usd_per_gpu_hour=rate)

    return Lease(provider, REQ, reserve, Reaper(timings.confirm_timeout), timings)


def test_a_3x_rate_with_no_client_left_is_ended_by_the_pod_within_its_reservation(fake, provider):  # noqa: F811
    """The pod's costPerHr is 3x the priced rate and its client is gone (frozen, partitioned): the pod's
    own switch re-arms from its costPerHr and ends itself before the reservation is spent."""
    fake.account.rate_multiplier = 3.0  # 3 x 1.18 = 3.54 $/h
    budget = 0.005  # $0.005 = 15.25 s at the priced 1.18 $/h, but 5.08 s at 3.54 $/h
    provider.create(REQ, "distcheck-5e55101d-00aa01-1900000000", limit_s=15, budget_usd=budget, margin_s=2)
    (pod,) = fake.pods
    assert fake.wait_until(lambda: not pod.alive, 30), "the pod did not end itself"
    billed = pod.billed_usd(fake.clock.now())
    assert billed <= budget + pod.cost_per_hr * STEP_S / 3600, (billed, budget)
    assert pod.terminated_by == "api" and not fake.live_pods()  # pods leaked: 0
    assert "costPerHr 3.54" in (pod.home / "distcheck" / "deadman.log").read_text()


def test_the_switch_carries_durations_never_the_clients_date():
    script = deadman.script(1800, 0.59, 60, 900, 15)
    assert "LIMIT_S=1800" in script and "/proc/uptime" in script and "date +%s" not in script


@pytest.mark.parametrize("jump_s", [7200, -7200])
def test_a_client_clock_two_hours_off_neither_disables_nor_fires_the_pods_switch(fake, provider, guard, timings,  # noqa: F811
                                                                                 monkeypatch, jump_s):
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + jump_s)
    lease = lease_for(provider, guard, timings)
    with lease as pod:
        (created,) = fake.pods
        assert f"LIMIT_S={int(lease.reservation.max_seconds - min(timings.teardown, 15) / 2)}" in \
            deadman_script(created)
        time.sleep(1.0)
        assert created.alive and pod.seconds_left() > 60  # not ended at boot, not timed out by the jump
    assert not fake.live_pods() and lease.termination.confirmed


def deadman_script(pod) -> str:
    import base64
    import re

    b64 = re.search(r"echo (\S+) \| base64 -d", pod.docker_args).group(1)
    return base64.b64decode(b64).decode()


@pytest.mark.parametrize("reported", [0.0, None])
def test_a_reported_rate_of_zero_is_metered_at_the_priced_rate_and_the_watchdog_arms(  # noqa: F811
        fake, provider, guard, timings, reported):  # noqa: F811
    fake.account.reported_cost_per_hr = reported if reported is not None else 0.0
    lease = lease_for(provider, guard, timings)
    with lease:
        started = [r for r in guard.ledger.read() if r.status == "started"]
        assert [r.rate_per_hour for r in started] == [Decimal("1.18")]  # 2 x 0.59, not $0/h
        assert lease._watchdog is not None and lease.reservation.usd_per_hour == Decimal("1.18")
    assert not fake.live_pods()


@pytest.mark.parametrize("bad", ["tp inference", "tp_inference"])
def test_an_invalid_or_misspelt_experiment_creates_nothing_and_writes_nothing(fake, provider, guard, timings, bad):  # noqa: F811
    with pytest.raises(BudgetRefused, match="is not declared"):
        with lease_for(provider, guard, timings, experiment=bad):
            pass
    assert fake.pods == [] and not guard.ledger.path.exists()


def test_the_open_row_is_in_the_ledger_before_the_create_call(fake, provider, guard, timings):  # noqa: F811
    seen = []
    create = provider.create

    def spy(*args, **kwargs):
        seen.append([(r.status, r.resource_id) for r in guard.ledger.read()])
        return create(*args, **kwargs)

    provider.create = spy
    with lease_for(provider, guard, timings):
        pass
    assert seen == [[("open", "-")]]
    assert [r.status for r in guard.ledger.read()] == ["open", "started", "settled"]


def test_orphans_are_swept_at_session_start_without_paid_tests(fake, pod_dir):  # noqa: F811
    fake.account.new_pod({"name": "distcheck-deadbeef-00aa02-1000000000", "gpuTypeId": GPU, "gpuCount": 1,
                          "imageName": "x"}, boot_seconds=0.0)  # its reserved time ended in 2001
    fake.account.new_pod({"name": "somebody-elses-pod", "gpuTypeId": GPU, "gpuCount": 1, "imageName": "x"}, 0.0)
    pod_dir.makepyfile("def test_free():\n    pass\n")
    result = pod_dir.runpytest_subprocess("-p", "no:cacheprovider")  # no --max-usd: no paid test at all
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*distcheck pods: start sweep: * distcheck-deadbeef-00aa02-1000000000: terminated*"])
    assert [p.name for p in fake.live_pods()] == ["somebody-elses-pod"]  # kit's orphans leaked: 0


def _one_paid_session(pod_dir):  # noqa: F811 - the fixture, passed on
    """A session of one paid test on 2 fake pods' GPUs, under --max-usd 3, that passes."""
    pod_dir.makepyfile("""
        import pytest

        @pytest.mark.gpu
        @pytest.mark.pod(gpus=2, minutes=1, experiment="tp-inference")
        def test_paid(gpu_pod):
            assert gpu_pod.run("true", timeout=30).ok
    """)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    return result


def test_a_paid_session_ends_reconciled_with_the_providers_bill(fake, pod_dir):  # noqa: F811
    result = _one_paid_session(pod_dir)
    result.stdout.fnmatch_lines(["*distcheck budget: reconciled * confirmed by the provider*"])
    from pytest_distcheck.budget import accounting
    from pytest_distcheck.budget.ledger import Ledger

    rows = Ledger(pod_dir.path / "ledger.md", pod_dir.path / ".distcheck" / "budget.lock").read()
    assert [r.status for r in rows] == ["open", "started", "settled", "reconciled"]
    assert abs(accounting.totals(rows).total - Decimal(str(round(fake.billed_usd(), 6)))) <= Decimal("0.0001")


def test_a_rehearsals_budget_lines_say_nothing_was_paid(fake, pod_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DISTCHECK_REHEARSAL", "1")  # as `distcheck rehearse` sets it, the fake API on loopback
    result = _one_paid_session(pod_dir)
    budget_lines = [line for line in result.outlines if line.startswith("distcheck budget:")]
    assert len(budget_lines) == 3, budget_lines  # the header, the reconciliation, what the session came to
    assert budget_lines[0].startswith("distcheck budget: " + PAID_REHEARSAL.format(usd="$3.00")), budget_lines
    assert budget_lines[1].startswith(RECONCILED_REHEARSAL.format(finding="")), budget_lines
    assert budget_lines[2].startswith(SPENT_REHEARSAL.split("{spent}")[0]), budget_lines


@pytest.mark.parametrize("gpu", ['RTX 4090") { id } mutation { podTerminate(input: {podId: "x"}) } #',
                                 "NVIDIA\nA40", "RTX 4090\\"])
def test_a_gpu_type_that_could_break_graphql_never_reaches_the_api(fake, tmp_path, monkeypatch, capsys, gpu):  # noqa: F811
    from pytest_distcheck.cli import main
    from pytest_distcheck.pods.fake.fixtures import write_workspace

    write_workspace(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["estimate", "--gpu", gpu, "--count", "2", "--minutes", "10"]) == 2
    assert "is not a GPU type id" in capsys.readouterr().err
    assert fake.api.log == []  # nothing was sent
    with pytest.raises(ValueError, match="is not a GPU type id"):
        GpuRequest(gpus=1, gpu_type=gpu, seconds=60)


def test_a_pods_section_with_a_quote_in_gpu_type_is_a_usage_error(fake, pod_dir):  # noqa: F811
    toml = pod_dir.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace('gpu_type = "NVIDIA GeForce RTX 4090"',
                                             "gpu_type = 'RTX 4090\" x'"))
    pod_dir.makepyfile("import pytest\n\n@pytest.mark.gpu\ndef test_paid(gpu_pod):\n    pass\n")
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    assert "is not a GPU type id" in result.stdout.str() + result.stderr.str()
    assert fake.pods == [] and not [n for n, _ in fake.api.log if n != "myself"]


def test_without_a_live_price_a_paid_run_is_refused(fake, guard, provider, timings):  # noqa: F811
    fake.inject("gpu", "http_502")
    with pytest.raises(BudgetRefused, match="no live runpod price .*live RunPod price lookup failed"):
        with lease_for(provider, guard, timings):
            pass
    assert fake.pods == [] and not guard.ledger.path.exists()


def test_a_provider_wide_outage_leaks_no_pod_and_the_bill_settles_the_ledger(fake, guard, timings):  # noqa: F811
    """Terminate fails for the client AND the pod's own switch (502s for a while): the client retries
    with backoff until its confirm timeout, the pod's switch keeps trying and has the last word."""
    from pytest_distcheck.budget import accounting
    from pytest_distcheck.pods.base import PodError
    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.runpod_api import pod_bills
    from pytest_distcheck.pods.ssh import new_key_pair

    # shorter waits than the fixture's, in the same order: the client gives up (4 s) before the switch
    # sees a stale heartbeat (6 s, the least above ready_timeout); 16 failed terminates outlast the client (about
    # 6 attempts in 4 s of backoff) and several of the switch's rounds (3 tries each)
    timings = dataclasses.replace(timings, ready_timeout=5, heartbeat_stale=6, confirm_timeout=4)
    outage_provider = RunPodProvider(timings, *new_key_pair())
    lease = lease_for(outage_provider, guard, timings)
    with pytest.raises(PodError, match="terminate failed, pod .* may still be billing"):
        with lease as pod:
            pod.run("true", timeout=30)
            fake.inject("terminate", "http_502", times=16)  # the outage starts
    (created,) = fake.pods
    assert lease.termination.attempts > 3  # retried with backoff, not once
    assert fake.wait_until(lambda: not created.alive, 90), "the pod leaked"
    assert not fake.live_pods()  # pods leaked: 0
    assert not fake.api.faults["podTerminate"]  # it ended only after the whole outage
    assert guard.status().totals.unsettled == (lease.reservation.run_id,)  # counted at its worst case meanwhile
    guard.reconcile(pod_bills)
    rows = guard.ledger.read()
    assert abs(accounting.totals(rows).total - Decimal(str(round(fake.billed_usd(), 6)))) <= Decimal("0.0001")


def test_a_live_rate_above_the_reserved_one_is_refused_before_creating(fake, provider, guard, timings,  # noqa: F811
                                                                        monkeypatch):
    from pytest_distcheck.pods.fake.state import CATALOGUE

    with lease_for(provider, guard, timings):  # prices 0.59 $/GPU-hour live, and caches it
        pass
    monkeypatch.setitem(CATALOGUE, GPU, {**CATALOGUE[GPU], "securePrice": 0.90})  # the price rose since
    with pytest.raises(BudgetRefused, match=r"costs \$0.90/GPU-hour now, above the \$0.59 it was reserved at"):
        with lease_for(provider, guard, timings):
            pass
    assert len(fake.pods) == 1  # the second pod was never created
    runs = accounting.charges(guard.ledger.read())
    assert runs[-1].settled and runs[-1].usd == 0  # its reservation closed at 0 s


def test_a_cost_per_hr_of_0_with_a_3x_bill_is_cut_at_the_ceiling_by_the_bill_and_says_so(  # noqa: F811
        fake, provider, guard, timings):  # noqa: F811
    """runpod-python#438: the pod reports costPerHr 0 while RunPod bills 3x the priced rate."""
    from pytest_distcheck.budget.errors import BudgetExceeded
    from pytest_distcheck.pods.base import PodLost
    from pytest_distcheck.pods.progress import ending

    fake.account.rate_multiplier, fake.account.reported_cost_per_hr = 3.0, 0.0  # bills 3.54 $/h, shows 0
    cap = 0.006  # 18.3 s at the priced 1.18 $/h, 6.1 s at the billed 3.54 $/h (a few meter reads before the cut)

    def reserve(max_seconds, rate):
        return guard.reserve("runpod", REQ.gpu_type, REQ.gpus, max_seconds, "tests::spend", experiment="tp-inference",
                             cloud=REQ.cloud, cap_usd=cap, usd_per_gpu_hour=rate)

    lease = Lease(provider, REQ, reserve, Reaper(timings.confirm_timeout), timings)
    with pytest.raises((BudgetExceeded, PodLost)) as exc:
        with lease as pod:
            pod.run("sleep 30", timeout=30)
    (created,) = fake.pods
    assert not created.alive and created.terminated_by == "api"
    assert fake.billed_usd() <= cap + created.cost_per_hr * STEP_S / 3600  # the ceiling, by the bill
    said = "the provider's bill comes to $3.54/hour, 3.0x the priced $1.18/hour"
    assert any(said in note for note in lease.notes) and said in ending(lease)
    assert any("rate unknown" in note for note in lease.notes)
    beat = float((created.home / "distcheck" / "heartbeat").read_text())
    assert beat == pytest.approx(1.18) or beat == pytest.approx(3.54, rel=0.01)  # the metered rate, told to the pod
    if exc.type is BudgetExceeded:
        assert said in str(exc.value)
    rows = guard.ledger.read()
    assert [r.status for r in rows] == ["open", "started", "rate-unknown", "settled"]
    assert rows[2].resource_id == created.id and rows[2].rate_per_hour == 0


def test_an_outage_where_terminate_fails_is_recorded_and_the_next_session_ends_the_pod_first(  # noqa: F811
        fake, guard, timings):  # noqa: F811
    from pytest_distcheck.pods.base import PodError
    from pytest_distcheck.pods.lease import TERMINATE_FAILED
    from pytest_distcheck.pods.runpod import CONSOLE_URL, RunPodProvider
    from pytest_distcheck.pods.session import PodsSession
    from pytest_distcheck.pods.ssh import new_key_pair

    timings = dataclasses.replace(timings, confirm_timeout=2)
    client = RunPodProvider(timings, *new_key_pair())
    lease = lease_for(client, guard, timings)
    with pytest.raises(PodError) as exc:
        with lease as pod:
            pod.run("true", timeout=30)
            fake.inject("terminate", "http_502", times=10**6)  # the outage: every terminate fails, the pod's too
    (created,) = fake.pods
    assert created.alive
    assert str(exc.value).startswith(TERMINATE_FAILED.split("{")[0] + created.id)
    assert CONSOLE_URL in str(exc.value) and "retries it first" in str(exc.value)
    failed = [r for r in guard.ledger.read() if r.status == "terminate-failed"]
    assert [(r.resource_id, r.billed_s) for r in failed] == [(created.id, 0)]
    fake.api.faults["podTerminate"].clear()  # the outage is over; the next session starts
    lines: list[str] = []
    PodsSession("runpod", timings, 0.0, "0123abcd", worker=False, report=lines.append,
                guard=lambda: guard).sweep_at_start()
    assert not created.alive and not fake.live_pods()  # no pod running after the next session started
    assert any(f"pod {created.id} of run {lease.reservation.run_id} (terminate failed earlier" in ln
               and ln.endswith("terminated") for ln in lines), lines
    assert [r.status for r in guard.ledger.read()][-1] == "reconciled"  # the run now counts RunPod's bill


KILLED_AFTER_CREATE = """
import sys, time
from pytest_distcheck.budget.guard import BudgetGuard
from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.pods.base import GpuRequest
from pytest_distcheck.pods.fake.fixtures import FAST_TIMINGS
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.plugin import RECONCILED_REHEARSAL
from pytest_distcheck.pods.names import SessionLock
from pytest_distcheck.pods.reaper import Reaper
from pytest_distcheck.pods.runpod import RunPodProvider
from pytest_distcheck.pods.ssh import new_key_pair
from pytest_distcheck.pods.timings import Timings

guard = BudgetGuard(Ledger(sys.argv[1], sys.argv[2]), phase_ceiling_usd=5.0, session_id="facefeed")
timings = Timings.parse(FAST_TIMINGS)
provider = RunPodProvider(timings, *new_key_pair())
lock = SessionLock("facefeed")

def created_then_killed(pod_id):
    print("created", flush=True)
    time.sleep(60)  # SIGKILLed here: the pod exists, its started row is not written

provider.status = created_then_killed
reserve = lambda seconds, rate: guard.reserve("runpod", "NVIDIA GeForce RTX 4090", 1, seconds, "t::killed",
                                              usd_per_gpu_hour=rate)
with Lease(provider, GpuRequest(1, "NVIDIA GeForce RTX 4090", 60, "fake/image:1"), reserve,
           Reaper(timings.confirm_timeout), timings):
    pass
"""


def test_a_sigkill_between_the_create_and_the_started_row_leaves_a_row_with_the_pod_id(fake, guard, timings):  # noqa: F811
    import signal
    import subprocess
    import sys

    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.session import PodsSession

    proc = subprocess.Popen([sys.executable, "-c", KILLED_AFTER_CREATE, str(guard.ledger.path),
                             str(guard.ledger.lock_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "created"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    (created,) = fake.pods
    assert [(r.status, r.resource_id) for r in guard.ledger.read()] == [("open", "-")]  # the window
    lines: list[str] = []
    session = PodsSession("runpod", timings, 0.0, "0123abcd", worker=False, report=lines.append, guard=lambda: guard)
    session._provider = RunPodProvider(timings)
    session.sweep_at_start()  # the next session's start
    rows = guard.ledger.read()
    assert [(r.status, r.resource_id) for r in rows[:2]] == [("open", "-"), ("started", created.id)]
    assert not created.alive and rows[-1].status == "reconciled"
    assert any("was created but never recorded" in ln for ln in lines), lines


def test_a_reservation_refused_for_the_lock_names_the_holder_and_creates_nothing(fake, provider, guard, timings,  # noqa: F811
                                                                                  monkeypatch):
    import subprocess
    import sys

    from pytest_distcheck.budget import ledger as ledger_mod
    from pytest_distcheck.errors import ConfigError

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pytest_distcheck.budget.ledger import "
                               "Ledger\nwith Ledger(sys.argv[1], sys.argv[2]).locked():\n    print('held', flush=True)"
                               "\n    time.sleep(30)", str(guard.ledger.path), str(guard.ledger.lock_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(ledger_mod, "LOCK_WAIT_S", 0.5)
        with pytest.raises(ConfigError, match=rf"held by pid {holder.pid} \(.*; nothing was reserved, created or "
                                              "billed"):
            with lease_for(provider, guard, timings):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert fake.pods == [] and not guard.ledger.path.exists()


def test_the_pods_switch_believes_the_rate_the_client_meters_when_costperhr_reads_0(fake, provider):  # noqa: F811
    """The client is gone after its last heartbeat, which carried the billed 3.54 $/h; the pod's own
    costPerHr reads 0: the switch ends the pod when the reservation runs out at 3.54 $/h, not 1.18."""
    fake.account.rate_multiplier, fake.account.reported_cost_per_hr = 3.0, 0.0
    budget = 0.005  # 15.25 s at the priced 1.18 $/h, 5.08 s at 3.54 $/h
    provider.create(REQ, "distcheck-5e55101d-00aa03-1900000000", limit_s=15, budget_usd=budget, margin_s=2)
    (pod,) = fake.pods
    assert fake.wait_until(lambda: (pod.home / "distcheck" / "heartbeat").exists(), 10)
    (pod.home / "distcheck" / "heartbeat").write_text("3.540000\n")  # the client's last beat
    assert fake.wait_until(lambda: not pod.alive, 30), "the pod did not end itself"
    assert pod.billed_usd(fake.clock.now()) <= budget + pod.cost_per_hr * STEP_S / 3600
    assert "client meters 3.540000" in (pod.home / "distcheck" / "deadman.log").read_text()


def test_a_disk_that_fills_after_the_create_ends_the_pod_and_says_how_to_settle_it(  # noqa: F811
        fake, provider, guard, timings, monkeypatch):  # noqa: F811
    import shutil
    from collections import namedtuple

    from pytest_distcheck.pods.base import PodError
    from pytest_distcheck.pods.lease import NOT_SETTLED

    usage = namedtuple("usage", "total used free")
    create, room = provider.create, shutil.disk_usage

    def create_then_fill_the_disk(*args, **kwargs):
        pod_id = create(*args, **kwargs)
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10, 10))
        return pod_id

    provider.create = create_then_fill_the_disk
    lease = lease_for(provider, guard, timings)
    with pytest.raises(PodError) as exc:
        with lease:
            pass
    (created,) = fake.pods
    assert not created.alive  # ended all the same
    assert str(exc.value).startswith(NOT_SETTLED.split("{")[0] + created.id)
    assert f"--settle {lease.reservation.run_id} --seconds " in str(exc.value) and "the disk is full" in str(exc.value)
    monkeypatch.setattr(shutil, "disk_usage", room)
    assert [r.status for r in guard.ledger.read()] == ["open"]  # whole, readable: its worst case counts
