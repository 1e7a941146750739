"""The lease against the fake RunPod API: the whole path (create, wait, put, run torchrun on CPU, get,
terminate, ledger) and every injected fault ends with no pod billing and a ledger that adds up."""

from __future__ import annotations

import dataclasses
import json
import textwrap
import time
from pathlib import Path

import pytest

from pytest_distcheck.pods.base import GpuRequest, NoCapacity, NotReady, PodLost, ProviderError
from pytest_distcheck.pods.fake.fixtures import API_KEY, fake, guard, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.reaper import Reaper

GPU = "NVIDIA GeForce RTX 4090"
REQ = GpuRequest(gpus=2, gpu_type=GPU, seconds=60, image="fake/image:1")

ALLREDUCE = textwrap.dedent("""
    import json, os
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    if dist.get_rank() == 0:
        os.makedirs("out", exist_ok=True)
        json.dump({"world": dist.get_world_size(), "sum": t.item()}, open("out/result.json", "w"))
    print(f"rank {dist.get_rank()} sum {t.item()}", flush=True)
    dist.destroy_process_group()
""")


def make_lease(provider, guard, timings, request=REQ, cap=None):  # noqa: F811 - fixtures passed in
    def reserve(max_seconds, rate):
        return guard.reserve("runpod", request.gpu_type, request.gpus, max_seconds, "tests::pods",
                             experiment="tp-inference", cloud=request.cloud, cap_usd=cap, usd_per_gpu_hour=rate)

    return Lease(provider, request, reserve, Reaper(timings.confirm_timeout), timings)


def rows(guard):  # noqa: F811
    return guard.ledger.read()


def assert_nothing_billing(fake):  # noqa: F811
    assert fake.wait_until(lambda: not fake.live_pods(), 15), [p.name for p in fake.live_pods()]
    assert not fake.calls("stop"), "a pod was stopped instead of terminated"


def test_end_to_end_torchrun_on_cpu(fake, provider, guard, timings, tmp_path: Path):  # noqa: F811
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    lines: list[str] = []
    lease = make_lease(provider, guard, timings)
    with lease as pod:
        (created,) = fake.pods
        assert created.name == pod.name and pod.name.startswith(f"distcheck-{pod.run_id}-")
        assert created.input["cloudType"] == "SECURE" and created.input["gpuCount"] == 2
        assert created.input["ports"] == "22/tcp" and created.env["PUBLIC_KEY"].startswith("ssh-ed25519 ")
        opened, started = rows(guard)  # open row before create, started row before the test got the pod
        assert (opened.status, opened.resource_id, started.status, started.resource_id) == (
            "open", "-", "started", pod.id)
        assert pod.usd_per_hour == pytest.approx(1.18)  # costPerHr from get_pod: 2 x 0.59
        pod.put(script, "job/allreduce.py")
        result = pod.run("cd job && torchrun --nproc_per_node 2 allreduce.py", timeout=120,
                         on_output=lines.append)
        assert result.ok, result.tail
        pod.get("job/out", tmp_path / "back")
    assert json.loads((tmp_path / "back" / "result.json").read_text()) == {"world": 2, "sum": 3.0}
    assert any("rank 0 sum 3.0" in line for line in lines)
    assert_nothing_billing(fake)
    assert lease.termination.confirmed
    settled = [r for r in rows(guard) if r.status == "settled"]
    assert [r.resource_id for r in settled] == [created.id]
    # the ledger never records less than the fake billed (create call -> confirmed termination)
    assert float(settled[0].cost) >= created.billed_usd(fake.clock.now()) - 0.0001
    assert (Path(created.home) / "distcheck" / "heartbeat").exists()


@pytest.mark.parametrize("kind", ["http_502", "http_500", "timeout", "reply_lost"])
def test_create_fault_leaves_nothing_billing(fake, provider, guard, timings, kind):  # noqa: F811
    fake.api.hang_seconds = 1.0
    fake.inject("create", kind)
    lease = make_lease(provider, guard, timings)
    try:
        with lease as pod:
            pod.run("true", timeout=30)
    except ProviderError:
        assert kind in ("http_502", "http_500")  # the pod was not created, or not found by name
    assert_nothing_billing(fake)
    for pod in fake.pods:  # any pod that was created is in the ledger, settled
        assert {r.status for r in rows(guard) if r.resource_id == pod.id} == {"started", "settled"}


def test_no_capacity_releases_the_reservation(fake, provider, guard, timings):  # noqa: F811
    fake.inject("create", "no_capacity")
    with pytest.raises(NoCapacity, match="no machine free"):
        with make_lease(provider, guard, timings):
            pass
    assert fake.pods == [] and [(r.status, r.billed_s) for r in rows(guard)][1:] == [("settled", 0)]
    assert guard.status().totals.total == 0


def test_never_ready_is_terminated_and_settled(fake, provider, guard, timings):  # noqa: F811
    fake.never_ready = True
    provider.timings = timings = dataclasses.replace(timings, ready_timeout=3)
    with pytest.raises(NotReady, match="not usable after"):
        with make_lease(provider, guard, timings):
            pass
    assert_nothing_billing(fake)
    assert [r.status for r in rows(guard)] == ["open", "started", "settled"]


@pytest.mark.parametrize("first, second", [("http_502", "http_500"), ("timeout", "reply_lost")])
def test_terminate_fails_twice_then_confirmed(fake, provider, guard, timings, first, second):  # noqa: F811
    fake.api.hang_seconds = 3.0  # past api_timeout=2
    lease = make_lease(provider, guard, timings)
    with lease:
        fake.inject("terminate", first)
        fake.inject("terminate", second)
        fake.terminate_lag_polls = 2
    assert lease.termination.confirmed and lease.termination.attempts >= 3
    assert_nothing_billing(fake)


def test_api_errors_while_waiting_and_terminating_are_retried(fake, provider, guard, timings):  # noqa: F811
    fake.gone_as_error = True
    fake.inject("get", "http_500", times=3)  # the first polls while waiting fail
    lease = make_lease(provider, guard, timings)
    with lease:
        fake.inject("get", "http_502", times=2)
    assert lease.termination.confirmed
    assert_nothing_billing(fake)


def test_test_raising_terminates(fake, provider, guard, timings):  # noqa: F811
    with pytest.raises(RuntimeError, match="boom"):
        with make_lease(provider, guard, timings):
            raise RuntimeError("boom")
    assert_nothing_billing(fake)


def test_keyboard_interrupt_terminates(fake, provider, guard, timings):  # noqa: F811
    with pytest.raises(KeyboardInterrupt):
        with make_lease(provider, guard, timings) as pod:
            pod.run("true", timeout=30)
            raise KeyboardInterrupt
    assert_nothing_billing(fake)
    assert [r.status for r in rows(guard)] == ["open", "started", "settled"]


def test_budget_cut_terminates_mid_run(fake, provider, guard, timings):  # noqa: F811
    # a cap of $0.0046 at $1.18/h buys ~14 s: the watchdog cuts the sleeping command 4 s before the
    # end, 2 s before the pod's own switch would
    timings = dataclasses.replace(timings, teardown=4)
    lease = make_lease(provider, guard, timings, cap=0.0046)
    t0 = time.monotonic()
    with pytest.raises(PodLost):
        with lease as pod:
            pod.run("sleep 60", timeout=60)
    assert time.monotonic() - t0 < 30
    assert lease.cut_reason and "accrued cost" in lease.cut_reason
    assert_nothing_billing(fake)
    settled = [r for r in rows(guard) if r.status == "settled"]
    assert settled and float(settled[0].cost) <= 0.0046 + 0.0001


def test_api_key_not_in_errors_or_ledger(fake, provider, guard, timings, tmp_path):  # noqa: F811
    fake.inject("create", "http_500")
    with pytest.raises(ProviderError) as info:
        with make_lease(provider, guard, timings):
            pass
    assert API_KEY not in str(info.value) and API_KEY not in repr(info.value)
    with make_lease(provider, guard, timings):
        pass
    assert API_KEY not in (tmp_path / "ledger.md").read_text()
