"""One pod under the budget guard, from reservation to settled ledger row, whatever happens between.

Order (each step only after the one before; /work/shared/notes/runpod.md section 6): reserve the worst
case (the ``open`` row, read back); create the pod named ``distcheck-<run id>-<deadline>`` (a lost
answer: look it up by name); put it on the reaper's list and start the watchdog; append the ``started``
row before waiting on it; meter it every ``meter_every`` s (the provider's rate and bill, the larger
figure believed); wait until usable, heartbeat (carrying the metered rate); hand it out with its time
limits clamped; on the way out terminate until confirmed and settle with create-to-termination seconds.
A termination not confirmed leaves a ``terminate-failed`` row; the next session retries it first.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import (
    GpuRequest,
    NoCapacity,
    OutputSink,
    Pod,
    PodError,
    PodInfo,
    PodLost,
    Provider,
    ProviderError,
    RunResult,
)
from pytest_distcheck.pods.names import pod_name
from pytest_distcheck.pods.reaper import Reaper, Termination, terminate_and_confirm
from pytest_distcheck.pods.sweep import utc
from pytest_distcheck.pods.timings import Timings

# reserve(max_seconds, usd_per_gpu_hour) -> a budget Reservation (pytest_distcheck.budget)
Reserve = Callable[[float, float | None], Any]
# The status line's steps (through the catalog: pytest_distcheck/i18n.py).
CREATING = N_("creating {name}")
WAITING = N_("waiting for {pod}")
LOOKING_FOR = N_("create answer lost; looking for {name}")
NOT_SETTLED = N_("pod {pod} is terminated ({seconds:.0f} s from the create call), but its settled row was not written: "
                  "{problem}. Its worst case keeps counting; once the ledger can be written: "
                  "`distcheck budget --settle {run} --seconds {seconds:.0f}` (or `distcheck budget --reconcile`)")
TERMINATE_FAILED = N_(
    "terminate failed, pod {pod} ({name}) may still be billing: termination was not confirmed after {attempts} "
    "attempts over {timeout:g} s (last: {last}). See it and end it by hand{console}; its dead-man switch ends it "
    "by {deadline} at the latest. The next session's start (and `distcheck pods --sweep`) retries it first; the "
    "ledger keeps its worst-case cost{recorded}.")
CONSOLE_AT = N_(" at {console}")
RECORDED_AT = N_("; recorded in {ledger}, line {line}")
NOT_RECORDED = N_("; the ledger could not record it ({error})")
CREATE_LOST = N_("{error}; no pod named {name} showed up within {seconds:g} s. If it appears later, this session's "
                 "final sweep terminates it, and its own dead-man switch ends it when no heartbeat comes.")
LIVE_PRICE_ABOVE = N_("{gpus} x {gpu} ({cloud}) costs {live}/GPU-hour now, above the {reserved} it was reserved at "
                      "(run {run}); nothing was created")
RATE_UNKNOWN = N_("{provider} reports no rate for pod {pod} (costPerHr {rate}): rate unknown, metered at the larger of "
                  "the priced ${priced}/h and the provider's bill (ledger: rate-unknown row)")
RATE_MISSING = N_("missing")
METERED_LARGER = N_("pod {pod}: {said}; metered by the larger figure")
# What a test sees once the watchdog (or the reservation's end) has ended its pod.
CUT_BY_WATCHDOG = N_("pod {pod} was terminated by the budget watchdog ({reason})")
BUDGET_WATCHDOG = N_("budget watchdog")
TIME_USED_UP = N_("pod {pod}: its reserved time is used up (run {run})")
INTERRUPTED_CONFIRMED = N_("interrupted while terminating; the pod's termination was confirmed first")
INTERRUPTED = N_("interrupted while terminating")


class Lease:
    """A context manager giving one ready :class:`LeasedPod`. See the module docstring for the order.

    Args:
        provider: where the pod comes from.
        request: GPUs, type, run time.
        reserve: reserves the worst case with the budget guard (see :data:`Reserve`).
        reaper: this process's kill-path-a list.
        timings: waits and limits.
        on_status: receives one-line status texts while waiting (for a progress bar).

    Attributes:
        reservation, pod_id, deadline (Unix s), started (monotonic s of the create call),
        termination (:class:`Termination` once terminated), cut_reason (the watchdog's, if it fired),
        lost_name (a name whose create answer was lost and was not found yet).
    """

    def __init__(self, provider: Provider, request: GpuRequest, reserve: Reserve, reaper: Reaper,
                 timings: Timings, on_status: Callable[[str], object] | None = None) -> None:
        self.provider = provider
        self.request = request
        self._reserve = reserve
        self.reaper = reaper
        self.timings = timings
        self.on_status = on_status
        self.reservation: Any = None
        self.pod_id: str | None = None
        self.name: str | None = None
        self.deadline: float = 0.0
        self.started: float = 0.0
        self.usd_per_hour: float | None = None
        self.termination: Termination | None = None
        self.cut_reason: str | None = None
        self.lost_name: str | None = None
        self.pod: LeasedPod | None = None
        self._watchdog: Any = None
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._meter: threading.Thread | None = None
        self.notes: list[str] = []  # what the provider's figures said, for the run's output

    # -- entering ------------------------------------------------------------------------------
    def __enter__(self) -> LeasedPod:
        rate = self.provider.rate(self.request)  # Unavailable here: nothing reserved, nothing to undo
        self.reservation = self._reserve(self.timings.reserved_seconds(self.request.seconds), rate)
        try:
            self._start()
        except BaseException:
            self._finish(*sys.exc_info())
            raise
        assert self.pod is not None
        return self.pod

    def _status(self, text: str) -> None:
        if self.on_status is not None:
            self.on_status(text)

    def _start(self) -> None:
        t, res = self.timings, self.reservation
        self.deadline = time.time() + float(res.max_seconds)
        self.name = pod_name(res.run_id, self.deadline)
        # The watchdog cuts `margin` before the reservation ends; the pod's own dead-man switch
        # fires half of it before the end: later than the client, earlier than the money runs out.
        margin = min(t.teardown, float(res.max_seconds) / 4)
        self._check_live_rate()
        self._status(_(CREATING).format(name=self.name))
        self.started = time.monotonic()
        try:
            self.pod_id = self.provider.create(self.request, self.name, float(res.max_seconds) - margin / 2,
                                               float(res.usd), margin / 2)
        except NoCapacity:
            raise
        except ProviderError as exc:
            if not exc.ambiguous:
                raise
            found = self._find_lost(self.name)
            if found is None:
                self.lost_name = self.name
                raise ProviderError("create", _(CREATE_LOST).format(error=exc, name=self.name,
                                                                   seconds=t.create_grace)) from None
            self.pod_id = found.id
        self.reaper.add(self.provider, self.pod_id)
        if float(res.usd_per_hour) > 0:  # a free pod (own GPUs at $0) has no cost to cut at
            # Metering starts with the pod, before its row is written (which may wait for the ledger lock).
            self._watchdog = res.watchdog(terminate=self._cut, teardown_s=margin, start=self.started)
            self._watchdog.__enter__()
        try:
            self.usd_per_hour = self.provider.status(self.pod_id).usd_per_hour
        except ProviderError:
            self.usd_per_hour = None  # unknown: the reserved price x GPUs is metered
        res.record_pod(self.pod_id, usd_per_hour=self.usd_per_hour, started_at=self.started)
        if self._watchdog is not None:
            self._watchdog.limit_usd = float(res.limit_usd)  # the started row's worst case, within the reservation
            self._watchdog.observe(self.usd_per_hour)
            if res.rate_unknown:
                rate = self.usd_per_hour if self.usd_per_hour is not None else _(RATE_MISSING)
                self._note(_(RATE_UNKNOWN).format(provider=self.provider.name, pod=self.pod_id, rate=rate,
                                                  priced=res.usd_per_hour))
            self._meter = threading.Thread(target=self._read_meter, name="distcheck-meter", daemon=True)
            self._meter.start()
        self._status(_(WAITING).format(pod=self.pod_id))
        wait = min(t.ready_timeout, float(res.max_seconds) - t.teardown - (time.monotonic() - self.started))
        inner = self.provider.wait_ready(self.pod_id, max(wait, 1.0), self.on_status)
        self.pod = LeasedPod(inner, self)
        if self.provider.remote:
            inner.heartbeat(self.metered_usd_per_hour)
            self._beat = threading.Thread(target=self._heartbeat, args=(inner,), name="distcheck-heartbeat",
                                          daemon=True)
            self._beat.start()

    def _check_live_rate(self) -> None:
        """Ask the provider's price once more, uncached, just before creating: a reservation priced
        earlier (a cached price, a table) must not be below what the pod will bill. Raises BudgetRefused."""
        from decimal import Decimal

        from pytest_distcheck.budget.errors import BudgetRefused, usd

        res = self.reservation
        live = self.provider.live_rate(self.request)
        if live is not None and Decimal(str(live)) * self.request.gpus > res.usd_per_hour + Decimal("0.000001"):
            raise BudgetRefused(_(LIVE_PRICE_ABOVE).format(
                gpus=self.request.gpus, gpu=self.request.gpu_type, cloud=self.request.cloud, live=usd(live),
                reserved=usd(res.usd_per_hour / self.request.gpus), run=res.run_id))

    def _find_lost(self, name: str) -> PodInfo | None:
        """After an ambiguous create: look for the pod by its unique name for ``create_grace`` seconds."""
        end = time.monotonic() + self.timings.create_grace
        while True:
            self._status(_(LOOKING_FOR).format(name=name))
            try:
                found = self.provider.find(name)
            except ProviderError:
                found = None
            if found is not None or time.monotonic() >= end:
                return found
            time.sleep(min(self.timings.poll_every, max(end - time.monotonic(), 0)))

    def _heartbeat(self, pod: Pod) -> None:
        while not self._beat_stop.wait(self.timings.heartbeat_every):
            try:
                pod.heartbeat(self.metered_usd_per_hour)
            except Exception:  # noqa: BLE001 - a missed beat is what the pod's switch is for
                pass

    @property
    def metered_usd_per_hour(self) -> float | None:
        """The rate the pod is metered at now (the larger figure), or None before it is metered."""
        if self._watchdog is not None:
            return self._watchdog.rate()
        return None if self.reservation is None else float(self.reservation.usd_per_hour)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self._status(text)

    def _read_meter(self) -> None:
        """Every ``meter_every`` seconds: the provider's rate and bill for the pod, to the watchdog."""
        wd, pod_id = self._watchdog, self.pod_id
        assert wd is not None and pod_id is not None
        while not self._beat_stop.is_set() and not wd.fired.is_set():
            rate = bill = None
            try:
                rate = self.provider.status(pod_id).usd_per_hour
            except ProviderError:
                pass
            try:
                billed = self.provider.billed(pod_id)
                bill = (float(billed[0]), float(billed[1])) if billed is not None else None
            except ProviderError:
                pass
            wd.observe(rate, bill)
            said = wd.disagreement()
            if said:
                self._note(_(METERED_LARGER).format(pod=pod_id, said=said))
            if self._beat_stop.wait(self.timings.meter_every):
                return

    def _cut(self) -> None:
        """The watchdog's terminate: runs on its thread, in a signal handler or at exit."""
        self.cut_reason = getattr(self._watchdog, "reason", None) or _(BUDGET_WATCHDOG)
        if self.pod_id is not None:
            self.termination = self.reaper.terminate(self.pod_id)
        if self.pod is not None:
            self.pod.inner.close()

    # -- leaving -------------------------------------------------------------------------------
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._finish(exc_type, exc, tb)

    def _finish(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._beat_stop.set()
        if self.pod is not None:
            self.pod.inner.close()
        budget_error: BaseException | None = None
        if self._watchdog is not None:
            try:
                self._watchdog.__exit__(exc_type, exc, tb)
            except Exception as err:  # noqa: BLE001 - BudgetExceeded: raised after the ledger is settled
                budget_error = err
        term = None
        if self.pod_id is not None:
            term = self.termination if self.termination and self.termination.confirmed else None
            term = term or self.reaper.terminate(self.pod_id)  # keeps trying until the pod's one deadline
            self.termination = term
        res = self.reservation
        recorded = ""
        if res is not None:
            if self.pod_id is None:
                if self.lost_name is None:
                    res.release()
                # else: keep it held (it expires by itself); the pod may still appear and bill
            elif term is not None and term.confirmed:
                seconds = self._billed_seconds(term)
                try:
                    res.settle(seconds)
                except DistcheckError as exc:
                    raise PodError(_(NOT_SETTLED).format(pod=self.pod_id, seconds=seconds, run=res.run_id,
                                                         problem=exc)) from None
            else:
                recorded = self._record_terminate_failed()
                res.__exit__(None, None, None)  # the started row keeps counting the worst case
        if term is not None and term.interrupted:
            raise KeyboardInterrupt(_(INTERRUPTED_CONFIRMED if term.confirmed else INTERRUPTED))
        if term is not None and not term.confirmed:
            console = _(CONSOLE_AT).format(console=self.provider.console) if self.provider.console else ""
            raise PodError(_(TERMINATE_FAILED).format(
                pod=self.pod_id, name=self.name, attempts=term.attempts, timeout=self.timings.confirm_timeout,
                last=term.last_error, console=console, deadline=utc(self.deadline), recorded=recorded))
        if budget_error is not None and exc_type is None:
            raise budget_error

    def _record_terminate_failed(self) -> str:
        """Append the ``terminate-failed`` row; returns what the ledger says, for the error."""
        try:
            row = self.reservation.record_terminate_failed()
        except Exception as exc:  # noqa: BLE001 - the pod matters more than the row; say it was not written
            return _(NOT_RECORDED).format(error=exc)
        if row is None:
            return ""
        return _(RECORDED_AT).format(ledger=self.reservation.guard.ledger.path, line=row.line)

    def _billed_seconds(self, term: Termination) -> float:
        """Create call to confirmed termination, on the monotonic clock: a wall-clock jump on this
        machine changes nothing. (The monotonic clock stops while this machine sleeps; the provider's
        bill, appended by ``distcheck budget --reconcile``, is what counts in the end.)"""
        return max(term.ended_at - self.started, 0.0) if term.ended_at is not None else 0.0

    def adopt(self, info: PodInfo) -> Termination:
        """A pod whose create answer was lost turned up later (a sweep found ``lost_name``): record it
        in the ledger, terminate it until confirmed and settle."""
        self.pod_id = info.id
        self.reservation.record_pod(info.id, usd_per_hour=info.usd_per_hour, started_at=self.started)
        term = terminate_and_confirm(self.provider, info.id, self.timings.confirm_timeout)
        if term.confirmed:
            self.reservation.settle(self._billed_seconds(term))
        else:
            self.reservation.__exit__(None, None, None)
        self.lost_name = None
        return term


class LeasedPod(Pod):
    """The pod a test uses: the provider's pod, with time limits clamped to the reservation and errors
    that say when the budget watchdog or a kill path ended it.

    Attributes:
        id, name, provider (its name), run_id, usd_per_hour (None when the provider did not say),
        deadline (Unix s when the reservation runs out).
    """

    def __init__(self, inner: Pod, lease: Lease) -> None:
        self.inner = inner
        self._lease = lease
        self.id = inner.id
        self.name = lease.name or inner.name
        self.provider = lease.provider.name
        self.run_id = lease.reservation.run_id
        self.usd_per_hour = lease.usd_per_hour
        self.deadline = lease.deadline
        #: where output goes when ``run`` gets no ``on_output`` (the plugin points it at the terminal)
        self.echo: OutputSink | None = None

    def seconds_left(self) -> float:
        """Seconds until the reservation runs out (the watchdog cuts a teardown margin before that), on
        the monotonic clock since the create call."""
        return float(self._lease.reservation.max_seconds) - (time.monotonic() - self._lease.started)

    def _lost(self, exc: BaseException) -> BaseException:
        if self._lease.cut_reason:
            return PodLost(f"{_(CUT_BY_WATCHDOG).format(pod=self.id, reason=self._lease.cut_reason)}; {exc}")
        return exc

    def _guard(self, fn: Callable[[], Any]) -> Any:
        if self._lease.cut_reason:
            raise PodLost(_(CUT_BY_WATCHDOG).format(pod=self.id, reason=self._lease.cut_reason))
        try:
            return fn()
        except PodError as exc:
            raise self._lost(exc) from None

    def put(self, local: Path, remote: str) -> None:
        self._guard(lambda: self.inner.put(local, remote))

    def get(self, remote: str, local: Path) -> None:
        self._guard(lambda: self.inner.get(remote, local))

    def run(self, command: str, timeout: float, on_output: OutputSink | None = None) -> RunResult:
        """As :meth:`Pod.run`, with ``timeout`` cut to :meth:`seconds_left`."""
        left = self.seconds_left()
        if left <= 1:
            raise PodLost(_(TIME_USED_UP).format(pod=self.id, run=self.run_id))
        return self._guard(lambda: self.inner.run(command, min(timeout, left), on_output or self.echo))

    def heartbeat(self) -> None:
        self.inner.heartbeat()

    def close(self) -> None:
        self.inner.close()
