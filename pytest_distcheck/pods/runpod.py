"""The RunPod provider: pods from the runpod SDK 1.12.0, used over SSH.

Create: ``runpod.create_pod`` with an explicit cloud, port ``22/tcp``, the run's public key as
``PUBLIC_KEY`` and the dead-man switch as the start command (:mod:`pytest_distcheck.pods.deadman`); the
rate is ``costPerHr`` from ``runpod.get_pod``. Ready: ``desiredStatus == "RUNNING"``, a public TCP mapping
of port 22, and SSH answers; a pod that reports an error or ``EXITED`` before it has a runtime cannot
start on its host (runpod/containers issue 98) and the wait ends at once. Gone: ``get_pod`` returns null
or not found, or ``TERMINATED``. Pods are only ever terminated, never stopped (a stopped pod still bills
its volume). Sources and details: docs/design/pods.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods import deadman, runpod_api
from pytest_distcheck.pods.base import (
    EXITED,
    GONE,
    GpuRequest,
    NotReady,
    Pod,
    PodInfo,
    PodLost,
    Provider,
    ProviderError,
    RunResult,
)
from pytest_distcheck.pods.ssh import SSHSession
from pytest_distcheck.pods.timings import Timings

CLOUD_TYPES = {"secure": "SECURE", "community": "COMMUNITY"}
CONSOLE_URL = "https://www.console.runpod.io/pods"  # RunPod docs, pods/manage-pods.mdx ("Pods page")
CONTAINER_DISK_GB = 20
# Words in lastStatusChange that mean the container will not start (e.g. "nvidia-container-cli: requirement
# error: unsatisfied condition: cuda>=12.8", runpod/containers issue 98); "Rented by User: ..." is normal.
HOST_FAILURE = re.compile(r"error|unsatisfied|failed|cannot|exited", re.IGNORECASE)
NO_POD_ID = N_("RunPod's answer has no pod id: {answer}")
NOT_USABLE = N_("pod {pod} not usable after {seconds:g} s (last seen: {last}). This is RunPod's host, not your code: "
                "pods can get stuck provisioning (skypilot#7321). The pod is terminated and its ledger row settled; "
                "run again to get another host")
ENDED_WHILE_WAITING = N_("pod {pod} is {status} while waiting for it to start")
CANNOT_START = N_("pod {pod} cannot start on its host: {said} (status {status}). This is the host (e.g. a driver older "
                  "than the image's CUDA, runpod/containers#98), not your code. The pod is terminated and its ledger "
                  "row settled; run again to get another host ([pods] allowed_cuda_versions keeps such hosts out)")
RUNPOD_SAYS = N_("RunPod says {detail!r}")
RUNPOD_EXITED = N_("RunPod reports it EXITED")
# The wait's steps, on the pod's status line and in NOT_USABLE's last seen.
CREATED = N_("created")
STATUS_UNKNOWN = N_("status unknown ({error})")
NO_STATUS = N_("no status")
PORT_NOT_MAPPED = N_("{status}, port 22 not mapped yet")
SSH_NOT_ANSWERING = N_("RUNNING, SSH {host}:{port} not answering yet")
SSH_NOT_ANSWERING_BECAUSE = N_("RUNNING, SSH {host}:{port} not answering yet ({error})")
SSH_READY = N_("ready: SSH {host}:{port}")


def pod_info(raw: dict[str, Any]) -> PodInfo:
    """A PodInfo from the SDK's pod dict (fields of ``runpod/api/queries/pods.py``)."""
    ssh = None
    for port in ((raw.get("runtime") or {}).get("ports") or []):
        if port.get("privatePort") == 22 and port.get("isIpPublic") and port.get("type") == "tcp" \
                and port.get("ip") and port.get("publicPort"):
            ssh = (str(port["ip"]), int(port["publicPort"]))
    cost = raw.get("costPerHr")
    return PodInfo(id=str(raw["id"]), name=str(raw.get("name") or ""), status=str(raw.get("desiredStatus") or ""),
                   usd_per_hour=float(cost) if cost is not None else None, ssh=ssh,
                   detail=str(raw.get("lastStatusChange") or ""))


class RunPodPod(Pod):
    """A RunPod pod reached over SSH."""

    def __init__(self, pod_id: str, name: str, session: SSHSession, timings: Timings) -> None:
        self.id = pod_id
        self.name = name
        self._ssh = session
        self._timings = timings

    def put(self, local, remote: str) -> None:
        self._ssh.put(local, remote)

    def run(self, command: str, timeout: float, on_output=None) -> RunResult:
        return self._ssh.run(command, timeout, self._timings.run_grace, on_output)

    def get(self, remote: str, local) -> None:
        self._ssh.get(remote, local)

    def heartbeat(self, usd_per_hour: float | None = None) -> None:
        rate = f"{usd_per_hour:.6f}" if usd_per_hour is not None and usd_per_hour > 0 else ""
        self._ssh.touch(deadman.HEARTBEAT.split("/", 1)[1], self._timings.api_timeout, rate)

    def close(self) -> None:
        self._ssh.close()


class RunPodProvider(Provider):
    """Pods on RunPod. Needs ``RUNPOD_API_KEY`` (else :class:`Unavailable`, a skip reason).

    Args:
        timings: waits and limits (:class:`Timings`).
        ssh_key: this run's private key (asyncssh key); ``public_key``: its OpenSSH line. Both may be
            None for listing and terminating only (``distcheck pods``).
    """

    name = "runpod"
    remote = True
    console = CONSOLE_URL

    def __init__(self, timings: Timings, ssh_key: Any = None, public_key: str | None = None) -> None:
        self.timings = timings
        self._ssh_key = ssh_key
        self._public_key = runpod_api.check_value("PUBLIC_KEY", public_key) if public_key else None
        self._sdk = runpod_api.sdk()

    def _call(self, operation: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return runpod_api.call(operation, fn, *args, timeout=self.timings.api_timeout, **kwargs)

    def rate(self, request: GpuRequest) -> float | None:
        return None  # the budget guard prices RunPod itself (live through the SDK, else its table)

    def live_rate(self, request: GpuRequest) -> float | None:
        from pytest_distcheck.budget.pricing import runpod_live_price

        value = self._call("price", runpod_live_price, request.gpu_type, request.cloud, request.gpus)
        return None if value is None else float(value)

    def create(self, request: GpuRequest, name: str, limit_s: float, budget_usd: float, margin_s: float) -> str:
        t = self.timings
        if self._ssh_key is None or self._public_key is None:
            raise ValueError("RunPodProvider was made without an SSH key pair; it cannot create pods")
        start = deadman.start_command(limit_s, budget_usd, margin_s, t.heartbeat_stale, t.deadman_every)
        for field, value in (("name", name), ("image", request.image), ("gpu_type", request.gpu_type),
                             ("dockerArgs", start)):
            runpod_api.check_value(field, value)
        try:
            pod = self._call("create", self._sdk.create_pod, name=name, image_name=request.image,
                             gpu_type_id=request.gpu_type, cloud_type=CLOUD_TYPES[request.cloud],
                             gpu_count=request.gpus, support_public_ip=True, start_ssh=True, ports="22/tcp",
                             env={"PUBLIC_KEY": self._public_key}, docker_args=start, volume_in_gb=0,
                             container_disk_in_gb=CONTAINER_DISK_GB,
                             allowed_cuda_versions=list(request.cuda_versions) or None)
        except ValueError as exc:  # the SDK's own check: unknown GPU type id
            raise ProviderError("create", f"{exc} (gpu_type {request.gpu_type!r})") from None
        if not isinstance(pod, dict) or not pod.get("id"):
            raise ProviderError("create", _(NO_POD_ID).format(answer=str(pod)[:200]), ambiguous=True)
        return str(pod["id"])

    def find(self, name: str) -> PodInfo | None:
        for info in self.list():
            if info.name == name and not info.ended:
                return info
        return None

    def status(self, pod_id: str) -> PodInfo:
        try:
            raw = self._call("get", self._sdk.get_pod, pod_id)
        except ProviderError as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                return PodInfo(pod_id, "", GONE)
            raise
        if raw is None:
            return PodInfo(pod_id, "", GONE)
        return pod_info(raw)

    def list(self) -> list[PodInfo]:
        return [pod_info(raw) for raw in self._call("list", self._sdk.get_pods) or []]

    def terminate(self, pod_id: str) -> None:
        self._call("terminate", self._sdk.terminate_pod, pod_id)

    def billed(self, pod_id: str):
        """RunPod's bill for the pod so far (REST billing, :func:`runpod_api.pod_bills`), or None."""
        return runpod_api.pod_bills([pod_id], timeout=self.timings.api_timeout).get(pod_id)

    def wait_ready(self, pod_id: str, timeout: float, on_status: Callable[[str], object] | None = None) -> Pod:
        t = self.timings
        end = time.monotonic() + timeout
        last = _(CREATED)
        errors = 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise NotReady(_(NOT_USABLE).format(pod=pod_id, seconds=timeout, last=last))
            try:
                info = self.status(pod_id)
            except ProviderError as exc:
                errors += 1
                last = _(STATUS_UNKNOWN).format(error=exc)
                info = None
            if info is not None:
                if info.ended:
                    raise PodLost(_(ENDED_WHILE_WAITING).format(pod=pod_id, status=info.status))
                if info.ssh is None and (HOST_FAILURE.search(info.detail) or info.status == EXITED):
                    said = (_(RUNPOD_SAYS).format(detail=info.detail[:300]) if info.detail else _(RUNPOD_EXITED))
                    raise NotReady(_(CANNOT_START).format(pod=pod_id, said=said, status=info.status))
                if info.status != "RUNNING" or info.ssh is None:
                    last = _(PORT_NOT_MAPPED).format(status=info.status or _(NO_STATUS))
                else:
                    host, port = info.ssh
                    last = _(SSH_NOT_ANSWERING).format(host=host, port=port)
                    try:
                        session = SSHSession.connect(host, port, self._ssh_key, timeout=min(left, 20.0))
                    except Exception as exc:  # noqa: BLE001 - sshd may still be starting; keep polling
                        last = _(SSH_NOT_ANSWERING_BECAUSE).format(host=host, port=port, error=type(exc).__name__)
                    else:
                        if on_status:
                            on_status(_(SSH_READY).format(host=host, port=port))
                        return RunPodPod(pod_id, info.name, session, t)
            if on_status:
                on_status(last)
            time.sleep(min(t.poll_every, max(end - time.monotonic(), 0)))
