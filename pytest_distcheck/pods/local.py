"""The local provider: this machine's own GPUs, behind the same interface as a rented pod.

A "pod" is a scratch folder and the first N GPUs (``CUDA_VISIBLE_DEVICES``). It costs $0 unless a rate
per GPU-hour is configured. GPUs are counted with ``nvidia-smi -L`` (no torch import); with fewer GPUs
than asked, :meth:`LocalProvider.rate` raises :class:`Unavailable`, a skip reason.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import (
    GONE,
    RUNNING,
    GpuRequest,
    OutputSink,
    Pod,
    PodInfo,
    PodLost,
    Provider,
    RunResult,
    RunTimeout,
    Unavailable,
)

TAIL_LINES = 40
LEAVES_WORKDIR = N_("remote path {remote!r} leaves the pod's work folder")
RELEASED = N_("local pod {pod} has been released")
TIMED_OUT = N_("command on local pod {pod} ran past its limit of {seconds:g} s and was killed: {command}")
RELEASED_WHILE_RUNNING = N_("local pod {pod} was released while the command ran")
TOO_FEW_GPUS = N_("needs {gpus} GPU(s); this machine has {count} (nvidia-smi -L); use --gpu-provider runpod to rent "
                   "them")
POD_GONE = N_("local pod {pod} is gone")


def list_gpus() -> list[str]:
    """Names of this machine's NVIDIA GPUs per ``nvidia-smi -L`` (empty when it is missing or fails)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    # "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
    return [line.split(":", 1)[1].split("(UUID")[0].strip() for line in out.splitlines() if line.startswith("GPU ")]


class LocalPod(Pod):
    """A scratch folder on this machine; commands run there in their own process group."""

    def __init__(self, pod_id: str, workdir: Path, gpus: int) -> None:
        self.id = pod_id
        self.name = pod_id
        self.workdir = workdir
        self.gpus = gpus
        self._procs: set[subprocess.Popen] = set()
        self.ended = False

    def _path(self, remote: str) -> Path:
        path = (self.workdir / remote).resolve()
        if not path.is_relative_to(self.workdir.resolve()):
            raise ValueError(_(LEAVES_WORKDIR).format(remote=remote))
        return path

    def put(self, local: Path, remote: str) -> None:
        if self.ended:
            raise PodLost(_(RELEASED).format(pod=self.id))
        dst = self._path(remote)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if Path(local).is_dir():
            shutil.copytree(local, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(local, dst)

    def get(self, remote: str, local: Path) -> None:
        if self.ended:
            raise PodLost(_(RELEASED).format(pod=self.id))
        src = self._path(remote)
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, local, dirs_exist_ok=True)
        else:
            shutil.copy2(src, local)

    def run(self, command: str, timeout: float, on_output: OutputSink | None = None) -> RunResult:
        if self.ended:
            raise PodLost(_(RELEASED).format(pod=self.id))
        # The kit's own interpreter first on PATH, so `python` and `torchrun` are this environment's.
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        env = {**os.environ, "PATH": path, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(self.gpus))}
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.workdir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                start_new_session=True)
        self._procs.add(proc)
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            _killpg(proc)

        timer = threading.Timer(timeout, on_timeout)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail.append(line.rstrip("\n"))
                if on_output is not None:
                    on_output(line)
            code = proc.wait()
        finally:
            timer.cancel()
            _killpg(proc)  # leftovers (and the command itself on KeyboardInterrupt)
            self._procs.discard(proc)
        seconds = time.monotonic() - t0
        if timed_out.is_set():
            raise RunTimeout(_(TIMED_OUT).format(pod=self.id, seconds=timeout, command=command[:200]))
        if self.ended:
            raise PodLost(_(RELEASED_WHILE_RUNNING).format(pod=self.id))
        return RunResult(code if code >= 0 else 128 - code, seconds, list(tail))

    def release(self) -> None:
        self.ended = True
        for proc in list(self._procs):
            _killpg(proc)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalProvider(Provider):
    """This machine's GPUs.

    Args:
        usd_per_gpu_hour: what a GPU-hour here costs (default 0: your own hardware).
        gpus: the GPUs' names (default: :func:`list_gpus`).
    """

    name = "local"
    remote = False

    def __init__(self, usd_per_gpu_hour: float = 0.0, gpus: list[str] | None = None) -> None:
        self.usd_per_gpu_hour = usd_per_gpu_hour
        found = list_gpus() if gpus is None else gpus
        self.gpu_count = len(found)
        #: the GPU model, for the ledger ("local <name>")
        self.gpu_name = f"local {found[0]}" if found else "local GPU"
        self._pods: dict[str, LocalPod] = {}
        self._ids = itertools.count(1)

    def rate(self, request: GpuRequest) -> float:
        if self.gpu_count < request.gpus:
            raise Unavailable(_(TOO_FEW_GPUS).format(gpus=request.gpus, count=self.gpu_count))
        return self.usd_per_gpu_hour

    def create(self, request: GpuRequest, name: str, limit_s: float, budget_usd: float, margin_s: float) -> str:
        pod_id = f"local-{os.getpid()}-{next(self._ids)}"
        workdir = Path(tempfile.mkdtemp(prefix=f"distcheck-{pod_id}-"))
        self._pods[pod_id] = LocalPod(pod_id, workdir, request.gpus)
        return pod_id

    def find(self, name: str) -> PodInfo | None:
        return None  # create cannot lose its reply here

    def status(self, pod_id: str) -> PodInfo:
        pod = self._pods.get(pod_id)
        if pod is None or pod.ended:
            return PodInfo(pod_id, pod_id, GONE, self.usd_per_gpu_hour * (pod.gpus if pod else 0))
        return PodInfo(pod_id, pod_id, RUNNING, self.usd_per_gpu_hour * pod.gpus)

    def wait_ready(self, pod_id: str, timeout: float, on_status: Callable[[str], object] | None = None) -> Pod:
        pod = self._pods.get(pod_id)
        if pod is None or pod.ended:
            raise PodLost(_(POD_GONE).format(pod=pod_id))
        return pod

    def terminate(self, pod_id: str) -> None:
        pod = self._pods.get(pod_id)
        if pod is not None:
            pod.release()

    def list(self) -> list[PodInfo]:
        return [self.status(pod_id) for pod_id, pod in self._pods.items() if not pod.ended]
