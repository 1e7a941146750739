"""The tamper suite (issue 13, point 5): every attempt of fixtures/tamper/attempts.toml to pass
`pytest --gate` with nothing done fails the gate or is reported untrusted, and its JSON report fails
the example workflow's verdict step (docs/ci/distcheck-gate.yml, evaluated with jq when installed).

The 8 attempts that passed before the isolated sub-session are tests/test_gate_bypasses.py. Each run
here is the learner's `pytest` in-process (pytester) plus the one sub-session process the kit starts.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from dod_support import workflow_accepts, write_checks

REPO = Path(__file__).resolve().parents[1]
ATTEMPTS = tomllib.loads((REPO / "fixtures" / "tamper" / "attempts.toml").read_text())["attempt"]


@pytest.fixture
def restored_kit():
    """Put back every attribute of the kit's modules after the test (attempts patch them at import)."""
    saved = {name: dict(vars(mod)) for name, mod in list(sys.modules.items())
             if mod is not None and name.startswith("pytest_distcheck")}
    yield
    for name, attrs in saved.items():
        mod = sys.modules.get(name)
        if mod is not None:
            vars(mod).clear()
            vars(mod).update(attrs)


def _workspace(pytester: pytest.Pytester, kind: str) -> None:
    if kind == "phase35":
        shutil.copytree(REPO / "checks", pytester.path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        from conftest import MINI_WORKSPACE

        (pytester.path / "checks").mkdir()
        (pytester.path / "checks" / "distcheck.toml").write_text(MINI_WORKSPACE)
        write_checks(pytester, alpha="pytest_distcheck.pending('no log yet')",
                     beta="pytest_distcheck.pending('no log yet')")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if text.startswith("DROP:"):  # remove one item's table from the workspace file
        item = text.removeprefix("DROP:")
        blocks = path.read_text().split("[[items]]")
        text = "[[items]]".join(b for b in blocks if f'id = "{item}"' not in b)
    elif text.startswith("REPLACE:"):
        old, new = text.removeprefix("REPLACE:").split("=>")
        text = path.read_text().replace(old, new)
    path.write_text(text)


def _run(pytester: pytest.Pytester, monkeypatch, attempts: list[dict]) -> tuple[pytest.RunResult, Path]:
    """One learner's `pytest --gate` with every attempt of ``attempts`` applied at once (their files written,
    conftest texts joined, variables set, arguments concatenated)."""
    _workspace(pytester, attempts[0].get("workspace", "mini"))
    files: dict[str, str] = {}
    for a in attempts:
        for rel, text in a.get("files", {}).items():
            files[rel] = files.get(rel, "") + text if rel.endswith("conftest.py") else text
    for rel, text in files.items():
        _write(pytester.path, rel, text)
    for a in attempts:
        for name, value in a.get("env", {}).items():
            monkeypatch.setenv(name, value)
    report = pytester.path / "dod-report.json"
    args = [arg for a in attempts for arg in a.get("args", [])]
    return pytester.runpytest("--gate", "--dod-json", str(report), *args), report


def _assert_fails(result: pytest.RunResult, report: Path, expect: str) -> None:
    out = result.stdout.str()
    assert "gate: PASSED" not in out, out
    assert not workflow_accepts(report), out
    if expect == "usage":
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        return
    if expect == "no-report":
        assert not report.exists()
        return
    assert result.ret != 0 and "gate: FAILED" in out, out
    doc = json.loads(report.read_text())
    assert doc["isolation"]["isolated"] and not doc["gate"]["passed"]
    if expect == "untrusted":
        assert "UNTRUSTED" in out and "the workspace is not the shipped DoD of phase 35" in out, out


def _kind(a: dict) -> str:
    if a.get("workspace") == "phase35" or a.get("expect") in ("usage", "no-report"):
        return "alone"
    return "together"


TOGETHER = [a for a in ATTEMPTS if _kind(a) == "together"]
ALONE = [a for a in ATTEMPTS if _kind(a) == "alone"]


@pytest.mark.parametrize("attempt", TOGETHER, ids=[a["name"] for a in TOGETHER])
def test_what_the_sub_session_shuts_out(attempt):
    """In-process and instant: each attempt's channel is one the launcher does not pass on."""
    from pytest_distcheck.dod import isolation

    args = attempt.get("args", [])
    assert isolation.ignored_args(["--gate", "--dod-json", "r.json", *args]) == args
    env = isolation.clean_env({**attempt.get("env", {}), "HOME": "/h"})
    assert env == {"HOME": "/h", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    argv = isolation.command(Path("/w"), Path("/t/distcheck-gate.ini"), ["checks/test_x.py::test_y"], None, None)
    assert {"-I", "--noconftest", "-c", "/t/distcheck-gate.ini"} <= set(argv)
    assert not args or f" {' '.join(args)} " not in f" {' '.join(argv)} "


def test_every_conftest_and_command_line_attempt_at_once_fails_the_gate(pytester, monkeypatch, restored_kit):
    """The cheap attempts together (one sub-session): all their conftests, ini, variables and arguments."""
    result, report = _run(pytester, monkeypatch, TOGETHER)
    _assert_fails(result, report, "failed")
    result.stdout.fnmatch_lines(["distcheck gate: the DoD checks of checks/distcheck.toml run in an isolated*; "
                                 "not passed on: *-k alpha -m not local --deselect*", "PENDING*alpha*no log yet"])


@pytest.mark.parametrize("attempt", ALONE, ids=[a["name"] for a in ALONE])
def test_the_attempt_fails_the_gate(pytester, monkeypatch, restored_kit, attempt):
    result, report = _run(pytester, monkeypatch, [attempt])
    _assert_fails(result, report, attempt.get("expect", "failed"))
