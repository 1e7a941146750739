"""DoD states, whether a check's outcome can be believed, and how the outcomes of one run become one state
per item: the one place that decides an item's state and trust, each with its reason."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_distcheck.dod.collection import (
    DID_NOT_RUN,
    FAILED_UNCLASSIFIED,
    NOT_COLLECTED,
    NOT_SELECTED,
    PASSED_UNCLASSIFIED,
    REGISTERED_NOT_COLLECTED,
    CollectionRecord,
)
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.workspace import Workspace


class State(enum.Enum):
    """What the run established about a DoD item. Only DONE counts towards the gate.

    NOT_RUN: not every check of the item ran in this session, none or only some (deselected, not collected, stopped
    early; ``ItemResult.ran`` says whether one did);
    nothing is claimed about its evidence. UNTRUSTED: a check ran, but its outcome cannot be believed
    (:func:`judge`, :func:`gate_outcomes`).
    """

    DONE = "done"
    NOT_RUN = "not-run"
    PENDING = "pending"
    STALE = "stale"
    BLOCKED = "blocked"
    BROKEN = "broken"
    ERROR = "error"
    UNTRUSTED = "untrusted"

    @property
    def word(self) -> str:
        """The state as a person reads it in the language in use (``not-run``; ``sin ejecutar``); the reports keep
        :attr:`value`."""
        return _(WORDS[self])

    @property
    def label(self) -> str:
        """Upper-case label for the terminal table (``NOT RUN``), in the language in use."""
        return self.word.replace("-", " ").upper()

    @property
    def report_outcome(self) -> str:
        """The pytest outcome a check with this state reports: done passes, a failure fails, the rest skip."""
        if self is State.DONE:
            return "passed"
        if self in (State.BROKEN, State.ERROR, State.UNTRUSTED):
            return "failed"
        return "skipped"


# The states' words for a person (State.word): the English ones are the identifiers themselves.
WORDS = {State.DONE: N_("done"), State.NOT_RUN: N_("not-run"), State.PENDING: N_("pending"), State.STALE: N_("stale"),
         State.BLOCKED: N_("blocked"), State.BROKEN: N_("broken"), State.ERROR: N_("error"),
         State.UNTRUSTED: N_("untrusted")}

# When several checks cover one item, the worst outcome speaks for it.
SEVERITY = [State.DONE, State.NOT_RUN, State.PENDING, State.STALE, State.BLOCKED, State.BROKEN, State.ERROR,
            State.UNTRUSTED]


def worst(states) -> State:
    """The most severe of ``states`` (an iterable of :class:`State`); DONE for none."""
    return max(states, key=SEVERITY.index, default=State.DONE)


@dataclass(frozen=True)
class CheckOutcome:
    """The outcome of one check (one pytest test) for one DoD item.

    Attributes:
        item_id: the DoD item the check covers.
        nodeid: the pytest node id of the check.
        state: what the check reported.
        reason: short text for a person (what was expected, what was found).
        command: the command that completes the item, when the check knows one.
        evidence, flags: what the check recorded with the ``distcheck_evidence`` fixture.
    """

    item_id: str
    nodeid: str
    state: State
    reason: str
    command: str | None = None
    evidence: tuple = ()  # files the check judged: {"path", "sha256", "copied"} (copies.evidence_entry)
    flags: tuple = ()  # how far it can be believed: "self-reported", "confirmed", "copied", "fast-quiz", ...


@dataclass(frozen=True)
class ItemResult:
    """The state of one DoD item after a run, with its reason and the commands to act on it.

    Attributes:
        command: the command that produces the item's evidence (a blocked item: its blocker's).
        rerun: the command that checks just this item again (with its prerequisites).
        checks: node ids of the checks that reported on the item in this run.
        outcomes: those checks' own outcomes, in the order they reported.
        blocked_by: prerequisites that are not done.
        ran: whether at least one check of the item reported in this run.
    """

    item_id: str
    title: str
    state: State
    reason: str
    command: str
    checks: tuple[str, ...] = ()
    rerun: str = ""
    requires: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = ()
    ran: bool = False
    outcomes: tuple[CheckOutcome, ...] = field(default=(), repr=False)


# States whose next step is to produce evidence (the item's command). For the others the reason says
# what to fix (broken, error, untrusted) or nothing is wrong yet (not-run): only the rerun applies.
NEEDS_EVIDENCE = frozenset({State.PENDING, State.STALE, State.BLOCKED})


# The node id of an outcome that the gate itself sets for every item (the workspace is not the shipped DoD).
GATE_NODEID = "<distcheck gate>"
COPIED = N_("copied from the kit: {files} (its reference solutions, course pages and fixtures are teaching material, "
             "never counted as your work)")
NOT_SHIPPED = N_("the workspace is not the shipped DoD of phase {phase}: {problems}")
# Not origin: in a CI clone or a fork it is the learner's own repository, edited checks and all.
SHIPPED_FIX = N_(" (restore checks/ from the course's repository and commit it, e.g. git checkout COURSE/main -- "
                 "checks where COURSE is your git remote of the course's repository; or install the kit the course "
                 "pins)")
NOT_OWN_CHECK = N_("{check} is not one of the item's own checks: {problems}")
AND_MORE = N_(" (and {n} more)")
NO_CHECK_RAN = N_("no check ran in this session")
BLOCKED_BY = N_("blocked by {blockers}")
OWN_DID_NOT_RUN = N_("; own checks did not run")
OWN_CHECKS = N_("; own checks: {state}")
OWN_CHECKS_SAID = N_("own checks: {state} ({reason})")
FIRST_CHECK = N_("first check {item}: {rerun}")
FIRST_FIX = N_("first fix {item} ({state}), then: {rerun}")


def judge(outcome: CheckOutcome, problems: list[str] = ()) -> CheckOutcome:
    """``outcome`` as far as it can be believed: untrusted when its check is not the workspace's own
    (``problems``, found at collection: not registered for the item, defined outside the checks folder) or a file
    it judged is a copy of the kit's material (its evidence's ``copied``); otherwise as the check said."""
    copied = [f for f in outcome.evidence if f.get("copied")]
    if problems:
        reason = _(NOT_OWN_CHECK).format(check=outcome.nodeid, problems="; ".join(problems))
    elif copied and outcome.state is not State.UNTRUSTED:
        reason = _(COPIED).format(files="; ".join(f"{f['path']}: {f['copied']}" for f in copied))
    else:
        return outcome
    return CheckOutcome(outcome.item_id, outcome.nodeid, State.UNTRUSTED, reason, None, outcome.evidence, outcome.flags)


def gate_outcomes(ws: Workspace, canonical: dict | None) -> list[CheckOutcome]:
    """Under the gate: every item untrusted when the workspace is not the DoD the kit ships for its phase
    (``canonical``, from :func:`~pytest_distcheck.dod.manifest.compare`); ``[]`` when it is or none ships."""
    if canonical is None or canonical["trusted"]:
        return []
    more = len(canonical["problems"]) - 3
    why = _(NOT_SHIPPED).format(phase=canonical["phase"], problems="; ".join(canonical["problems"][:3])
                                + (_(AND_MORE).format(n=more) if more > 0 else "")) + _(SHIPPED_FIX)
    return [CheckOutcome(it.id, GATE_NODEID, State.UNTRUSTED, why) for it in ws.items]


def rerun_command(item_id: str) -> str:
    """The command that checks one item again, with its prerequisites (``--dod``)."""
    return f"pytest --dod {item_id}"


def combine(
    ws: Workspace, outcomes: list[CheckOutcome], collection: CollectionRecord | None = None
) -> list[ItemResult]:
    """One result per workspace item, in workspace order.

    Args:
        ws: the workspace (items and prerequisites).
        outcomes: every check outcome the kit classified in this run.
        collection: what was collected and selected (``None``: unknown, e.g. a crashed xdist run);
            with it, an item is done only if every selected check of it reported done, and an
            item whose checks did not all run says which did not and why.

    An item no check reported on is not run (with the reason when known); an item whose
    prerequisite is not done is blocked by it (its reason adds what its own checks said), unless
    they said broken, error or untrusted, or none of its checks was selected (not run).

    An outcome the gate set for the item (:data:`GATE_NODEID`) makes it untrusted and keeps what its
    own checks said, one line each: a specific untrusted diagnosis of its checks (a hook rewrote the
    outcome) first, then the gate's reason; otherwise the gate's reason first, then
    ``own checks: pending (no log yet)``.
    """
    by_item: dict[str, list[CheckOutcome]] = {}
    gate_whys: dict[str, list[str]] = {}
    for out in outcomes:
        if out.nodeid == GATE_NODEID:
            gate_whys.setdefault(out.item_id, []).append(out.reason)
        else:
            by_item.setdefault(out.item_id, []).append(out)
    results: dict[str, ItemResult] = {}
    for it in _topological(ws):
        outs = list(by_item.get(it.id, []))
        if collection is not None:
            outs += missing_outcomes(collection, it.id, {o.nodeid for o in outs})
        ran = any(o.state is not State.NOT_RUN for o in outs)
        not_run = [o for o in outs if o.state is State.NOT_RUN]
        if not outs:
            reason = collection.no_check_reason(it.id) if collection is not None else _(NO_CHECK_RAN)
            res = ItemResult(it.id, it.title_in(), State.NOT_RUN, reason, it.how_in())
        elif not ran:
            reason = "; ".join(dict.fromkeys(o.reason for o in not_run))
            res = ItemResult(it.id, it.title_in(), State.NOT_RUN, reason, it.how_in())
        else:
            bad = max(outs, key=lambda o: SEVERITY.index(o.state))
            reason = bad.reason
            if bad.state is State.NOT_RUN:
                reason = ngettext("{n} of {total} checks did not run: {nodeid} {reason}",
                                  "{n} of {total} checks did not run: {nodeid} {reason}", len(not_run)).format(
                    n=len(not_run), total=len(outs), nodeid=bad.nodeid, reason=bad.reason)
            # A check that names its item's step (item.how) gets it in the language in use.
            step = it.how_in() if bad.command in (None, "", it.how) else bad.command
            res = ItemResult(it.id, it.title_in(), bad.state, reason, step,
                             tuple(dict.fromkeys(o.nodeid for o in outs if o.state is not State.NOT_RUN)))
        if it.id in gate_whys:
            res = _untrusted_by_gate(res, gate_whys[it.id])
        blockers = tuple(r for r in it.requires if results[r].state is not State.DONE)
        # None of its checks selected: nothing was asked of the item, so it is not run, whatever blocks it.
        unselected = res.state is State.NOT_RUN and collection is not None and not collection.selected(it.id)
        waiting = (State.DONE, State.NOT_RUN, State.PENDING, State.STALE, State.BLOCKED)
        if blockers and not unselected and res.state in waiting:
            own = {State.BLOCKED: "", State.NOT_RUN: _(OWN_DID_NOT_RUN)}.get(
                res.state, _(OWN_CHECKS).format(state=res.state.word))
            res = ItemResult(
                it.id,
                it.title_in(),
                State.BLOCKED,
                _(BLOCKED_BY).format(blockers=", ".join(f"{b} ({results[b].state.word})" for b in blockers)) + own,
                _unblock(results[blockers[0]]),
                res.checks,
            )
        results[it.id] = ItemResult(res.item_id, res.title, res.state, res.reason, res.command, res.checks,
                                    rerun_command(it.id), it.requires, blockers, ran, tuple(outs))
    return [results[it.id] for it in ws.items]


def missing_outcomes(collection: CollectionRecord, item_id: str, reported: set[str]) -> list[CheckOutcome]:
    """Outcomes for the item's checks in ``collection`` that have none from the kit: not run, or untrusted.

    A selected check with no classified outcome ran outside the kit's hooks (its report passed:
    untrusted; failed: error) or did not run at all (the session stopped early).
    """
    out = []
    for nodeid, info in collection.checks.items():
        if info.item_id != item_id or nodeid in reported:
            continue
        if not info.selected:
            out.append(CheckOutcome(item_id, nodeid, State.NOT_RUN, info.not_run or _(NOT_SELECTED)))
        elif collection.unclassified.get(nodeid) == "passed":
            out.append(CheckOutcome(item_id, nodeid, State.UNTRUSTED, _(PASSED_UNCLASSIFIED).format(nodeid=nodeid)))
        elif nodeid in collection.unclassified:
            out.append(CheckOutcome(item_id, nodeid, State.ERROR, _(FAILED_UNCLASSIFIED).format(
                nodeid=nodeid, outcome=collection.unclassified[nodeid])))
        else:
            out.append(CheckOutcome(item_id, nodeid, State.NOT_RUN, _(DID_NOT_RUN).format(why=_(collection.stopped))))
    for pattern, why in collection.missing_registered.get(item_id, {}).items():
        out.append(CheckOutcome(item_id, pattern, State.NOT_RUN, f"{_(NOT_COLLECTED)}: "
                                + _(REGISTERED_NOT_COLLECTED).format(pattern=pattern, why=why)))
    return out


def _untrusted_by_gate(own: ItemResult, whys: list[str]) -> ItemResult:
    """``own`` (what the item's checks said) made untrusted by the gate's reasons ``whys``."""
    gate = "; ".join(dict.fromkeys(whys))
    if own.state is State.UNTRUSTED:
        reason = f"{own.reason}\n{gate}"
    else:
        reason = f"{gate}\n" + _(OWN_CHECKS_SAID).format(state=own.state.word, reason=own.reason)
    return ItemResult(own.item_id, own.title, State.UNTRUSTED, reason, own.command, own.checks)


def _unblock(blocker: ItemResult, shell: Callable[[str], str] = str) -> str:
    """What to do first: produce the blocker's evidence, or fix it as its reason says and recheck it;
    ``shell`` turns the command in it into what the learner types (:func:`next_step`)."""
    if blocker.state in NEEDS_EVIDENCE:
        return shell(blocker.command)
    if blocker.state is State.NOT_RUN:
        return _(FIRST_CHECK).format(item=blocker.item_id, rerun=shell(blocker.rerun))
    return _(FIRST_FIX).format(item=blocker.item_id, state=blocker.state.word, rerun=shell(blocker.rerun))


def next_step(result: ItemResult, results: dict[str, ItemResult], shell: Callable[[str], str] = str) -> str:
    """``result.command`` with ``shell`` applied to the command in it: to the whole step, or for an item
    blocked by one that is not run or to fix, to that blocker's rerun only (``first check X: COMMAND``).
    With the default ``shell`` it is ``result.command`` itself; ``results``: every item's result, by id."""
    if result.state is State.BLOCKED and result.blocked_by:  # its command is _unblock's (see combine)
        blocker = results[result.blocked_by[0]]
        if blocker.state in NEEDS_EVIDENCE:
            return next_step(blocker, results, shell)
        return _unblock(blocker, shell)
    return shell(result.command)


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


def topological_ids(ws: Workspace) -> list[str]:
    """Item ids with every item after its prerequisites (ties in workspace order)."""
    return [it.id for it in _topological(ws)]
