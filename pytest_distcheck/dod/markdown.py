"""The DoD report as GitHub-flavoured Markdown, for a CI job summary (``--dod-markdown $GITHUB_STEP_SUMMARY``).

Rendered from the same document as ``--dod-json`` (:func:`pytest_distcheck.dod.report.build`), so
the two never disagree.
"""

from __future__ import annotations

from typing import Any

from pytest_distcheck.dod.state import NEEDS_EVIDENCE

_NEEDS_EVIDENCE = {s.value for s in NEEDS_EVIDENCE}

_MARK = {"done": "✅", "not-run": "⬜", "pending": "⏳", "stale": "🕰️", "blocked": "⛔", "broken": "❌",
         "error": "💥", "untrusted": "🚫"}


def _cell(text: str) -> str:
    """Text safe inside a table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render(doc: dict[str, Any]) -> str:
    """The Markdown summary of a report document (a heading, the verdict, one row per item, what to do)."""
    phase, gate, summary = doc["phase"], doc["gate"], doc["summary"]
    lines = [f"## Definition of Done: phase {phase['id']}", "", f"_{_cell(phase['title'])}_", ""]
    counts = f"{summary['done']}/{summary['total']} items done, {summary['ran']}/{summary['total']} checked in this run"
    if gate["requested"]:
        verdict = "PASSED" if gate["passed"] else "FAILED"
        lines.append(f"**Gate {verdict}**: {counts}.")
        canon = doc.get("canonical")
        where = f"on commit {_code(gate['commit'])}" if gate.get("commit") else "**not** on a commit (not the gate)"
        shipped = ("no DoD ships for this phase" if canon is None else
                   "the workspace is the shipped DoD" if canon["trusted"] else
                   f"the workspace is **not** the shipped DoD ({_cell('; '.join(canon['problems'][:3]))})")
        flagged = f"; flagged: {_cell(', '.join(gate['flagged']))}" if gate.get("flagged") else ""
        lines.append(f"Checks ran {where}; {shipped}{flagged}.")
    else:
        lines.append(f"**Not gated** (run with `--gate` to require every item): {counts}.")
    lines += ["", "| | Item | State | Why |", "|---|---|---|---|"]
    for it in doc["items"]:
        lines.append(f"| {_MARK[it['state']]} | {_code(it['id'])}<br>{_cell(it['title'])} | {it['state']} | "
                     f"{_cell(it['reason'])} |")
    todo = [it for it in doc["items"] if it["state"] != "done"]
    if todo:
        lines += ["", "### What to do", ""]
        for it in todo:
            lines.append(f"- **{it['id']}** ({it['state']}): {_cell(it['reason'])}")
            if it["state"] in _NEEDS_EVIDENCE:
                lines.append(f"  - produce the evidence: {_code(it['command'])}")
            lines.append(f"  - check just this item again: {_code(it['rerun'])}")
    lines += ["", "<details><summary>Run details</summary>", ""]
    run = doc["run"]
    lines.append(f"- command: {_code(run['command'])}")
    lines.append(f"- workspace: {_code(doc['workspace']['path'])} ({doc['workspace']['sha256'][:19]}…)")
    if run.get("git_commit"):
        lines.append(f"- commit: {_code(run['git_commit'])}")
    lines.append(f"- pytest-distcheck {run['distcheck']}, pytest {run['pytest']}, Python {run['python']}")
    for f in doc["check_files"]:
        lines.append(f"- check file {_code(f['path'])}: {f['sha256'][:19]}…")
    lines += ["", "</details>", ""]
    return "\n".join(lines)
