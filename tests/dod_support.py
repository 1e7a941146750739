"""DoD checks that the gate, table and report tests put beside the workspace of tests/conftest.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / "docs" / "ci" / "distcheck-gate.yml"


def git_commit_all(root: Path) -> None:
    """Commit everything under ``root`` (``git init`` first if needed): for the DoD items whose evidence must be
    committed (pytest_distcheck.committed), and for the gate, which judges the commit."""
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "evidence", "--allow-empty")):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                       capture_output=True)

# A two-item workspace file: beta requires alpha.
MINI_WORKSPACE = """
[phase]
id = "t1"
title = "test phase"

[[items]]
id = "alpha"
title = "first deliverable"
how = "make alpha"

[[items]]
id = "beta"
title = "second deliverable"
how = "make beta"
requires = ["alpha"]
"""

# Two DoD checks for MINI_WORKSPACE; each body is filled in by the test (``pass`` means done).
CHECKS = """
import pytest
import pytest_distcheck

@pytest.mark.local
@pytest.mark.dod("alpha")
def test_alpha():
    {alpha}

@pytest.mark.dod("beta")
def test_beta():
    {beta}
"""


def unshipped(phase: str = "t1") -> str:
    """What the gate's last line adds for a phase the kit ships no DoD for (the kit's test phases), done or not."""
    return (f"; no DoD shipped with the kit for phase {phase}; --gate only vouches for phases whose DoD ships with "
            "the kit: 35")


def unverified(done: int, total: int, phase: str = "t1") -> str:
    """The gate's last line when every item is done but the kit ships no DoD for ``phase`` (the kit's test
    phases): never PASSED, and the run fails (red-team R6)."""
    return f"gate: UNVERIFIED ({done}/{total} items done{unshipped(phase)})"


def write_checks(pytester: pytest.Pytester, alpha: str = "pass", beta: str = "pass") -> None:
    """Put the two checks in checks/, beside the workspace file, where the gate trusts them."""
    pytester.makepyfile(**{"checks/test_checks": CHECKS.format(alpha=alpha, beta=beta)})


def gate_run(pytester: pytest.Pytester, *args: str, report: str = "report.json",
             markdown: str | None = None, invoked_in: str = "") -> pytest.RunResult:
    """The gate's own pytest session (:func:`pytest_distcheck.dod.gate.pytest_args`) on the commit of everything in
    ``pytester.path`` (committed first), run in this process: what ``distcheck gate`` runs after its re-exec, for the
    tests of what the gate decides. ``args`` are added (the real gate takes none of the learner's); the JSON report
    goes to ``pytester.path / report`` (``result.report``). With ``invoked_in`` (the subfolder the gate started in)
    it runs in the snapshot's folder, as the real gate does."""
    from contextlib import chdir, nullcontext

    from pytest_distcheck.dod import gate, snapshot

    git_commit_all(pytester.path)
    with snapshot.export(pytester.path) as snap:
        argv = gate.pytest_args(snap, "checks/distcheck.toml", str(pytester.path / report),
                                str(pytester.path / markdown) if markdown else None, "no", invoked_in)
        plugin = argv.index("pytest_distcheck.plugin")  # registered already in this process (its entry point)
        del argv[plugin - 1:plugin + 1]
        sep = argv.index("--")
        with chdir(snap.folder) if invoked_in else nullcontext():
            result = pytester.runpytest(*argv[:sep], *args, *argv[sep:])
    result.report = pytester.path / report
    return result


def workflow_steps() -> dict[str, dict]:
    """The example workflow's named steps, over all its jobs."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return {s["name"]: s for job in jobs.values() for s in job["steps"] if s.get("name")}


def workflow_verdict() -> str:
    """The jq expression of the workflow's verdict step."""
    run = workflow_steps()["Check the report's verdict"]["run"]
    return run.split("'")[1]


def workflow_accepts(report: Path) -> bool:
    """Whether the workflow's verdict step passes on ``report`` (missing: it fails)."""
    if not report.is_file():
        return False
    jq = shutil.which("jq")
    if jq is None:
        doc = json.loads(report.read_text())
        items = doc.get("items") or []
        return bool(doc["gate"]["passed"] and doc["gate"]["verdict"] == "passed" and doc["gate"].get("commit")
                    and (doc["canonical"] or {}).get("trusted") and items
                    and doc["summary"]["done"] == doc["summary"]["total"] == len(items)
                    and all(it["state"] == "done" and set(it.get("flags") or []) <= {"confirmed", "self-reported"}
                            and all(e.get("copied") is None for e in it.get("evidence") or []) for it in items))
    return subprocess.run([jq, "-e", workflow_verdict(), str(report)], capture_output=True).returncode == 0
