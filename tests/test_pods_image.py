"""An image that starts: allowedCudaVersions from [pods] reaches RunPod's create, and a host that cannot
start the image (lastStatusChange reports an error, runpod/containers issue 98) ends the wait at once,
saying it is the host and not the user's code, with the pod terminated and the ledger settled."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_distcheck.pods.base import GpuRequest, NotReady
from pytest_distcheck.pods.fake.fixtures import fake, guard, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.reaper import Reaper

GPU = "NVIDIA GeForce RTX 4090"
REQ = GpuRequest(gpus=2, gpu_type=GPU, seconds=60, image="fake/image:1", cuda_versions=("12.8", "12.9"))
ISSUE_98 = ("Error response from daemon: failed to create task for container: nvidia-container-cli: requirement "
            "error: unsatisfied condition: cuda>=12.8, please update your driver")  # SYNTHETIC, from the report


def _lease(provider, guard, timings):  # noqa: F811
    def reserve(max_seconds, rate):
        return guard.reserve("runpod", REQ.gpu_type, REQ.gpus, max_seconds, "tests::image", experiment="tp-inference",
                             cloud=REQ.cloud, usd_per_gpu_hour=rate)

    return Lease(provider, REQ, reserve, Reaper(timings.confirm_timeout), timings)


def test_allowed_cuda_versions_reach_the_create_call(fake, provider, guard, timings):  # noqa: F811
    with _lease(provider, guard, timings):
        (pod,) = fake.pods
        assert pod.input["allowedCudaVersions"] == ["12.8", "12.9"]


def test_a_host_that_cannot_start_the_image_is_named_at_once(fake, provider, guard, timings):  # noqa: F811
    fake.host_error = ISSUE_98
    provider.timings = timings = dataclasses.replace(timings, ready_timeout=11)  # the old code waited all of it
    with pytest.raises(NotReady, match=r"cannot start on its host: RunPod says .*unsatisfied condition: cuda>=12\.8.*"
                                       r"This is the host .*not your code"):
        with _lease(provider, guard, timings):
            pass
    assert fake.wait_until(lambda: not fake.live_pods(), 15)
    assert [r.status for r in guard.ledger.read()] == ["open", "started", "settled"]


def test_cuda_versions_must_look_like_versions():
    for bad in ("12", "12.8\"", "12.8.1", "x.y", "١٢.٨"):
        with pytest.raises(ValueError, match="is not a CUDA version such as"):
            dataclasses.replace(REQ, cuda_versions=(bad,))


def test_a_container_that_exits_before_it_ever_ran_is_named_at_once(fake, provider, timings, monkeypatch):  # noqa: F811
    from pytest_distcheck.pods.base import PodInfo

    monkeypatch.setattr(provider, "status", lambda pod_id: PodInfo(pod_id, "distcheck-x", "EXITED", 1.18, None, ""))
    with pytest.raises(NotReady, match=r"pod p1 cannot start on its host: RunPod reports it EXITED \(status EXITED\)\. "
                                       r"This is the host"):
        provider.wait_ready("p1", 10)
