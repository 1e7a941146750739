"""DoD states and how the outcomes of the checks of one run become one state per item."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_distcheck.workspace import Workspace


class State(enum.Enum):
    """What the run established about a DoD item. Only DONE counts towards the gate."""

    DONE = "done"
    PENDING = "pending"
    STALE = "stale"
    BLOCKED = "blocked"
    BROKEN = "broken"
    ERROR = "error"


# When several checks cover one item, the worst outcome speaks for it.
_SEVERITY = [State.DONE, State.PENDING, State.STALE, State.BLOCKED, State.BROKEN, State.ERROR]


@dataclass(frozen=True)
class CheckOutcome:
    """The outcome of one check (one pytest test) for one DoD item.

    Attributes:
        item_id: the DoD item the check covers.
        nodeid: the pytest node id of the check.
        state: what the check reported.
        reason: short text for a person (what was expected, what was found).
        command: the command that completes the item, when the check knows one.
    """

    item_id: str
    nodeid: str
    state: State
    reason: str
    command: str | None = None


@dataclass(frozen=True)
class ItemResult:
    """The state of one DoD item after a run, with its reason and the command to act on it."""

    item_id: str
    title: str
    state: State
    reason: str
    command: str
    checks: tuple[str, ...] = ()


def combine(ws: Workspace, outcomes: list[CheckOutcome]) -> list[ItemResult]:
    """One result per workspace item, in workspace order.

    An item no check reported on is pending ("no check ran"); an item whose prerequisite is not done
    is blocked by it, whatever its own checks said, unless they said broken or error.
    """
    by_item: dict[str, list[CheckOutcome]] = {}
    for out in outcomes:
        by_item.setdefault(out.item_id, []).append(out)
    results: dict[str, ItemResult] = {}
    for it in _topological(ws):
        outs = by_item.get(it.id, [])
        if not outs:
            res = ItemResult(it.id, it.title, State.PENDING, "no check ran in this session", it.how)
        else:
            worst = max(outs, key=lambda o: _SEVERITY.index(o.state))
            res = ItemResult(
                it.id,
                it.title,
                worst.state,
                worst.reason,
                worst.command or it.how,
                tuple(o.nodeid for o in outs),
            )
        blockers = [r for r in it.requires if results[r].state is not State.DONE]
        if blockers and res.state in (State.DONE, State.PENDING, State.STALE):
            res = ItemResult(
                it.id,
                it.title,
                State.BLOCKED,
                "blocked by " + ", ".join(f"{b} ({results[b].state.value})" for b in blockers),
                ws.item(blockers[0]).how,
                res.checks,
            )
        results[it.id] = res
    return [results[it.id] for it in ws.items]


def _topological(ws: Workspace):
    done: set[str] = set()
    order = []

    def visit(item_id: str) -> None:
        if item_id in done:
            return
        for req in ws.item(item_id).requires:
            visit(req)
        done.add(item_id)
        order.append(ws.item(item_id))

    for it in ws.items:
        visit(it.id)
    return order
