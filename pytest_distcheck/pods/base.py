"""The provider interface: what a GPU provider must do for the kit, and the errors it raises.

A run goes: price the request (:meth:`Provider.price`), create a pod (:meth:`Provider.create`, which
returns as soon as the provider has given an id), wait until it is usable (:meth:`Provider.wait_ready`),
then :meth:`Pod.put` files, :meth:`Pod.run` a command and :meth:`Pod.get` results, and finally
:meth:`Provider.terminate` until :meth:`Provider.status` confirms the pod is gone. The ordering, the
budget and the kill paths live in :mod:`pytest_distcheck.pods.lease`; providers only do the calls.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.gpu_types import CLOUDS, check_gpu_type
from pytest_distcheck.i18n import N_, _

# Statuses a pod can report (RunPod's desiredStatus values, plus GONE for "the API no longer knows it").
RUNNING, EXITED, TERMINATED, GONE = "RUNNING", "EXITED", "TERMINATED", "GONE"


class PodError(DistcheckError):
    """Something about a pod went wrong; the message says which pod and what the kit did about it."""


class ProviderError(PodError):
    """The provider's API failed: an error answer, a non-JSON body (e.g. a 502 HTML page), a timeout.

    Attributes:
        operation: the call that failed (``create``, ``get``, ``list``, ``terminate``, ``price``).
        ambiguous: the call may have taken effect although no answer came back (timeouts, lost
            connections, 5xx): after a failed ``create`` the pod may exist.
    """

    def __init__(self, operation: str, problem: str, ambiguous: bool = False) -> None:
        super().__init__(f"{operation}: {problem}")
        self.operation = operation
        self.ambiguous = ambiguous


class NoCapacity(ProviderError):
    """The provider has no machine with the requested GPUs right now (nothing was created)."""


class NotReady(PodError):
    """The pod did not become usable (running, SSH reachable) in the time allowed."""


class Unavailable(PodError):
    """The provider cannot serve this request on this machine (no API key, too few local GPUs):
    a reason to skip, not a failure."""


class RunTimeout(PodError):
    """A command on the pod ran past its time limit and was stopped."""


class PodLost(PodError):
    """The pod went away during use (terminated by a kill path, the budget watchdog or the provider)."""


# Container images reach the provider's API text too (the runpod SDK pastes them into GraphQL unescaped):
# "runpod/pytorch:2.8.0-py3.11".
IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
# A request's refusals (shown as the [pods] section's or the pod marker's problem).
NOT_A_CUDA_VERSION = N_("allowed_cuda_versions: {value!r} is not a CUDA version such as \"12.8\"")
BAD_GPUS = N_("gpus must be a whole number >= 1, got {value!r}")
BAD_SECONDS = N_("seconds must be > 0, got {value!r}")
BAD_CLOUD = N_("cloud must be 'secure' or 'community', got {value!r}")
NOT_AN_IMAGE = N_("image {value!r} is not a container image name (letters, digits and ._/:@+- only)")


@dataclass(frozen=True)
class GpuRequest:
    """What a test asks for.

    Attributes:
        gpus: number of GPUs in one pod (world size of a single-node run).
        gpu_type: the provider's GPU type id (RunPod ``gpuTypeId``, e.g. "NVIDIA GeForce RTX 4090").
        seconds: how long the pod may be used once ready (the run's time limit), seconds.
        image: container image (RunPod) or ignored (local).
        cloud: "secure" or "community" (RunPod price tier; always explicit so the price is known).
        cuda_versions: CUDA versions ("12.8") one of which the host's driver must support (RunPod
            ``allowedCudaVersions``); empty: any host. An image built for CUDA 12.8 does not start on an
            older driver (runpod/containers issue 98).
    """

    gpus: int
    gpu_type: str
    seconds: float
    image: str = ""
    cloud: str = "secure"
    cuda_versions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for v in self.cuda_versions:  # pasted into GraphQL by the SDK: digits and one dot only
            parts = v.split(".") if isinstance(v, str) else []
            if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 2 for p in parts):
                raise ValueError(_(NOT_A_CUDA_VERSION).format(value=v))
        if not isinstance(self.gpus, int) or isinstance(self.gpus, bool) or self.gpus < 1:
            raise ValueError(_(BAD_GPUS).format(value=self.gpus))
        if not self.seconds > 0:
            raise ValueError(_(BAD_SECONDS).format(value=self.seconds))
        if self.cloud not in CLOUDS:
            raise ValueError(_(BAD_CLOUD).format(value=self.cloud))
        check_gpu_type(self.gpu_type)
        if self.image and not IMAGE.match(self.image):
            raise ValueError(_(NOT_AN_IMAGE).format(value=self.image))


@dataclass(frozen=True)
class PodInfo:
    """A pod as the provider reports it.

    Attributes:
        id, name: the provider's id and the name the kit gave it.
        status: RUNNING, EXITED, TERMINATED or GONE.
        usd_per_hour: the whole pod's rate (RunPod ``costPerHr``), or None when not reported.
        ssh: (host, port) of a public SSH endpoint once the pod has one, else None.
        detail: the provider's last word on the pod's state (RunPod ``lastStatusChange``), or "".
    """

    id: str
    name: str
    status: str
    usd_per_hour: float | None = None
    ssh: tuple[str, int] | None = None
    detail: str = ""

    @property
    def ended(self) -> bool:
        return self.status in (TERMINATED, GONE)


@dataclass(frozen=True)
class RunResult:
    """The outcome of :meth:`Pod.run`: exit status, wall seconds, and the last lines of output."""

    exit_status: int
    seconds: float
    tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


OutputSink = Callable[[str], object]  # receives each line of a command's output (with its newline)


class Pod(ABC):
    """A ready pod (or the local machine) to copy files to, run commands on and copy results from.

    Remote paths are relative to the pod's work folder (``~/distcheck`` on RunPod).
    """

    id: str
    name: str

    @abstractmethod
    def put(self, local: Path, remote: str) -> None:
        """Copy a file or a folder (recursively) from this machine to ``remote`` on the pod."""

    @abstractmethod
    def run(self, command: str, timeout: float, on_output: OutputSink | None = None) -> RunResult:
        """Run a shell command in the work folder, streaming its output lines to ``on_output``.

        Raises:
            RunTimeout: it ran longer than ``timeout`` seconds (it is stopped).
            PodLost: the pod went away meanwhile.
        """

    @abstractmethod
    def get(self, remote: str, local: Path) -> None:
        """Copy ``remote`` (a file or folder) from the pod to ``local`` on this machine."""

    def heartbeat(self, usd_per_hour: float | None = None) -> None:  # noqa: B027 - optional (dead-man pods only)
        """Tell the pod its client is alive (for its dead-man switch), and the rate the client meters it at (USD/h for
        the whole pod), which the pod's switch believes when it is above its own. Cheap; every few seconds."""

    def close(self) -> None:  # noqa: B027 - optional
        """Drop connections to the pod (does not terminate it)."""


class Provider(ABC):
    """A source of GPU pods. Calls are single attempts; retries and ordering are the lease's job."""

    name: str
    #: whether pods cost money and live outside this process (so the kill paths and sweep apply)
    remote: bool = True
    #: where a person sees and ends the account's pods by hand ("" when there is no such page)
    console: str = ""

    @abstractmethod
    def rate(self, request: GpuRequest) -> float | None:
        """USD per GPU-hour to reserve for ``request``, or None to let the price table decide.

        Raises:
            Unavailable: this provider cannot serve the request here (skip).
            ProviderError: the price lookup failed.
        """

    def live_rate(self, request: GpuRequest) -> float | None:
        """USD per GPU-hour the provider asks for ``request`` right now (exact GPU type, count, cloud),
        read just before creating, or None when it has no live price. Raises ProviderError."""
        return None

    @abstractmethod
    def create(self, request: GpuRequest, name: str, limit_s: float, budget_usd: float, margin_s: float) -> str:
        """Ask for a pod named ``name``; return its id as soon as the provider gives one.

        A remote pod must end itself (its dead-man switch) even if this machine is gone:
        ``limit_s`` seconds after it starts, or sooner when ``budget_usd`` (the reservation) less
        ``margin_s`` seconds runs out at the pod's own rate. Durations only: no date crosses machines.

        Raises:
            NoCapacity: nothing was created.
            ProviderError: the call failed; if ``ambiguous`` the pod may exist (find it by name).
        """

    @abstractmethod
    def find(self, name: str) -> PodInfo | None:
        """The live pod with this exact name, or None. Raises ProviderError."""

    @abstractmethod
    def status(self, pod_id: str) -> PodInfo:
        """The pod's current state (status GONE when the provider no longer knows it). Raises ProviderError."""

    @abstractmethod
    def wait_ready(self, pod_id: str, timeout: float, on_status: Callable[[str], object] | None = None) -> Pod:
        """Block until the pod is usable (running and reachable), at most ``timeout`` seconds.

        Raises:
            NotReady: not usable in time (the pod is NOT terminated here).
            ProviderError: the API kept failing.
        """

    def billed(self, pod_id: str) -> tuple[Decimal, float] | None:
        """What the provider has billed for the pod so far: (USD, billed seconds) from its billing
        endpoint, or None when it has none or no record yet. Raises ProviderError."""
        return None

    @abstractmethod
    def terminate(self, pod_id: str) -> None:
        """Ask once to terminate (never stop) the pod. Raises ProviderError."""

    @abstractmethod
    def list(self) -> list[PodInfo]:
        """Every live pod of the account (all names). Raises ProviderError."""
