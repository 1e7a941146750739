"""How a DoD check says its item is not done.

A check (a test marked ``@pytest.mark.dod(item_id)``) that returns normally means *done* ("evidence checked");
``done(reason)`` ends it as done with a reason of its own (e.g. the evidence is only *self-reported*). Otherwise it
raises through :func:`pending` (no evidence yet; ``command`` produces it), :func:`broken` (evidence present but
wrong: say what was expected and what was found) or :func:`stale` (evidence older than what it was made from). A
failing ``assert`` counts as broken; any other exception is an *error* (a bug in the kit or the check).
"""

from __future__ import annotations


class DodOutcome(Exception):
    """Base of the exceptions a DoD check raises to report a state other than done."""

    state = ""

    def __init__(self, reason: str, command: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.command = command


class Done(DodOutcome):
    """The evidence is right; ``reason`` says what was checked and how far it can be believed."""

    state = "done"


class Pending(DodOutcome):
    """No evidence yet. ``command`` produces it."""

    state = "pending"


class Broken(DodOutcome):
    """Evidence present but wrong."""

    state = "broken"


class Stale(DodOutcome):
    """Evidence older than the code or config it was produced from."""

    state = "stale"


class Blocked(DodOutcome):
    """A prerequisite already ran in this process and is not done; raised by the kit, not by checks."""

    state = "blocked"


def done(reason: str) -> None:
    """Stop the current DoD check: its item is done, for ``reason``. Raises :class:`Done`."""
    __tracebackhide__ = True
    raise Done(reason)


def pending(reason: str, command: str | None = None) -> None:
    """Stop the current DoD check: its item is pending. Raises :class:`Pending`."""
    __tracebackhide__ = True
    raise Pending(reason, command)


def broken(reason: str) -> None:
    """Stop the current DoD check: its item is broken. Raises :class:`Broken`."""
    __tracebackhide__ = True
    raise Broken(reason)


def stale(reason: str, command: str | None = None) -> None:
    """Stop the current DoD check: its evidence is stale. Raises :class:`Stale`."""
    __tracebackhide__ = True
    raise Stale(reason, command)
