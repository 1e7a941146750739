"""The fake account: GPU catalogue, pods, and billing on a clock.

SYNTHETIC: prices and ids below are test data shaped like RunPod's (runpod SDK 1.12.0 field names,
see /work/shared/notes/runpod.md section 1); they are not quotes from RunPod.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Per-GPU USD/hr; synthetic, same order of magnitude as the notes' table.
CATALOGUE: dict[str, dict[str, Any]] = {
    "NVIDIA GeForce RTX 4090": {
        "displayName": "RTX 4090", "memoryInGb": 24, "securePrice": 0.59, "communityPrice": 0.34,
        "maxGpuCount": 8, "manufacturer": "Nvidia", "cudaCores": 16384,
    },
    "NVIDIA A40": {
        "displayName": "A40", "memoryInGb": 48, "securePrice": 0.40, "communityPrice": 0.35,
        "maxGpuCount": 8, "manufacturer": "Nvidia", "cudaCores": 10752,
    },
}


class Clock:
    """Seconds since the fake started: real time times ``speed``, plus whatever ``advance`` added."""

    def __init__(self, speed: float = 1.0) -> None:
        self.speed = speed
        self._t0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (time.monotonic() - self._t0) * self.speed + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds


@dataclass
class FakePod:
    """One pod of the fake account. Times are fake-clock seconds."""

    id: str
    name: str
    image: str
    gpu_type_id: str
    gpu_count: int
    cloud_type: str
    cost_per_hr: float
    env: dict[str, str]
    docker_args: str
    ports: str
    input: dict[str, Any]
    created_at: float
    ready_at: float
    pod_key: str
    home: Path
    desired_status: str = "RUNNING"
    booted: bool = False
    terminated_at: float | None = None
    stopped_at: float | None = None
    terminated_by: str = ""
    ssh_port: int | None = None
    hide_polls_left: int = 0  # get_pod still shows RUNNING this many times after terminate
    status_change: str = "Rented by User: synthetic"  # lastStatusChange
    billing_extra_s: float = 0.0  # the provider's billing clock is off by this much (bills more, or less)
    process: Any = None
    sessions: list[Any] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        """Billing compute: created and not terminated (a stopped pod still bills its disk)."""
        return self.terminated_at is None

    def billed_seconds(self, now: float) -> float:
        """Seconds the provider bills: create to terminate on the fake clock, plus its clock error."""
        end = self.terminated_at if self.terminated_at is not None else now
        return max(end - self.created_at + self.billing_extra_s, 0.0)

    def billed_usd(self, now: float) -> float:
        """costPerHr x billed seconds / 3600; stop does not end it here."""
        return self.cost_per_hr * self.billed_seconds(now) / 3600.0


class Account:
    """Pods and keys of one fake account. Thread-safe: the HTTP server and the ticker share it."""

    def __init__(self, api_key: str, root: Path, clock: Clock) -> None:
        self.api_key = api_key
        self.root = root
        self.clock = clock
        self.pods: dict[str, FakePod] = {}
        self.lock = threading.RLock()
        # Billing knobs: pods cost rate_multiplier x the catalogue price; reported_cost_per_hr (e.g. 0,
        # runpod-python issue 438) is what the API shows instead of the rate it bills.
        self.rate_multiplier = 1.0
        self.reported_cost_per_hr: float | None = None
        self._ids = itertools.count(1)

    def new_pod(self, inp: dict[str, Any], boot_seconds: float) -> FakePod:
        gpu = CATALOGUE[inp["gpuTypeId"]]
        cloud = inp.get("cloudType", "ALL")
        per_gpu = gpu["communityPrice"] if cloud == "COMMUNITY" else gpu["securePrice"]
        count = int(inp.get("gpuCount", 1))
        env = {e["key"]: e["value"] for e in inp.get("env") or []}
        pod_id = f"fake{next(self._ids):04d}{secrets.token_hex(3)}"
        home = self.root / "pods" / pod_id
        home.mkdir(parents=True)
        now = self.clock.now()
        pod = FakePod(
            id=pod_id, name=inp["name"], image=inp.get("imageName", ""), gpu_type_id=inp["gpuTypeId"],
            gpu_count=count, cloud_type=cloud, cost_per_hr=round(per_gpu * count * self.rate_multiplier, 4), env=env,
            docker_args=inp.get("dockerArgs") or "", ports=inp.get("ports") or "", input=dict(inp),
            created_at=now, ready_at=now + boot_seconds, pod_key="podkey-" + secrets.token_hex(8),
            home=home,
        )
        with self.lock:
            self.pods[pod_id] = pod
        return pod

    def live(self) -> list[FakePod]:
        with self.lock:
            return [p for p in self.pods.values() if p.alive]

    def pod_json(self, pod: FakePod) -> dict[str, Any]:
        """The pod as the API shows it (fields of the SDK's ``get_pod`` query)."""
        now = self.clock.now()
        running = pod.booted and pod.alive and pod.desired_status == "RUNNING"
        runtime = None
        if running:
            runtime = {
                "uptimeInSeconds": int(now - pod.ready_at),
                "ports": [{"ip": "127.0.0.1", "isIpPublic": True, "privatePort": 22,
                           "publicPort": pod.ssh_port, "type": "tcp"}],
            }
        return {
            "id": pod.id, "name": pod.name, "imageName": pod.image,
            "costPerHr": pod.cost_per_hr if self.reported_cost_per_hr is None else self.reported_cost_per_hr,
            "desiredStatus": pod.desired_status, "containerDiskInGb": pod.input.get("containerDiskInGb", 10),
            "dockerArgs": pod.docker_args, "dockerId": None, "env": [f"{k}={v}" for k, v in pod.env.items()],
            "gpuCount": pod.gpu_count, "lastStatusChange": pod.status_change, "machineId": "m-" + pod.id,
            "memoryInGb": 62, "podType": "RESERVED", "port": None, "ports": pod.ports,
            "uptimeSeconds": int(now - pod.ready_at) if running else 0, "vcpuCount": 16,
            "volumeInGb": pod.input.get("volumeInGb", 0), "volumeMountPath": "/workspace",
            "runtime": runtime, "machine": {"gpuDisplayName": CATALOGUE[pod.gpu_type_id]["displayName"],
                                            "podHostId": pod.id + "-host"},
        }
