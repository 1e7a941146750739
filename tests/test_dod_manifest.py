"""The canonical Phase 35 DoD shipped with the kit (pytest_distcheck/data/dod-35.json) and what it catches."""

from __future__ import annotations

import copy
import shutil
import tomllib
from pathlib import Path

import pytest

from pytest_distcheck.data import build
from pytest_distcheck.dod import manifest

REPO = Path(__file__).resolve().parents[1]
WS = REPO / "checks" / "distcheck.toml"


def test_the_shipped_manifest_is_up_to_date():
    assert manifest.shipped("35") == build.manifest(WS, REPO), (
        "pytest_distcheck/data/dod-35.json is out of date with checks/: regenerate it with "
        "`.venv/bin/python -m pytest_distcheck.data.build checks/distcheck.toml` (from the repository root)")


def test_it_records_items_checks_hashes_bank_and_kit_version():
    canon = manifest.shipped("35")
    assert [it["id"] for it in canon["items"]] == ["ddp-allreduce-logged", "tp-speedup-committed",
                                                  "reading-notes-cited", "spend-within-budget",
                                                  "tp-diagram-committed", "quiz-passed"]
    assert set(canon["check_files"]) >= {"checks/test_quiz_passed.py", "checks/test_ddp_allreduce_logged.py"}
    assert canon["quiz_bank"]["path"] == "checks/quiz/35.json"
    assert canon["kit_version"] and canon["workspace"] == "checks/distcheck.toml"
    assert manifest.shipped("t1") is None and manifest.shipped("../schemas/x") is None


def test_the_repository_workspace_is_trusted():
    raw = tomllib.loads(WS.read_text())
    result = manifest.compare(WS, REPO, raw, manifest.shipped("35"))
    assert result["problems"] == [] and result["trusted"]
    assert all(c["sha256"] == c["shipped"] for c in result["check_files"])


@pytest.fixture
def copy35(tmp_path):
    shutil.copytree(REPO / "checks", tmp_path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _problems(root: Path, raw: dict, ws: Path | None = None) -> list[str]:
    return manifest.compare(ws or root / "checks/distcheck.toml", root, raw, manifest.shipped("35"))["problems"]


def _raw():
    return copy.deepcopy(tomllib.loads(WS.read_text()))


def test_a_dropped_or_renamed_item_is_named(copy35):
    raw = _raw()
    raw["items"] = [it for it in raw["items"] if it["id"] != "tp-speedup-committed"]
    raw["items"][0]["id"] = "ddp-done"
    problems = _problems(copy35, raw)
    assert "item 'tp-speedup-committed' of the shipped DoD is missing" in problems
    assert "item 'ddp-allreduce-logged' of the shipped DoD is missing" in problems
    assert "items not in the shipped DoD: ddp-done" in problems


def test_other_registered_checks_are_named(copy35):
    raw = _raw()
    raw["items"][-1]["checks"] = ["checks/test_mine.py::test_quiz"]
    assert any(p.startswith("item 'quiz-passed' checks ['checks/test_mine.py::test_quiz'] differ") for p in
               _problems(copy35, raw))


def test_an_edited_check_or_bank_is_named(copy35):
    (copy35 / "checks/test_quiz_passed.py").write_text("def test_quiz_passed():\n    pass\n")
    bank = copy35 / "checks/quiz/35.json"
    bank.write_text(bank.read_text().replace('"answer": "A"', '"answer": "B"', 1))
    problems = _problems(copy35, _raw())
    assert "check file checks/test_quiz_passed.py differs from the shipped one" in problems
    assert "quiz bank checks/quiz/35.json differs from the shipped one" in problems


def test_a_changed_setting_or_workspace_place_is_named(copy35):
    raw = _raw()
    raw["quiz"]["pass_mark"] = 0.1
    raw["budget"]["phase_ceiling_usd"] = 500.0
    raw["pods"]["gpu_type"] = "NVIDIA A40"  # a learner may rent another GPU
    problems = _problems(copy35, raw, ws=copy35 / "checks" / "mine.toml")
    assert "the workspace file is checks/mine.toml, the shipped DoD's is checks/distcheck.toml" in problems
    assert "[quiz] quiz.pass_mark is 0.1, the shipped DoD has 0.7" in problems
    assert "[budget] budget.phase_ceiling_usd is 500.0, the shipped DoD has 5.0" in problems
    assert not any("pods" in p for p in problems)


def test_the_shipped_fixture_fingerprints_are_up_to_date():
    from pytest_distcheck.dod import provenance

    shipped = provenance.shipped_fingerprints()
    assert shipped == build.kit_fingerprints(REPO), (
        "pytest_distcheck/data/kit-fixtures.json is out of date with fixtures/ or solutions/: regenerate it with "
        "`.venv/bin/python -m pytest_distcheck.data.build checks/distcheck.toml` (from the repository root)")
    assert "s0fixture-0001" in shipped["run_ids"]
