"""The client's kill path: it terminates its pods, and keeps at it until the provider confirms.

:func:`terminate_and_confirm` asks to terminate (never stop) and then reads the pod's status, again and
again with backoff, through any error (a 502 HTML page, INTERNAL_SERVER_ERROR, a timeout), until the
provider says the pod is gone or terminated, or ``confirm_timeout`` passes. A KeyboardInterrupt that
arrives meanwhile is held back until the loop ends, so a second Ctrl-C does not leave a pod billing.

:class:`Reaper` is this process's list of pods it has created and not yet seen end. The pods plugin
terminates whatever is on it at session finish, on SIGTERM/SIGHUP (turned into KeyboardInterrupt so
every ``finally`` runs) and at interpreter exit.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import Provider
from pytest_distcheck.pods.runpod_api import redact

# How a termination went, in the sweeps' and the recovery's lines.
TERMINATED = N_("terminated")
NOT_CONFIRMED = N_("terminate NOT confirmed ({error})")
STATUS_STILL = N_("status still {status}")


@dataclass(frozen=True)
class Termination:
    """How a terminate went.

    Attributes:
        pod_id: the pod.
        confirmed: the provider said it is gone or terminated.
        ended_at: ``time.monotonic()`` when that was first seen (None if not confirmed).
        attempts: terminate requests sent.
        last_error: the last error text (API key redacted), or None.
        interrupted: a KeyboardInterrupt arrived during the loop (the caller should re-raise it).
    """

    pod_id: str
    confirmed: bool
    ended_at: float | None
    attempts: int
    last_error: str | None = None
    interrupted: bool = False


def terminate_and_confirm(provider: Provider, pod_id: str, timeout: float,
                          sleep: Callable[[float], Any] = time.sleep,
                          clock: Callable[[], float] = time.monotonic) -> Termination:
    """Terminate ``pod_id`` and wait until ``provider.status`` shows it ended. Never raises for API errors.

    Args:
        timeout: seconds to keep trying.
        sleep, clock: injectable for tests.
    """
    end = clock() + timeout
    delay = 0.25
    attempts = 0
    last: str | None = None
    interrupted = False
    while True:
        try:
            try:
                attempts += 1
                provider.terminate(pod_id)
            except Exception as exc:  # noqa: BLE001 - e.g. "not found" once it is gone; the status decides
                last = redact(f"terminate: {exc}")
            info = provider.status(pod_id)
            if info.ended:
                return Termination(pod_id, True, clock(), attempts, last, interrupted)
            last = last or _(STATUS_STILL).format(status=info.status)
        except KeyboardInterrupt:
            interrupted = True
        except Exception as exc:  # noqa: BLE001 - retry on any error, JSONDecodeError included
            last = redact(f"{type(exc).__name__}: {exc}")
        if clock() >= end:
            return Termination(pod_id, False, None, attempts, last, interrupted)
        try:
            sleep(min(delay, max(end - clock(), 0)))
        except KeyboardInterrupt:
            interrupted = True
        delay = min(delay * 2, 5.0)


def outcome(term: Termination) -> str:
    """``terminated``, or that the termination was not confirmed and its last error, in the language in use."""
    return _(TERMINATED) if term.confirmed else _(NOT_CONFIRMED).format(error=term.last_error)


class Reaper:
    """The pods this process created and has not yet seen end; terminates them on the way out.

    Args:
        confirm_timeout: seconds :func:`terminate_and_confirm` keeps trying per pod.
    """

    def __init__(self, confirm_timeout: float) -> None:
        self.confirm_timeout = confirm_timeout
        self._live: dict[str, Provider] = {}
        self._deadline: dict[str, float] = {}  # each pod's one deadline, set by its first terminate
        self._lock = threading.Lock()
        self._prev: dict[int, Any] = {}
        self.results: list[Termination] = []

    def add(self, provider: Provider, pod_id: str) -> None:
        with self._lock:
            self._live[pod_id] = provider

    def live(self) -> list[str]:
        with self._lock:
            return list(self._live)

    def terminate(self, pod_id: str) -> Termination:
        """Terminate one of our pods until confirmed; it leaves the list once confirmed. Every call for a
        pod keeps trying under the same deadline (``confirm_timeout`` after its first), one attempt at least."""
        with self._lock:
            provider = self._live.get(pod_id)
            deadline = self._deadline.setdefault(pod_id, time.monotonic() + self.confirm_timeout)
        if provider is None:
            return Termination(pod_id, True, time.monotonic(), 0)
        result = terminate_and_confirm(provider, pod_id, max(deadline - time.monotonic(), 0.0))
        if result.confirmed:
            with self._lock:
                self._live.pop(pod_id, None)
        self.results.append(result)
        return result

    def terminate_all(self) -> list[Termination]:
        """Terminate every pod still on the list (session finish, atexit, signals)."""
        return [self.terminate(pod_id) for pod_id in self.live()]

    # -- process-wide hooks --------------------------------------------------------------------
    def install(self) -> None:
        """Terminate leftovers at interpreter exit; turn SIGTERM and SIGHUP into KeyboardInterrupt
        (main thread only), so ``finally`` blocks and pytest's teardown run instead of the process
        just dying."""
        atexit.register(self.terminate_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                prev = signal.getsignal(sig)
                if prev in (signal.SIG_DFL, None):
                    self._prev[sig] = prev
                    signal.signal(sig, _raise_interrupt)

    def uninstall(self) -> None:
        atexit.unregister(self.terminate_all)
        if threading.current_thread() is threading.main_thread():
            for sig, prev in self._prev.items():
                if signal.getsignal(sig) is _raise_interrupt:
                    signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._prev.clear()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
