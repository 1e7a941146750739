"""The DoD report of one run as a JSON-ready dict (``--dod-json``), the source of the Markdown summary.

Its shape is ``pytest_distcheck/schemas/dod-report.schema.json``. Every item says whether any of
its checks ran in this run (``ran``), so a report never claims more than the run checked.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import pytest_distcheck
from pytest_distcheck.dod.state import ItemResult, State
from pytest_distcheck.git import run_git
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import Workspace

FORMAT = "pytest-distcheck/dod-report"
# 3: gate.verdict, items' evidence and flags; 4: gate.commit and gate.flagged, no isolation section;
# 5: gate.noted (fast-quiz passes)
VERSION = 5
PASSED, FAILED, UNVERIFIED = "passed", "failed", "unverified"
UNVERIFIED_WHY = N_("no DoD shipped with the kit for phase {phase}; --gate only vouches for phases whose DoD ships "
                    "with the kit: {phases}")
NONE = N_("none")


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _with_flags(results: list[ItemResult], keep) -> list[str]:
    out = []
    for r in results:
        flags = [f for f in dict.fromkeys(f for o in r.outcomes for f in o.flags) if keep(f)]
        if flags:
            out.append(f"{r.item_id} ({', '.join(flags)})")
    return out


def flagged(results: list[ItemResult]) -> list[str]:
    """``item (flag, ...)`` for each item whose evidence carries a flag that is neither a label (confirmed,
    self-reported) nor a note (:func:`noted`): copied. A flagged item never passes the gate."""
    from pytest_distcheck.dod.provenance import LABELS, NOTES

    return _with_flags(results, lambda f: f not in LABELS and f not in NOTES)


def noted(results: list[ItemResult]) -> list[str]:
    """``item (flag, ...)`` for each done item whose evidence carries a note for a grader (fast-quiz); the note does
    not keep it from passing. An item not done (untrusted, pending, ...) is not noted: its state says enough."""
    from pytest_distcheck.dod.provenance import NOTES

    return _with_flags([r for r in results if r.state is State.DONE], lambda f: f in NOTES)


def gate_verdict(results: list[ItemResult], canonical: dict[str, Any] | None) -> str:
    """The gate's verdict: :data:`PASSED` when every item of the phase ran in this session and is done, none is
    :func:`flagged`, and the workspace is the DoD the kit ships for its phase (``canonical``, from
    :func:`~pytest_distcheck.dod.manifest.compare`, trusted); :data:`UNVERIFIED` when every item is done but the kit
    ships no DoD for the phase (``canonical`` is ``None``: the kit cannot vouch for what "done" means there);
    :data:`FAILED` otherwise."""
    if not results or not all(r.state is State.DONE for r in results) or flagged(results):
        return FAILED
    if canonical is None:
        return UNVERIFIED
    return PASSED if canonical["trusted"] else FAILED


def unverified_reason(phase_id: str) -> str:
    """Why a phase without a shipped DoD cannot pass the gate, naming the phases that can."""
    from pytest_distcheck.dod.manifest import shipped_phases

    return _(UNVERIFIED_WHY).format(phase=phase_id, phases=", ".join(shipped_phases()) or _(NONE))


def _git_commit(root: Path) -> str | None:
    try:
        out = run_git(root, "rev-parse", "HEAD", timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def build(ws: Workspace, results: list[ItemResult], config: pytest.Config, canonical: dict[str, Any] | None = None,
          snap: Any = None) -> dict[str, Any]:
    """The report document for ``results`` (one per workspace item, from :func:`~.state.combine`).

    ``canonical``: the workspace against the DoD the kit ships for its phase
    (:func:`~pytest_distcheck.dod.manifest.compare`), ``None`` when it ships none; ``snap``: the gate's
    :class:`~pytest_distcheck.dod.snapshot.Snapshot` (the commit judged), ``None`` when not gated. With both, a
    grader can re-verify the workspace and the check files from the report alone.
    """
    verdict = gate_verdict(results, canonical)
    root = config.rootpath
    args = list(config.invocation_params.args)
    check_files = sorted({nodeid.split("::", 1)[0] for r in results for nodeid in r.checks})
    states = Counter(r.state.value for r in results)
    return {
        "format": FORMAT,
        "version": VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "phase": {"id": ws.phase_id, "title": ws.phase_title},
        "workspace": {"path": _rel(ws.path, root), "sha256": sha256_file(ws.path),
                      "root": str(snap.root if snap is not None else root)},
        "run": {
            "command": "distcheck gate" if snap is not None else shlex.join(["pytest", *map(str, args)]),
            "ci": bool(os.environ.get("CI")),
            "git_commit": snap.commit if snap is not None else _git_commit(root),
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "distcheck": pytest_distcheck.__version__,
            "kit_location": str(Path(pytest_distcheck.__file__).resolve().parent),
        },
        "gate": {
            "requested": bool(config.getoption("distcheck_gate")),
            "passed": verdict == PASSED,
            "verdict": verdict,
            "failing": [r.item_id for r in results if r.state is not State.DONE],
            "flagged": flagged(results),
            "noted": noted(results),
            "commit": snap.commit if snap is not None else None,
        },
        "summary": {
            "total": len(results),
            "done": states.get(State.DONE.value, 0),
            "ran": sum(r.ran for r in results),
            "by_state": {s.value: states.get(s.value, 0) for s in State},
        },
        "items": [_item(r) for r in results],
        "check_files": [{"path": f, "sha256": sha256_file(root / f)} for f in check_files if (root / f).is_file()],
        "canonical": canonical,
    }


def _item(r: ItemResult) -> dict[str, Any]:
    return {
        "id": r.item_id,
        "title": r.title,
        "state": r.state.value,
        "reason": r.reason,
        "command": r.command,
        "rerun": r.rerun,
        "requires": list(r.requires),
        "blocked_by": list(r.blocked_by),
        "ran": r.ran,
        "evidence": list({f["path"]: {"path": f["path"], "sha256": f["sha256"], "copied": f["copied"]}
                          for o in r.outcomes for f in o.evidence}.values()),
        "flags": list(dict.fromkeys(flag for o in r.outcomes for flag in o.flags)),
        "checks": [
            {"nodeid": o.nodeid, "state": o.state.value, "reason": o.reason, "command": o.command}
            for o in r.outcomes
        ],
    }
