"""An honest learner is never refused by the gate (issue 26, point 4): a workspace `distcheck init` made, cloned
with Git for Windows' line endings into a path with spaces and non-ASCII letters, with the learner's own tests,
conftest.py and helper module in checks/, their own pytest settings and a virtual environment inside, judged by
`distcheck gate` started in a subfolder. Nothing is done, so it fails, but every item says what to do next:
none is untrusted or an error. The repository shapes themselves: tests/test_gate_snapshot.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_distcheck.dod import gate

OWN_TEST = """
from helpers import double

def test_double():
    assert double(2) == 4
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_an_honest_workspace_in_every_usual_shape_is_judged_not_refused(tmp_path):
    from pytest_distcheck.workspace_init import init_workspace

    origin = tmp_path / "origin"
    origin.mkdir()
    assert init_workspace(origin).conflicts == []
    (origin / "checks" / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef mine():\n    return 1\n")
    (origin / "checks" / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (origin / "checks" / "test_my_own.py").write_text(OWN_TEST)
    (origin / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-x --strict-markers -q"\n')
    _git(origin, "init", "-q")
    _git(origin, "add", "-A")
    _git(origin, "commit", "-qm", "start")
    clone = tmp_path / "my work, ñandú"
    _git(tmp_path, "-c", "core.autocrlf=true", "clone", "-q", str(origin), clone.name)
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "activate").write_text("# a virtual environment inside the workspace\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GIT_"))}
    run = subprocess.run([sys.executable, "-m", "pytest_distcheck.cli", "gate", "--dod-json", "r.json"],
                         cwd=clone / "docs", env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    assert run.stdout.startswith(gate.HEADER.split("{")[0])  # "distcheck gate: judging commit ..."
    report = json.loads((clone / "docs" / "r.json").read_text())
    assert report["canonical"]["trusted"], report["canonical"]["problems"]
    states = {it["id"]: it["state"] for it in report["items"]}
    assert not {"untrusted", "error", "broken"} & set(states.values()), states
    assert report["workspace"]["root"] == str(clone) and len(report["gate"]["commit"]) == 40
