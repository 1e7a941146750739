"""From what a DoD check did to its state, read from pytest's report of each phase.

A check that returned means done; ``done``/``pending``/``broken``/``stale`` (and the kit's ``Blocked``) say
so themselves; a failing ``assert`` is broken; a skip is pending; anything else is an error (the kit's
``ConfigError``, wrong input named with where, is shown as such, not as a crash).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_distcheck.dod.outcome import DodOutcome, Done
from pytest_distcheck.dod.state import CheckOutcome, State
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _

DONE_OUTSIDE_CALL = N_("done() raised in {when}, not by the check's function")
SKIPPED = N_("skipped: {reason}")
XFAIL = N_("marked xfail: {reason}")
ASSERTION_FAILED = N_("assertion failed")
WRONG_INPUT = N_("wrong input: {error}")
CRASHED = N_("check crashed in {when}: {error}")
EVIDENCE_CHECKED = N_("evidence checked")
RETURNED_BUT = N_("the check returned but pytest reports it {outcome}: {report}")
FAILED_IN = N_("check failed in {when}")
REPORT_FAILED = N_("DoD item {state}: {reason}")


def _first_line(text: str, default: str) -> str:
    return (text.strip().splitlines() or [default])[0]


def _skip_reason(rep: pytest.TestReport) -> str:
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return reason.removeprefix("Skipped: ")


def from_exception(item_id: str, nodeid: str, exc: BaseException, when: str) -> CheckOutcome:
    """The outcome a check's exception stands for (``when``: setup, call or teardown)."""
    if isinstance(exc, Done) and when != "call":
        return CheckOutcome(item_id, nodeid, State.ERROR, _(DONE_OUTSIDE_CALL).format(when=when))
    if isinstance(exc, DodOutcome):
        return CheckOutcome(item_id, nodeid, State(exc.state), exc.reason, exc.command)
    if isinstance(exc, pytest.skip.Exception):
        return CheckOutcome(item_id, nodeid, State.PENDING, _(SKIPPED).format(reason=exc.msg))
    if isinstance(exc, pytest.xfail.Exception):
        return CheckOutcome(item_id, nodeid, State.PENDING, _(XFAIL).format(reason=exc.msg))
    if when == "call" and isinstance(exc, AssertionError):
        return CheckOutcome(item_id, nodeid, State.BROKEN, _first_line(str(exc), _(ASSERTION_FAILED)))
    if isinstance(exc, ConfigError):
        # Wrong input (a workspace field, evidence linked from outside the root) is the learner's to fix.
        return CheckOutcome(item_id, nodeid, State.ERROR, _(WRONG_INPUT).format(error=_first_line(str(exc), '')))
    error = f"{type(exc).__name__}: {_first_line(str(exc), '')}".rstrip(": ")
    return CheckOutcome(item_id, nodeid, State.ERROR, _(CRASHED).format(when=when, error=error))


def classify(item_id: str, rep: pytest.TestReport, call: pytest.CallInfo[Any]) -> CheckOutcome | None:
    """The outcome of one phase of a check; ``None`` for a setup or teardown that passed.

    Args:
        item_id: the check's DoD item.
        rep: pytest's report of the phase.
        call: the phase's call info (``excinfo`` is what pytest caught).
    """
    nodeid = rep.nodeid
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is not None:
        return from_exception(item_id, nodeid, exc, rep.when)
    if rep.when == "call":
        if rep.passed:
            return CheckOutcome(item_id, nodeid, State.DONE, _(EVIDENCE_CHECKED))
        # A plugin made a returned check look worse (e.g. pytest-timeout's teardown); believe the worse.
        return CheckOutcome(item_id, nodeid, State.ERROR, _(RETURNED_BUT).format(
            outcome=rep.outcome, report=_first_line(str(rep.longrepr), '')))
    if rep.passed:
        return None
    if rep.skipped:
        return CheckOutcome(item_id, nodeid, State.PENDING, _(SKIPPED).format(reason=_skip_reason(rep)))
    return CheckOutcome(item_id, nodeid, State.ERROR, _(FAILED_IN).format(when=rep.when))


def normalise(rep: pytest.TestReport, item: pytest.Item, outcome: CheckOutcome, exc: BaseException | None) -> None:
    """Make the report's pytest outcome follow the DoD state (done passes; pending, stale, blocked and
    not-run skip; broken, error and untrusted fail), whatever markers or hooks made of it.

    A failure keeps pytest's traceback (a failing ``assert``, a crash) unless the check said
    ``broken(...)`` itself, the input was wrong (``ConfigError``: its message names the file and field) or the
    outcome is untrusted: then the report is the one-line reason.
    """
    want = outcome.state.report_outcome
    if hasattr(rep, "wasxfail"):
        del rep.wasxfail  # an xfail marker must not turn a broken check into "xfailed"
    if want == "skipped":
        path, lineno, _name = item.location
        rep.longrepr = (path, (lineno or 0) + 1, f"{outcome.state.word}: {outcome.reason}")
    elif want == "failed" and (rep.outcome != "failed" or isinstance(exc, (DodOutcome, ConfigError))
                               or outcome.state is State.UNTRUSTED):
        rep.longrepr = _(REPORT_FAILED).format(state=outcome.state.word, reason=outcome.reason)
    if want == "passed":
        rep.longrepr = None  # a check that ended with done(reason) raised to say so
    rep.outcome = want  # type: ignore[assignment]
