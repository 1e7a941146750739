"""The cut: while paid work runs, accrue its cost on a clock and terminate it at the limit.

Accrued = the larger of rate * billed_seconds(now - start) / 3600 and the provider's bill so far plus
rate * (seconds since it was read) / 3600, where rate is the largest of the priced rate, the rate the
provider reports and the rate its bill implies (:meth:`Watchdog.observe`): a figure of 0 or none is
never a reason to meter less. A thread checks every ``interval_s`` and calls ``terminate()`` once when
accrued(now + interval_s) + rate * teardown_s / 3600 >= limit (cost metered during the run, not at its
end: paperclipai/paperclip#11276). It also fires when the guarded block is left by an exception, on
SIGTERM (then the previous handler runs, or KeyboardInterrupt) and at interpreter exit.
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
from pytest_distcheck.i18n import N_, _

BAD_INTERVAL = N_("interval_s must be in (0, 1] to cut within 1 s, got {value!r}")
NEGATIVE = N_("limit_usd, usd_per_hour and teardown_s must be >= 0, got {limit!r}, {rate!r}, {teardown!r}")
THE_LIMIT = N_("the limit {usd}")
# Why it fired (the cut's reason), and the cut's message with its pieces.
COST_REACHED = N_("accrued cost reached {limit}")
AT_EXIT = N_("interpreter exit")
LEFT_BLOCK = N_("{error} left the guarded block")
CUT = N_("paid run cut: {reason} after {accrued} accrued at {rate}/hour; terminate() was called")
METERED_BY = N_(" (metered by the larger figure: {said})")
TERMINATE_RAISED = N_(" and raised {error} (check the provider's console)")
# disagreement(): the provider's figures above the priced rate.
BILL_ABOVE = N_("the provider's bill comes to {bill}/hour, {ratio:.1f}x the priced {priced}/hour")
BILL_IS = N_("the provider's bill comes to {bill}/hour")
REPORTED_ABOVE = N_("the provider reports {reported}/hour, above the priced {priced}/hour")


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
        reported_usd_per_hour, billed: the provider's last figures (:meth:`observe`), or None.
    """

    def __init__(self, *, limit_usd: float, usd_per_hour: float, terminate: Callable[[], Any],
                 describe: str = "", clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep, start: float | None = None,
                 interval_s: float = 0.25, teardown_s: float = 0.0, granularity_s: float = 1,
                 minimum_s: float = 0, install_handlers: bool = True) -> None:
        if not 0 < interval_s <= 1:
            raise ValueError(_(BAD_INTERVAL).format(value=interval_s))
        if limit_usd < 0 or usd_per_hour < 0 or teardown_s < 0:
            raise ValueError(_(NEGATIVE).format(limit=limit_usd, rate=usd_per_hour, teardown=teardown_s))
        self.limit_usd = float(limit_usd)
        self.usd_per_hour = float(usd_per_hour)
        self.terminate = terminate
        self.describe = describe or _(THE_LIMIT).format(usd=usd(limit_usd))
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
        self.reported_usd_per_hour: float | None = None
        self.billed: tuple[float, float, float] | None = None  # (USD, billed seconds, clock when read)
        self._cut_by_cost = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev_sigterm: Any = None
        self._sigterm_installed = False

    def observe(self, usd_per_hour: float | None = None, billed: tuple[float, float] | None = None) -> None:
        """What the provider says while the run goes: its rate for the whole resource (USD/h; 0 or None:
        unknown) and its bill so far (USD, billed seconds). Only ever raises the metered figure."""
        # One observer thread writes these; a reader sees the old or the new tuple, never half of one.
        if usd_per_hour is not None and usd_per_hour > 0:
            self.reported_usd_per_hour = max(float(usd_per_hour), self.reported_usd_per_hour or 0.0)
        if billed is not None and billed[0] >= 0:
            self.billed = (float(billed[0]), float(billed[1]), self.clock())

    @property
    def billed_usd_per_hour(self) -> float | None:
        """The rate the provider's bill implies (USD x 3600 / billed seconds), once it has billed a second."""
        bill = self.billed
        return bill[0] * 3600 / bill[1] if bill is not None and bill[1] >= 1 else None

    def rate(self) -> float:
        """USD per hour metered now: the largest of the priced, reported and billed rates."""
        return max(self.usd_per_hour, self.reported_usd_per_hour or 0.0, self.billed_usd_per_hour or 0.0)

    def accrued(self, now: float | None = None) -> float:
        """USD accrued from ``start`` to ``now`` (default: the clock), by the larger figure."""
        now = self.clock() if now is None else now
        start = self.start if self.start is not None else now
        rate = self.rate()
        by_rate = rate * billed_seconds(max(now - start, 0.0), self.granularity_s, self.minimum_s) / 3600
        bill = self.billed
        by_bill = bill[0] + rate * max(now - bill[2], 0.0) / 3600 if bill is not None else 0.0
        return max(by_rate, by_bill)

    def disagreement(self) -> str | None:
        """In words, when the provider's figures are above the priced rate (or its bill is), else None."""
        bill, priced = self.billed_usd_per_hour, self.usd_per_hour
        if bill is not None and bill > priced * 1.01 + 1e-9:
            return (_(BILL_ABOVE).format(bill=usd(bill), ratio=bill / priced, priced=usd(priced)) if priced > 0
                    else _(BILL_IS).format(bill=usd(bill)))
        rep = self.reported_usd_per_hour
        if rep is not None and rep > priced * 1.01 + 1e-9:
            return _(REPORTED_ABOVE).format(reported=usd(rep), priced=usd(priced))
        return None

    def check(self) -> bool:
        """One check: fire if the cost at the next check plus teardown reaches the limit. Returns whether
        the watchdog has fired."""
        if self.fired.is_set():
            return True
        now = self.clock()
        # Look one interval ahead: the next check may come too late to stay within the limit.
        if self.accrued(now + self.interval_s) + self.rate() * self.teardown_s / 3600 >= self.limit_usd:
            self._cut_by_cost = True
            self.fire(_(COST_REACHED).format(limit=self.describe), now)
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
        text = _(CUT).format(reason=self.reason, accrued=usd(self.accrued_at_cut or 0), rate=usd(self.rate()))
        said = self.disagreement()
        if said:
            text += _(METERED_BY).format(said=said)
        if self.terminate_error is not None:
            text += _(TERMINATE_RAISED).format(error=type(self.terminate_error).__name__)
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
        self.fire(_(AT_EXIT))

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
            self.fire(_(LEFT_BLOCK).format(error=exc_type.__name__))
        if self._cut_by_cost and (exc_type is None or issubclass(exc_type, Exception)):
            raise BudgetExceeded(self.message()) from exc
