"""The pods side of one pytest process: its provider, its reaper, its session lock, its sweeps.

Created on the first ``gpu_pod`` request, or at session start when ``RUNPOD_API_KEY`` is set: then
the ledger's pods that may still be billing are ended first (:mod:`pytest_distcheck.pods.recovery`)
and other sessions' orphans are swept, at every session start, paid tests or not. Finished at session
end: leases whose create answer was lost are matched by name and settled, the session's leftover
pods are swept, and whatever is still on the reaper's list is terminated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import GpuRequest, Provider, ProviderError, Unavailable
from pytest_distcheck.pods.lease import Lease, Reserve
from pytest_distcheck.pods.names import SessionLock
from pytest_distcheck.pods.reaper import Reaper, outcome
from pytest_distcheck.pods.sweep import sweep
from pytest_distcheck.pods.timings import Timings

PROVIDERS = ("runpod", "local")
DEFAULT_GPU_TYPE = "NVIDIA GeForce RTX 4090"
# RunPod's PyTorch image: torch 2.8 + CUDA 12.8, sshd started by /start.sh from PUBLIC_KEY.
DEFAULT_IMAGE = "runpod/pytorch:2.8.0-py3.11-cuda12.8.1-cudnn-devel-ubuntu22.04"
# The session's lines on the terminal.
NOT_RECOVERED = N_("distcheck pods: the ledger's pods were not checked at start ({error})")
RECOVERED = N_("distcheck pods: start: {line}")
# Per sweep scope: its lines, and why it did nothing.
SWEEP_LINE = {"start": N_("distcheck pods: start sweep: {line}"), "finish": N_("distcheck pods: finish sweep: {line}")}
SWEEP_NOT_LISTED = {
    "start": N_("distcheck pods: start sweep could not list pods ({error}); orphans, if any, are left to their "
                "dead-man switch; run `distcheck pods --sweep` later"),
    "finish": N_("distcheck pods: finish sweep could not list pods ({error}); orphans, if any, are left to their "
                 "dead-man switch; run `distcheck pods --sweep` later"),
}
NOT_SWEPT = N_("distcheck pods: no start sweep for orphaned pods although RUNPOD_API_KEY is set: {reason}")
LEFT_AT_END = N_("distcheck pods: pod {pod} left at session end: {outcome}")
FINAL_NOT_LISTED = N_("distcheck pods: final sweep could not list pods ({error})")
LOST_TURNED_UP = N_("distcheck pods: pod {pod} ({name}) whose create answer was lost turned up; terminated and settled "
                    "in the ledger")
LOST_NOT_CONFIRMED = N_("distcheck pods: pod {pod} ({name}) whose create answer was lost turned up; NOT confirmed and "
                        "settled in the ledger")


def make_provider(name: str, timings: Timings, local_rate: float) -> Provider:
    """The provider called ``name``. Raises Unavailable (skip reason) or ValueError (unknown name)."""
    if name == "local":
        from pytest_distcheck.pods.local import LocalProvider

        return LocalProvider(usd_per_gpu_hour=local_rate)
    if name == "runpod":
        from pytest_distcheck.deps import extra_missing
        from pytest_distcheck.pods.runpod_api import api_key

        api_key()  # Unavailable before generating keys or importing the SDK
        missing = extra_missing("gpu")
        if missing:  # the SDK and SSH come with the gpu extra
            raise Unavailable(missing)
        from pytest_distcheck.pods.runpod import RunPodProvider
        from pytest_distcheck.pods.ssh import new_key_pair

        key, public = new_key_pair()
        return RunPodProvider(timings, key, public)
    raise ValueError(f"unknown GPU provider {name!r}; one of {PROVIDERS}")


class PodsSession:
    """Pods state of one process.

    Args:
        provider_name: "runpod" or "local"; ``local_rate``: USD per GPU-hour for local GPUs.
        session_id: the budget session id (shared by xdist workers); ``worker``: this is an xdist worker
            (its final sweep covers only its own runs; the controller sweeps the whole session).
        report: receives lines for the terminal.
        guard: returns the workspace's budget guard, or None when there is no ledger to recover from.
    """

    def __init__(self, provider_name: str, timings: Timings, local_rate: float, session_id: str,
                 worker: bool, report: Callable[[str], object] = lambda line: None,
                 guard: Callable[[], Any] = lambda: None) -> None:
        self.provider_name = provider_name
        self.timings = timings
        self.local_rate = local_rate
        self.session_id = session_id
        self.worker = worker
        self.report = report
        self.guard = guard
        self.reaper = Reaper(timings.confirm_timeout)
        self.leases: list[Lease] = []
        self.started = False
        self._provider: Provider | None = None
        self._unavailable: Unavailable | None = None
        self._lock: SessionLock | None = None
        self._swept_at_start = False

    def provider(self) -> Provider:
        """The provider (made once). Raises Unavailable, remembered for later requests."""
        if self._unavailable is not None:
            raise self._unavailable
        if self._provider is None:
            try:
                self._provider = make_provider(self.provider_name, self.timings, self.local_rate)
            except Unavailable as exc:
                self._unavailable = exc
                raise
        return self._provider

    def sweep_at_start(self) -> None:
        """Sweep other sessions' orphans now, once, for a remote provider whose key is set;
        a session without paid tests does it too. Raises nothing: a failure is reported."""
        try:
            provider = self.provider()
        except Unavailable as exc:
            if self.provider_name == "runpod" and not self._swept_at_start:
                self._swept_at_start = True
                self.report(_(NOT_SWEPT).format(reason=exc))
            return
        if provider.remote and not self._swept_at_start:
            self._swept_at_start = True
            self._recover()
            self._sweep("start", None)

    def _recover(self) -> None:
        """The ledger's pods that may still be billing, ended and recorded before anything else."""
        from pytest_distcheck.errors import DistcheckError
        from pytest_distcheck.pods.recovery import recover

        try:
            guard = self.guard()
            if guard is None or self._provider is None:
                return
            done = recover(guard, self._provider, self.timings.confirm_timeout)
        except DistcheckError as exc:
            self.report(_(NOT_RECOVERED).format(error=exc))
            return
        for line in done.lines:
            self.report(_(RECOVERED).format(line=line))

    def start(self) -> None:
        """Once per process before the first pod: hold the session lock, install the reaper's exit and
        signal hooks, sweep other sessions' orphans."""
        if self.started:
            return
        self.started = True
        provider = self.provider()
        self.reaper.install()
        if provider.remote:
            self._lock = SessionLock(self.session_id)
            if not self._swept_at_start:
                self._swept_at_start = True
                self._recover()
                self._sweep("start", None)

    def lease(self, request: GpuRequest, reserve: Reserve, on_status: Callable[[str], object] | None = None) -> Lease:
        lease = Lease(self.provider(), request, reserve, self.reaper, self.timings, on_status)
        self.leases.append(lease)
        return lease

    def _sweep(self, scope: str, runs: set[str] | None, pods: list[Any] | None = None) -> None:
        assert self._provider is not None
        try:
            rep = sweep(self._provider, scope, session=self.session_id, runs=runs,
                        confirm_timeout=self.timings.confirm_timeout, pods=pods)
        except ProviderError as exc:
            self.report(_(SWEEP_NOT_LISTED[scope]).format(error=exc))
            return
        for line in rep.lines():
            self.report(_(SWEEP_LINE[scope]).format(line=line))

    def sweep_session(self) -> None:
        """The xdist controller's final sweep: every leftover pod of this session (its workers are done).
        Raises Unavailable."""
        if self.provider().remote:
            self._sweep("finish", None)

    def finish(self) -> None:
        """Settle lost creates that turned up, sweep this session's leftovers, terminate what is left."""
        if not self.started:
            return
        try:
            for term in self.reaper.terminate_all():
                self.report(_(LEFT_AT_END).format(pod=term.pod_id, outcome=outcome(term)))
            provider = self._provider
            if provider is not None and provider.remote:
                runs = {lease.reservation.run_id for lease in self.leases if lease.reservation is not None}
                try:
                    pods = provider.list()
                except ProviderError as exc:
                    self.report(_(FINAL_NOT_LISTED).format(error=exc))
                    pods = None
                if pods is not None:
                    for lease in self.leases:
                        for info in pods:
                            if lease.lost_name and info.name == lease.lost_name and not info.ended:
                                term = lease.adopt(info)
                                said = LOST_TURNED_UP if term.confirmed else LOST_NOT_CONFIRMED
                                self.report(_(said).format(pod=info.id, name=info.name))
                self._sweep("finish", runs if self.worker else None)
        finally:
            self.reaper.uninstall()
            if self._lock is not None:
                self._lock.release()
