"""The DoD table at the end of a run, written through pytest's terminal writer.

Colour comes from pytest's markup, so ``--color=no`` (or a terminal that is not a TTY) gives plain
text with no escape codes.
"""

from __future__ import annotations

from pathlib import Path

from pytest_distcheck.dod.collection import NOT_COLLECTED
from pytest_distcheck.dod.manifest import shipped_phases
from pytest_distcheck.dod.report import FAILED, PASSED, UNVERIFIED, flagged, noted, unverified_reason
from pytest_distcheck.dod.state import NEEDS_EVIDENCE, ItemResult, State, next_step
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import Workspace, at_root, display_path, shell_folder, way_to_root

NOT_CHECKED_GATE = N_("gate: FAILED (the DoD was not checked)")
NOT_CHECKED = N_("distcheck: the DoD of phase {phase} was not checked in this run (none of its checks under {checks}/ "
                 "was collected); {next}")
HEADING = N_("Definition of Done: phase {phase}")
RERUN = N_("rerun: {command}")
# Under the heading of a run started in a subfolder ({here}/) of the workspace; {up}: cd's way to its root.
FROM_SUBFOLDER = N_("started in {here}: the paths below are relative to the workspace root, and each command runs "
                    "there, as (cd {up} && ...)")
ITEMS_DONE = N_("{done}/{total} items done")
NOT_CHECKED_HERE = N_(", {n} not checked in this run")
# After the counts of a failed gate: each item not done, with its state ("alpha (pending), beta (blocked)").
NOT_DONE = N_("; not done: {items}")
FLAGGED = N_("; flagged, never a pass: {items}")
NOTED = N_("; noted for the grader, not a failure: {items}")
GATE_LINE = N_("gate: {verdict} ({summary})")
# The gate's verdict as the table's last line says it; the reports keep the identifiers (report.PASSED, ...).
VERDICTS = {PASSED: N_("PASSED"), FAILED: N_("FAILED"), UNVERIFIED: N_("UNVERIFIED")}
# A reason this long that an earlier row gave is not repeated; the reports keep it in full.
SAME_REASON_FROM = 100
SAME_REASON = N_("as {item} above")
NOT_GATED = N_("{summary} (not gated; use --gate to require every item)")

_COLOURS = {
    State.DONE: {"green": True},
    State.NOT_RUN: {"yellow": True},
    State.PENDING: {"yellow": True},
    State.STALE: {"yellow": True},
    State.BLOCKED: {"yellow": True},
    State.BROKEN: {"red": True, "bold": True},
    State.ERROR: {"red": True, "bold": True},
    State.UNTRUSTED: {"red": True, "bold": True},
}


def write(tr, ws: Workspace, results: list[ItemResult], gate: bool, verdict: str = FAILED) -> None:
    """Write the table: one row per item (state, id, reason); under an item that lacks evidence (pending,
    stale, blocked) the command that produces it (``->``); under every item not done, the command
    that checks it again (``rerun:``). Broken rows say what to fix in their reason. With ``gate``, the
    last line is the gate's ``verdict`` (:func:`~pytest_distcheck.dod.report.gate_verdict`).

    A ``-m`` expression naming no registered marker (strict markers) gets one line naming it instead.
    A run that collected none of the DoD's checks (``pytest tests``: the kit's own tests) and no gate
    gets one line instead: nothing was claimed, and six NOT RUN rows would read as a failure."""
    from pytest_distcheck.cmdline import bad_markexpr, not_checked_next_step

    problem = bad_markexpr(tr.config)  # read after collection: markers of every conftest are registered
    if problem:
        tr.write_line(f"distcheck: {problem}", red=True, bold=True)
        if gate:
            tr.write_line(_(NOT_CHECKED_GATE), red=True, bold=True)
        return
    if not gate and not_checked_at_all(results):
        tr.write_line(_(NOT_CHECKED).format(phase=ws.phase_id, checks=ws.checks_dir.name,
                                            next=not_checked_next_step(tr.config, ws.root)))
        return
    tr.write_sep("=", _(HEADING).format(phase=ws.phase_id))
    here = invoked_in(tr.config)
    up = way_to_root(ws.root, here)
    if up is not None:
        tr.write_line(_(FROM_SUBFOLDER).format(here=display_path(here, ws.root) + "/", up=up))
    if not gate:  # the commands below are for the learner's shell (not CI's); -q hides the header, not this
        from pytest_distcheck.deps import not_activated

        note = not_activated(here, ws.root)
        if note:
            tr.write_line(note, yellow=True)
    named = workspace_option(ws)
    by_id = {r.item_id: r for r in results}

    def shell(command: str) -> str:
        return at_root(command, ws.root, here)
    state_w = max(7, *(len(r.state.label) for r in results))
    width = max(len(r.item_id) for r in results)
    shown: dict[str, str] = {}  # a long reason already shown (the gate's untrusted workspace: every item) -> item
    for r in results:
        tr.write(f"{r.state.label:<{state_w}}  ", **_COLOURS[r.state])
        first, *more = r.reason.splitlines() or [""]
        if len(r.reason) > SAME_REASON_FROM and r.reason in shown:
            first, more = _(SAME_REASON).format(item=shown[r.reason]), []
        elif len(r.reason) > SAME_REASON_FROM:
            shown[r.reason] = r.item_id
        tr.write_line(f"{r.item_id:<{width}}  {first}")
        for line in more:  # a reason of several lines (one per failing citation) stays in its column
            tr.write_line(f"{'':<{state_w}}  {'':<{width}}  {line}")
        if r.state in NEEDS_EVIDENCE:
            tr.write_line(f"{'':<{state_w}}  {'':<{width}}  -> {next_step(r, by_id, shell)}")
        if r.state is not State.DONE:
            tr.write_line(f"{'':<{state_w}}  {'':<{width}}  " + _(RERUN).format(command=shell(r.rerun + named)))
    done = sum(r.state is State.DONE for r in results)
    # not checked: no check of the item ran, or only some did (a NOT RUN row either way)
    unchecked = sum(not r.ran or r.state is State.NOT_RUN for r in results)
    summary = _(ITEMS_DONE).format(done=done, total=len(results))
    if unchecked:
        summary += _(NOT_CHECKED_HERE).format(n=unchecked)
    if gate:
        ok = verdict == PASSED
        not_done = [f"{r.item_id} ({r.state.word})" for r in results if r.state is not State.DONE]
        if not_done:
            summary += _(NOT_DONE).format(items=", ".join(not_done))
        marked = flagged(results)
        if marked:
            summary += _(FLAGGED).format(items=", ".join(marked))
        notes = noted(results)
        if notes:
            summary += _(NOTED).format(items=", ".join(notes))
        if ws.phase_id not in shipped_phases():  # UNVERIFIED once every item is done; said before that too
            summary += f"; {unverified_reason(ws.phase_id)}"
        tr.write_line(_(GATE_LINE).format(verdict=_(VERDICTS[verdict]), summary=summary), green=ok, red=not ok,
                      bold=True)
    else:
        tr.write_line(_(NOT_GATED).format(summary=summary))


def not_checked_at_all(results: list[ItemResult]) -> bool:
    """True when no check of any item was collected in the run (not merely deselected or stopped)."""
    reasons = []
    for r in results:  # a blocked item's own reason names its blocker; its checks' outcomes say why they did not run
        reasons += [o.reason for o in r.outcomes] if r.outcomes else ([] if r.state is State.BLOCKED else [r.reason])
    return (not any(r.ran for r in results) and bool(reasons)
            and all(reason.startswith(_(NOT_COLLECTED)) for reason in reasons))


def invoked_in(config) -> Path:
    """The folder the learner typed the command in, which the printed commands must suit: pytest's invocation
    folder (in a git hook, the subfolder the commit was typed in: :func:`~pytest_distcheck.workspace.shell_folder`),
    or under ``distcheck gate`` (pytest started in its snapshot of the commit) the subfolder of the workspace the
    gate started in (ini :data:`~pytest_distcheck.dod.gate.INVOKED_IN_INI`)."""
    from pytest_distcheck.dod.gate import INVOKED_IN_INI

    base = Path(config.invocation_params.dir)
    if not config.getoption("distcheck_gate", False):
        return shell_folder(base)
    sub = config.getini(INVOKED_IN_INI)
    return base / sub if sub else base


def workspace_option(ws: Workspace) -> str:
    """`` --workspace FILE`` for a workspace file that is not found by default (not ``checks/distcheck.toml``
    under its root, e.g. ``checks/solutions.toml``), so the rerun lines check the same workspace; else ``""``."""
    import shlex

    from pytest_distcheck.workspace import DEFAULT_PATH

    rel = display_path(ws.path, ws.root)
    return "" if rel == DEFAULT_PATH else f" --workspace {shlex.quote(rel)}"
