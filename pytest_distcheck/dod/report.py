"""The DoD report of one run as a JSON-ready dict (``--dod-json``), the source of the Markdown summary.

Its shape is ``pytest_distcheck/schemas/dod-report.schema.json``. Every item says whether any of
its checks ran in this run (``ran``), so a report never claims more than the run checked.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
from collections import Counter
from collections.abc import Mapping
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
# 5: gate.noted (fast-quiz passes); 6: run.ci the CI run (an object, null outside CI), run.kit_source,
# run.packages, run.command the gate's command line as typed
VERSION = 6
PASSED, FAILED, UNVERIFIED = "passed", "failed", "unverified"
UNVERIFIED_WHY = N_("no DoD shipped with the kit for phase {phase}; --gate only vouches for phases whose DoD ships "
                    "with the kit: {phases}")
NONE = N_("none")
# The packages whose versions a grader needs beside the kit's: what the checks resolved against.
PACKAGES = ("torch", "megatron-core")
# run.ci's keys and the GitHub Actions variables they are read from (never a secret: only these are read).
CI_VARIABLES = {"repository": "GITHUB_REPOSITORY", "run_id": "GITHUB_RUN_ID", "server_url": "GITHUB_SERVER_URL",
                "sha": "GITHUB_SHA", "ref": "GITHUB_REF"}


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


def kit_source(dist: Any = None, kit: Path | None = None) -> dict[str, Any] | None:
    """Where the kit that runs was installed from, as the installer recorded it (PEP 610's ``direct_url.json`` of
    the ``pytest-distcheck`` distribution, or of ``dist``): ``{"url", "commit", "requested", "editable"}``
    (``commit``, ``requested``: a VCS install's commit id and the revision asked for, else ``None``; the url
    without credentials). ``None`` when there is no such record (installed from an index, or not installed) or
    it describes another copy of the kit than the one imported (``kit``: the package folder; e.g. a source
    folder on ``PYTHONPATH`` beside an install elsewhere)."""
    from urllib.parse import urlsplit, urlunsplit
    from urllib.request import url2pathname

    kit = Path(kit or Path(pytest_distcheck.__file__).parent).resolve()
    try:
        dist = dist if dist is not None else importlib.metadata.distribution("pytest-distcheck")
        data = json.loads(dist.read_text("direct_url.json") or "null")
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    editable = isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable") is True
    parts = urlsplit(data["url"])
    if editable:  # the kit imports from the folder the url names (a VCS url names none to compare)
        folder = Path(url2pathname(parts.path)).resolve() if parts.scheme == "file" else None
        if folder is not None and folder != kit and folder not in kit.parents:
            return None
    else:
        try:
            installed = Path(dist.locate_file("pytest_distcheck")).resolve()
        except (NotImplementedError, OSError):
            return None
        if installed != kit:
            return None
    user, at, host = parts.netloc.rpartition("@")
    url = urlunsplit(parts._replace(netloc=host if at and user != "git" else parts.netloc))
    vcs = data.get("vcs_info") if isinstance(data.get("vcs_info"), dict) else {}
    return {"url": url, "commit": _text(vcs.get("commit_id")), "requested": _text(vcs.get("requested_revision")),
            "editable": editable}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def package_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`PACKAGES` (``None``: not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def ci_run(environ: Mapping[str, str] | None = None) -> dict[str, str | None] | None:
    """The CI run this is, from the environment (:data:`CI_VARIABLES`, and ``run_url``:
    ``SERVER/REPOSITORY/actions/runs/RUN_ID`` when all three are set; ``None`` each that is not); ``None``
    outside CI (neither ``CI`` nor ``GITHUB_ACTIONS`` set)."""
    env = os.environ if environ is None else environ
    if not env.get("CI") and not env.get("GITHUB_ACTIONS"):
        return None
    out = {key: env.get(var) or None for key, var in CI_VARIABLES.items()}
    where = (out["server_url"], out["repository"], out["run_id"])
    out["run_url"] = f"{where[0].rstrip('/')}/{where[1]}/actions/runs/{where[2]}" if all(where) else None
    return out


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
            "command": snap.command if snap is not None else shlex.join(["pytest", *map(str, args)]),
            "ci": ci_run(),
            "git_commit": snap.commit if snap is not None else _git_commit(root),
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "distcheck": pytest_distcheck.__version__,
            "kit_location": str(Path(pytest_distcheck.__file__).resolve().parent),
            "kit_source": kit_source(),
            "packages": package_versions(),
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
