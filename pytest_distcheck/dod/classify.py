"""From what a DoD check did to its state: the kit's observation first, pytest's report second.

A check that returned means done; ``pending``/``broken``/``stale`` (and the kit's ``Blocked``) say
so themselves; a failing ``assert`` is broken; a skip is pending; anything else is an error (the kit's
``ConfigError``, wrong input named with where, is shown as such, not as a crash). Where the report says
passed but the kit saw the function raise, or never saw it run, the outcome is untrusted: something
between the check and its report changed it. An outcome exception counts only when the check's own module
or the kit raised it (:func:`~pytest_distcheck.dod.integrity.foreign_raise`); raised by other code (the lab
the check imports) it makes the outcome untrusted, naming the file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_distcheck.dod.integrity import Observer
from pytest_distcheck.dod.outcome import DodOutcome, Done
from pytest_distcheck.dod.state import CheckOutcome, State
from pytest_distcheck.errors import ConfigError


def _first_line(text: str, default: str) -> str:
    return (text.strip().splitlines() or [default])[0]


def _skip_reason(rep: pytest.TestReport) -> str:
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return reason.removeprefix("Skipped: ")


Raiser = Callable[[BaseException], "str | None"]


def from_exception(item_id: str, nodeid: str, exc: BaseException, when: str,
                   raiser: Raiser | None = None) -> CheckOutcome:
    """The outcome a check's exception stands for (``when``: setup, call or teardown); ``raiser(exc)`` is
    ``file:line`` when a DoD outcome was raised by code that is neither the check's nor the kit's."""
    where = raiser(exc) if raiser is not None and isinstance(exc, DodOutcome) else None
    if where is not None:
        return CheckOutcome(item_id, nodeid, State.UNTRUSTED,
                            f"{type(exc).__name__}({_first_line(str(exc), '')!r}) was raised by {where}, neither the "
                            "check's module nor the kit: only those say an item's state")
    if isinstance(exc, Done) and when != "call":
        return CheckOutcome(item_id, nodeid, State.ERROR, f"done() raised in {when}, not by the check's function")
    if isinstance(exc, DodOutcome):
        return CheckOutcome(item_id, nodeid, State(exc.state), exc.reason, exc.command)
    if isinstance(exc, pytest.skip.Exception):
        return CheckOutcome(item_id, nodeid, State.PENDING, f"skipped: {exc.msg}")
    if isinstance(exc, pytest.xfail.Exception):
        return CheckOutcome(item_id, nodeid, State.PENDING, f"marked xfail: {exc.msg}")
    if when == "call" and isinstance(exc, AssertionError):
        return CheckOutcome(item_id, nodeid, State.BROKEN, _first_line(str(exc), "assertion failed"))
    if isinstance(exc, ConfigError):
        # Wrong input (a workspace field, evidence linked from outside the root) is the learner's to fix.
        return CheckOutcome(item_id, nodeid, State.ERROR, f"wrong input: {_first_line(str(exc), '')}")
    return CheckOutcome(item_id, nodeid, State.ERROR,
                        f"check crashed in {when}: {type(exc).__name__}: {_first_line(str(exc), '')}".rstrip(": "))


def classify(item_id: str, rep: pytest.TestReport, call: pytest.CallInfo[Any], seen: Any,
             suspects: list[str], raiser: Raiser | None = None) -> CheckOutcome | None:
    """The outcome of one phase of a check; ``None`` for a setup or teardown that passed.

    Args:
        item_id: the check's DoD item.
        rep: pytest's report of the phase (as every makereport hook left it).
        call: the phase's call info (``excinfo`` is what pytest caught).
        seen: for the call phase, what :class:`Observer` recorded (``None``: not called).
        suspects: foreign hook implementations, named in an untrusted outcome.
        raiser: where a DoD outcome exception came from when not from the check or the kit (see
            :func:`from_exception`).
    """
    nodeid = rep.nodeid
    exc = call.excinfo.value if call.excinfo is not None else None
    by = f" (foreign hooks: {', '.join(suspects)})" if suspects else ""
    if rep.when == "call":
        if isinstance(seen, BaseException):
            if exc is None and rep.passed:
                return CheckOutcome(item_id, nodeid, State.UNTRUSTED,
                                    f"the check raised {type(seen).__name__}({_first_line(str(seen), '')!r}) "
                                    f"but its report says passed: something swallowed the exception{by}")
            return from_exception(item_id, nodeid, seen, "call", raiser)
        if seen is None and exc is None:
            return CheckOutcome(item_id, nodeid, State.UNTRUSTED,
                                f"the check's function never ran, yet its report says {rep.outcome}: "
                                f"something replaced it{by}")
        if isinstance(exc, Done):
            return CheckOutcome(item_id, nodeid, State.UNTRUSTED,
                                f"done() was raised around the check, not by its function{by}")
        if exc is not None:
            return from_exception(item_id, nodeid, exc, "call", raiser)
        assert seen == Observer.RETURNED
        if not rep.passed:
            # A plugin made a returned check look worse (e.g. pytest-timeout's teardown); believe the worse.
            return CheckOutcome(item_id, nodeid, State.ERROR, f"the check returned but pytest reports it "
                                f"{rep.outcome}: {_first_line(str(rep.longrepr), '')}")
        return CheckOutcome(item_id, nodeid, State.DONE, "evidence checked")
    if rep.passed and exc is None:
        return None
    if exc is not None:
        return from_exception(item_id, nodeid, exc, rep.when, raiser)
    if rep.skipped:
        return CheckOutcome(item_id, nodeid, State.PENDING, f"skipped: {_skip_reason(rep)}")
    return CheckOutcome(item_id, nodeid, State.ERROR, f"check failed in {rep.when}")


def normalise(rep: pytest.TestReport, item: pytest.Item, outcome: CheckOutcome, exc: BaseException | None) -> None:
    """Make the report's pytest outcome follow the DoD state (done passes; pending, stale, blocked and
    not-run skip; broken, error and untrusted fail), whatever markers or hooks made of it.

    A failure keeps pytest's traceback (a failing ``assert``, a crash) unless the check said
    ``broken(...)`` itself or the outcome is untrusted: then the report is the one-line reason.
    """
    want = outcome.state.report_outcome
    if hasattr(rep, "wasxfail"):
        del rep.wasxfail  # an xfail marker must not turn a broken check into "xfailed"
    if want == "skipped":
        path, lineno, _ = item.location
        rep.longrepr = (path, (lineno or 0) + 1, f"{outcome.state.value}: {outcome.reason}")
    elif want == "failed" and (rep.outcome != "failed" or isinstance(exc, DodOutcome)
                               or outcome.state is State.UNTRUSTED):
        rep.longrepr = f"DoD item {outcome.state.value}: {outcome.reason}"
    if want == "passed":
        rep.longrepr = None  # a check that ended with done(reason) raised to say so
    rep.outcome = want  # type: ignore[assignment]
