"""The watchdog: the real thread on a fake clock cuts within 1 s of the limit; it also fires when the
block is left by an exception, on SIGTERM and at interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pytest_distcheck.budget.errors import BudgetExceeded
from pytest_distcheck.budget.guard import BudgetGuard
from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.budget.watchdog import Watchdog


class FakeClock:
    """Seconds that move only when the watchdog's thread sleeps (or a test moves them)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.t += seconds


class FakeProvider:
    """Records when terminate() was called, on the fake clock."""

    def __init__(self, clock: FakeClock, fail: bool = False) -> None:
        self.clock = clock
        self.calls: list[float] = []
        self.fail = fail

    def terminate(self) -> None:
        self.calls.append(self.clock())
        if self.fail:
            raise ConnectionError("502 Bad Gateway")


@pytest.mark.parametrize("rate, limit", [(36.0, 1.0), (1.18, 0.59), (4.78, 3.0)])
def test_cuts_within_one_second_of_the_limit_on_a_fake_clock(rate: float, limit: float):
    clock = FakeClock()
    pod = FakeProvider(clock)
    ceiling_at = limit / rate * 3600  # seconds at which the accrued cost reaches the limit
    wd = Watchdog(limit_usd=limit, usd_per_hour=rate, terminate=pod.terminate, clock=clock, sleep=clock.sleep,
                  install_handlers=False)
    with pytest.raises(BudgetExceeded) as exc, wd:
        assert wd.fired.wait(timeout=30), "the watchdog never fired"
    assert len(pod.calls) == 1
    assert ceiling_at - 1 <= pod.calls[0] <= ceiling_at + 1
    assert wd.accrued_at_cut <= limit  # cut before the cost passes the limit
    assert f"${limit:.2f}" in str(exc.value) and "paid run cut" in str(exc.value)


def test_teardown_margin_cuts_earlier():
    clock = FakeClock()
    pod = FakeProvider(clock)
    wd = Watchdog(limit_usd=1.0, usd_per_hour=36.0, terminate=pod.terminate, clock=clock, sleep=clock.sleep,
                  teardown_s=30, install_handlers=False)
    with pytest.raises(BudgetExceeded), wd:
        wd.fired.wait(timeout=30)
    assert 69 <= pod.calls[0] <= 71  # 100 s of budget less 30 s for teardown


def test_no_cut_below_the_limit_and_no_terminate_on_a_clean_exit():
    clock = FakeClock()
    pod = FakeProvider(clock)
    wd = Watchdog(limit_usd=1.0, usd_per_hour=36.0, terminate=pod.terminate, clock=clock, sleep=lambda s: None,
                  install_handlers=False)
    with wd:
        clock.t = 98.5
        wd.check()
    assert pod.calls == [] and not wd.fired.is_set()


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, RuntimeError])
def test_an_exception_leaving_the_block_terminates_and_propagates(exc_type):
    clock = FakeClock()
    pod = FakeProvider(clock)
    with pytest.raises(exc_type):
        with Watchdog(limit_usd=1.0, usd_per_hour=1.0, terminate=pod.terminate, clock=clock,
                      sleep=lambda s: None, install_handlers=False) as wd:
            raise exc_type("interrupted")
    assert len(pod.calls) == 1 and exc_type.__name__ in wd.reason


def test_a_failing_terminate_is_reported_not_raised_from_the_thread():
    clock = FakeClock()
    pod = FakeProvider(clock, fail=True)
    wd = Watchdog(limit_usd=0.01, usd_per_hour=36.0, terminate=pod.terminate, clock=clock, sleep=clock.sleep,
                  install_handlers=False)
    with pytest.raises(BudgetExceeded, match="raised ConnectionError"), wd:
        wd.fired.wait(timeout=30)
    wd.fire("again")
    assert len(pod.calls) == 1  # fires once


def test_reservation_watchdog_accrues_from_the_create_call(tmp_path: Path):
    guard = BudgetGuard(Ledger(tmp_path / "l.md", tmp_path / "l.lock"), phase_ceiling_usd=5, session_id="s")
    res = guard.reserve("runpod", "RTX 4090", 2, 600, "t::a")  # $0.1967 at $1.18/h
    clock = FakeClock()
    clock.t = 1000.0
    res.record_pod("pod-1", usd_per_hour=1.18, started_at=990.0)  # created 10 s before now
    pod = FakeProvider(clock)
    with pytest.raises(BudgetExceeded, match="its reservation \\$0.20"):
        with res.watchdog(pod.terminate, clock=clock, sleep=clock.sleep, install_handlers=False) as wd:
            wd.fired.wait(timeout=30)
    assert 1589 <= pod.calls[0] <= 1591  # 600 s after the create call, not after entering the block
    res.settle(pod.calls[0] - 990.0)
    assert guard.ledger.read()[-1].billed_s == 600


SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from pytest_distcheck.budget.watchdog import Watchdog
    out = Path(sys.argv[1]); how = sys.argv[2]
    wd = Watchdog(limit_usd=100.0, usd_per_hour=1.0, terminate=lambda: out.write_text("terminated"))
    if how == "atexit":
        wd.__enter__()          # never left: only the interpreter-exit hook can fire
        sys.exit(0)
    try:
        with wd:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
    except KeyboardInterrupt:
        out.write_text(out.read_text() + " then KeyboardInterrupt")
""")


@pytest.mark.parametrize("how, expected", [("sigterm", "terminated then KeyboardInterrupt"),
                                           ("atexit", "terminated")])
def test_fires_on_sigterm_and_at_interpreter_exit(tmp_path: Path, how: str, expected: str):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out), how], timeout=60, capture_output=True, text=True)
    assert out.read_text() == expected, proc.stderr


@pytest.mark.parametrize("reported", [0.0, None])
def test_a_bill_at_three_times_the_priced_rate_is_cut_at_the_limit_by_the_bill(reported):
    """runpod-python#438: costPerHr reads 0 while the pod bills; the bill, read every 5 s, is believed."""
    clock = FakeClock()
    pod = FakeProvider(clock)
    priced, true_rate, limit = 1.18, 3.54, 0.0098

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.t % 5 < seconds:  # the provider's figures, read every 5 s
            wd.observe(reported, (true_rate * clock.t / 3600, clock.t))

    wd = Watchdog(limit_usd=limit, usd_per_hour=priced, terminate=pod.terminate, clock=clock, sleep=sleep,
                  install_handlers=False)
    with pytest.raises(BudgetExceeded) as exc, wd:
        assert wd.fired.wait(timeout=30)
    billed_at_cut = true_rate * pod.calls[0] / 3600
    assert billed_at_cut <= limit and billed_at_cut >= limit - true_rate * 6 / 3600  # within one read of it
    assert "the provider's bill comes to $3.54/hour, 3.0x the priced $1.18/hour" in str(exc.value)


def test_a_reported_rate_only_ever_raises_what_is_metered():
    wd = Watchdog(limit_usd=1.0, usd_per_hour=1.18, terminate=lambda: None, install_handlers=False)
    wd.observe(0.0)
    wd.observe(None, None)
    assert wd.rate() == 1.18 and wd.disagreement() is None
    wd.observe(2.0)
    wd.observe(1.5)
    assert wd.rate() == 2.0 and "reports $2.00/hour, above the priced $1.18/hour" in wd.disagreement()
