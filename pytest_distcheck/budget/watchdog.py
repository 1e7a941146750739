"""The cut: while paid work runs, accrue its cost on a clock and terminate it at the limit.

Accrued cost = usd_per_hour * billed_seconds(now - start) / 3600 (per the provider's granularity,
:func:`pytest_distcheck.calc.cost.billed_seconds`). A background thread checks every ``interval_s``
(0.25 s by default, so the cut comes within 1 s of the limit) and calls ``terminate()`` once when
accrued(now + interval_s) + usd_per_hour * teardown_s / 3600 >= limit: the cost at the next check
would reach the limit, so the run never accrues past it. Cost is metered during the run, not at its end
(the overrun in paperclipai/paperclip#11276 came from a hard stop checked only on completion).

It also fires when the guarded block is left by an exception (KeyboardInterrupt included), on SIGTERM
(then the previous handler runs; if it was the default, KeyboardInterrupt is raised so ``finally``
blocks still settle the ledger) and at interpreter exit. Clock and sleep are injectable, so tests run
the real thread on a fake clock with a fake provider.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from pytest_distcheck.budget.errors import BudgetExceeded, usd
from pytest_distcheck.calc.cost import billed_seconds


class Watchdog:
    """Terminates a paid run when its accrued cost reaches ``limit_usd``. Use as a context manager.

    Args:
        limit_usd: the most the run may cost, USD.
        usd_per_hour: the run's rate (whole resource), USD per hour.
        terminate: called once, with no arguments, to end the run (the provider's terminate).
        describe: what the limit is, for the message (e.g. "its reservation $0.59 (phase ceiling ...)").
        clock: seconds, monotonic; ``sleep(seconds)``: how the thread waits. Both injectable.
        start: the clock reading when billing began (default: when the block is entered).
        interval_s: seconds between checks (<= 1 to cut within 1 s).
        teardown_s: seconds termination takes to stop billing; the cut comes that much earlier.
        granularity_s, minimum_s: the provider's billing rule.
        install_handlers: install the SIGTERM handler and atexit hook (main thread only).

    Attributes:
        fired: an Event, set once terminate() has been called; ``reason``, ``fired_at`` (clock) and
            ``accrued_at_cut`` (USD) say why and when; ``terminate_error`` holds what terminate raised.
    """

    def __init__(self, *, limit_usd: float, usd_per_hour: float, terminate: Callable[[], Any],
                 describe: str = "", clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep, start: float | None = None,
                 interval_s: float = 0.25, teardown_s: float = 0.0, granularity_s: float = 1,
                 minimum_s: float = 0, install_handlers: bool = True) -> None:
        if not 0 < interval_s <= 1:
            raise ValueError(f"interval_s must be in (0, 1] to cut within 1 s, got {interval_s!r}")
        if limit_usd < 0 or usd_per_hour < 0 or teardown_s < 0:
            raise ValueError(f"limit_usd, usd_per_hour and teardown_s must be >= 0, got {limit_usd!r}, "
                             f"{usd_per_hour!r}, {teardown_s!r}")
        self.limit_usd = float(limit_usd)
        self.usd_per_hour = float(usd_per_hour)
        self.terminate = terminate
        self.describe = describe or f"the limit {usd(limit_usd)}"
        self.clock = clock
        self.sleep = sleep
        self.start = start
        self.interval_s = interval_s
        self.teardown_s = teardown_s
        self.granularity_s = granularity_s
        self.minimum_s = minimum_s
        self.install_handlers = install_handlers
        self.fired = threading.Event()
        self.reason: str | None = None
        self.fired_at: float | None = None
        self.accrued_at_cut: float | None = None
        self.terminate_error: BaseException | None = None
        self._cut_by_cost = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev_sigterm: Any = None
        self._sigterm_installed = False

    def accrued(self, now: float | None = None) -> float:
        """USD accrued from ``start`` to ``now`` (default: the clock)."""
        now = self.clock() if now is None else now
        start = self.start if self.start is not None else now
        return self.usd_per_hour * billed_seconds(max(now - start, 0.0), self.granularity_s, self.minimum_s) / 3600

    def check(self) -> bool:
        """One check: fire if the cost at the next check plus teardown reaches the limit. Returns whether
        the watchdog has fired."""
        if self.fired.is_set():
            return True
        now = self.clock()
        # Look one interval ahead: the next check may come too late to stay within the limit.
        if self.accrued(now + self.interval_s) + self.usd_per_hour * self.teardown_s / 3600 >= self.limit_usd:
            self._cut_by_cost = True
            self.fire(f"accrued cost reached {self.describe}", now)
        return self.fired.is_set()

    def fire(self, reason: str, now: float | None = None) -> None:
        """Call ``terminate()`` once (later calls do nothing). Errors from it are kept, not raised."""
        with self._lock:
            if self.fired.is_set():
                return
            self.fired_at = self.clock() if now is None else now
            self.accrued_at_cut = self.accrued(self.fired_at)
            self.reason = reason
            try:
                self.terminate()
            except BaseException as exc:  # noqa: B036 - keep it for the message; never die in a handler
                self.terminate_error = exc
            finally:
                self.fired.set()

    def message(self) -> str:
        """Why the run was cut, naming the limit (for BudgetExceeded and the test failure)."""
        text = (f"paid run cut: {self.reason} after {usd(self.accrued_at_cut or 0)} accrued at "
                f"{usd(self.usd_per_hour)}/hour; terminate() was called")
        if self.terminate_error is not None:
            text += f" and raised {type(self.terminate_error).__name__} (check the provider's console)"
        return text

    def _run(self) -> None:
        while not self._stop.is_set() and not self.check():
            self.sleep(self.interval_s)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.fire("SIGTERM")
        prev = self._prev_sigterm
        if callable(prev):
            prev(signum, frame)
        elif prev != signal.SIG_IGN:
            raise KeyboardInterrupt("SIGTERM")

    def _at_exit(self) -> None:
        self.fire("interpreter exit")

    def __enter__(self) -> Watchdog:
        if self.start is None:
            self.start = self.clock()
        if self.install_handlers:
            atexit.register(self._at_exit)
            if threading.current_thread() is threading.main_thread():
                self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
                self._sigterm_installed = True
        self._thread = threading.Thread(target=self._run, name="distcheck-budget-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sigterm_installed:
            signal.signal(signal.SIGTERM, self._prev_sigterm if self._prev_sigterm is not None else signal.SIG_DFL)
            self._sigterm_installed = False
        if self.install_handlers:
            atexit.unregister(self._at_exit)
        if exc_type is not None and not self.fired.is_set():
            self.fire(f"{exc_type.__name__} left the guarded block")
        if self._cut_by_cost and (exc_type is None or issubclass(exc_type, Exception)):
            raise BudgetExceeded(self.message()) from exc
