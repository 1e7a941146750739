"""The DoD report as GitHub-flavoured Markdown, for a CI job summary (``--dod-markdown $GITHUB_STEP_SUMMARY``).

Rendered from the same document as ``--dod-json`` (:func:`pytest_distcheck.dod.report.build`), so
the two never disagree.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_distcheck.dod.state import FIRST_CHECK, FIRST_FIX, NEEDS_EVIDENCE
from pytest_distcheck.i18n import N_, _

_NEEDS_EVIDENCE = {s.value for s in NEEDS_EVIDENCE}

_MARK = {"done": "✅", "not-run": "⬜", "pending": "⏳", "stale": "🕰️", "blocked": "⛔", "broken": "❌",
         "error": "💥", "untrusted": "🚫"}

# The summary's own words (tests import these); what the items say comes from the report document.
HEADING = N_("## Definition of Done: phase {phase}")
COUNTS = N_("{done}/{total} items done, {ran}/{total} checked in this run")
GATE_VERDICT = N_("**Gate {verdict}**: {counts}.")
NOT_DONE = N_("; not done: {items}")
ON_COMMIT = N_("on commit {commit}")
NOT_ON_COMMIT = N_("**not** on a commit (not the gate)")
NO_SHIPPED = N_("no DoD ships for this phase")
IS_SHIPPED = N_("the workspace is the shipped DoD")
NOT_SHIPPED = N_("the workspace is **not** the shipped DoD ({problems})")
FLAGGED = N_("; flagged: {flagged}")
NOTED = N_("; noted for the grader, not a failure: {noted}")
CHECKS_RAN = N_("Checks ran {where}; {shipped}{flagged}.")
NOT_GATED = N_("**Not gated** (run with `--gate` to require every item): {counts}.")
TABLE_HEAD = N_("| | Item | State | Why |")
WHAT_TO_DO = N_("### What to do")
PRODUCE = N_("  - produce the evidence: {command}")
RECHECK = N_("  - check just this item again: {command}")
RUN_DETAILS = N_("Run details")
COMMAND = N_("- command: {command}")
WORKSPACE = N_("- workspace: {path} ({sha}…)")
COMMIT = N_("- commit: {commit}")
CHECK_FILE = N_("- check file {path}: {sha}…")
# Which kit judged: run.kit_source (url@commit, the url) or, with none recorded, the folder it ran from.
KIT = N_("- kit: {source}")
KIT_EDITABLE = N_("{url} (editable)")
CI_RUN = N_("; CI run: {url}")


def _cell(text: str) -> str:
    """Text safe inside a table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _step(text: str) -> str:
    """A next step as Markdown: the command in code, a blocked item's words before it (``first check X: ``) not."""
    for template in (FIRST_CHECK, FIRST_FIX):
        head = re.escape(_(template).split("{rerun}")[0]).replace(r"\{item\}", ".+?").replace(r"\{state\}", ".+?")
        match = re.match(head, text)
        if match:
            return text[:match.end()] + _code(text[match.end():])
    return _code(text)


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _kit(run: dict[str, Any]) -> str:
    """The kit a report's ``run`` names: ``url@commit`` for a VCS install, the url (editable: so marked) for
    another recorded install, else the folder it ran from (``kit_location``)."""
    src = run.get("kit_source")
    if not src:
        return _code(run.get("kit_location") or "?")
    if src.get("commit"):
        return _code(f"{src['url']}@{src['commit']}")
    return _(KIT_EDITABLE).format(url=_code(src["url"])) if src.get("editable") else _code(src["url"])


def render(doc: dict[str, Any]) -> str:
    """The Markdown summary of a report document (a heading, the verdict, one row per item, what to do), in the
    language in use; item ids, states, commands and the verdict words PASSED/FAILED stay as they are."""
    phase, gate, summary = doc["phase"], doc["gate"], doc["summary"]
    lines = [_(HEADING).format(phase=phase["id"]), "", f"_{_cell(phase['title'])}_", ""]
    # checked: every check of the item ran (a not-run item whose other check ran is not), as the table counts
    checked = sum(1 for it in doc["items"] if it["ran"] and it["state"] != "not-run")
    counts = _(COUNTS).format(done=summary["done"], total=summary["total"], ran=checked)
    if gate["requested"]:
        not_done = [f"{it['id']} ({it['state']})" for it in doc["items"] if it["state"] != "done"]
        if not_done:
            counts += _(NOT_DONE).format(items=_cell(", ".join(not_done)))
        lines.append(_(GATE_VERDICT).format(verdict="PASSED" if gate["passed"] else "FAILED", counts=counts))
        canon = doc.get("canonical")
        where = _(ON_COMMIT).format(commit=_code(gate["commit"])) if gate.get("commit") else _(NOT_ON_COMMIT)
        shipped = (_(NO_SHIPPED) if canon is None else _(IS_SHIPPED) if canon["trusted"] else
                   _(NOT_SHIPPED).format(problems=_cell("; ".join(canon["problems"][:3]))))
        flagged = _(FLAGGED).format(flagged=_cell(", ".join(gate["flagged"]))) if gate.get("flagged") else ""
        if gate.get("noted"):
            flagged += _(NOTED).format(noted=_cell(", ".join(gate["noted"])))
        lines.append(_(CHECKS_RAN).format(where=where, shipped=shipped, flagged=flagged))
    else:
        lines.append(_(NOT_GATED).format(counts=counts))
    lines += ["", _(TABLE_HEAD), "|---|---|---|---|"]
    for it in doc["items"]:
        lines.append(f"| {_MARK[it['state']]} | {_code(it['id'])}<br>{_cell(it['title'])} | {it['state']} | "
                     f"{_cell(it['reason'])} |")
    todo = [it for it in doc["items"] if it["state"] != "done"]
    if todo:
        lines += ["", _(WHAT_TO_DO), ""]
        for it in todo:
            lines.append(f"- **{it['id']}** ({it['state']}): {_cell(it['reason'])}")
            if it["state"] in _NEEDS_EVIDENCE:
                lines.append(_(PRODUCE).format(command=_step(it["command"])))
            lines.append(_(RECHECK).format(command=_code(it["rerun"])))
    lines += ["", f"<details><summary>{_(RUN_DETAILS)}</summary>", ""]
    run = doc["run"]
    lines.append(_(COMMAND).format(command=_code(run["command"])))
    lines.append(_(WORKSPACE).format(path=_code(doc["workspace"]["path"]), sha=doc["workspace"]["sha256"][:19]))
    if run.get("git_commit"):
        lines.append(_(COMMIT).format(commit=_code(run["git_commit"])))
    lines.append(f"- pytest-distcheck {run['distcheck']}, pytest {run['pytest']}, Python {run['python']}")
    ci = run.get("ci") if isinstance(run.get("ci"), dict) else {}
    lines.append(_(KIT).format(source=_kit(run))
                 + (_(CI_RUN).format(url=ci["run_url"]) if ci.get("run_url") else ""))
    for f in doc["check_files"]:
        lines.append(_(CHECK_FILE).format(path=_code(f["path"]), sha=f["sha256"][:19]))
    lines += ["", "</details>", ""]
    return "\n".join(lines)
