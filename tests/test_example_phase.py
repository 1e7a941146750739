"""docs/kit/example-phase/: the workspace of a phase of one's own that docs/kit/writing-checks.md shows, run
through its items' states, and the page's code blocks are its files as they are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "kit" / "example-phase"
PAGE = ROOT / "docs" / "kit" / "writing-checks.md"


def test_the_page_shows_the_example_s_files_as_they_are():
    blocks = {t.info: t.content for t in MarkdownIt("commonmark").parse(PAGE.read_text()) if t.type == "fence"}
    assert blocks["python"] == (EXAMPLE / "checks" / "test_results_committed.py").read_text()
    assert blocks["toml"] == (EXAMPLE / "checks" / "distcheck.toml").read_text()


@pytest.fixture
def example(pytester: pytest.Pytester) -> Path:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True)
    git_commit_all(pytester.path)
    return pytester.path


def _rows(pytester: pytest.Pytester) -> str:
    result = pytester.runpytest("-p", "no:cacheprovider")
    return "\n".join(line for line in result.outlines if line.split(" ", 1)[0] in {"DONE", "PENDING", "BLOCKED",
                                                                                 "BROKEN"} or "->" in line)


def test_the_example_goes_from_pending_to_done_and_its_wrong_evidence_is_broken(example, pytester):
    results = example / "experiments" / "results" / "bench.json"
    rows = _rows(pytester)
    assert "PENDING  results-committed  no results at experiments/results/bench.json" in rows
    assert "-> python bench.py --out experiments/results/bench.json" in rows  # the item's `how`
    assert "BLOCKED  report-written     blocked by results-committed (pending)" in rows
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({"bandwidth_gbps": 1.5}))
    assert ('-> git add experiments/results/bench.json && git commit -m "DoD evidence" -- '
            'experiments/results/bench.json') in _rows(pytester)
    (example / "docs").mkdir()
    (example / "docs" / "report.md").write_text("bandwidth: 1.5 GB/s\n")
    git_commit_all(example)
    rows = _rows(pytester)
    assert "DONE     results-committed  1.5 GB/s, committed" in rows
    assert "DONE     report-written     evidence checked" in rows
    results.write_text('{"bandwidth_gbps": 1.5,')
    (example / "docs" / "report.md").write_text("no numbers\n")
    git_commit_all(example)
    rows = _rows(pytester)
    assert ("BROKEN   results-committed  experiments/results/bench.json: expected JSON with a field "
            "bandwidth_gbps") in rows
    assert "BLOCKED  report-written     blocked by results-committed (broken)" in rows
    results.write_text(json.dumps({"bandwidth_gbps": "fast"}))
    git_commit_all(example)
    rows = _rows(pytester)
    assert ("BROKEN   results-committed  experiments/results/bench.json: bandwidth_gbps must be a positive number, "
            "found 'fast'") in rows
    results.write_text(json.dumps({"bandwidth_gbps": 2}))
    git_commit_all(example)
    assert "BROKEN   report-written     docs/report.md does not mention the bandwidth it measured" in _rows(pytester)


def test_cd_docs_and_pytest_collects_the_workspaces_checks_not_the_examples():
    """`cd docs && pytest -m local` (the kit manual's own example of a subfolder) must not collect the example
    phase's checks (a new user's walkthrough: 'no DoD item report-written', nothing ran, exit 4): pytest's
    norecursedirs leaves the example out, and so does the kit's look for a subfolder's own tests."""
    import tomllib

    from pytest_distcheck.cmdline import _holds_tests

    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert EXAMPLE.name in ini["norecursedirs"] and {"venv", ".*", "build"} <= set(ini["norecursedirs"])
    assert _holds_tests(ROOT / "docs", ["test_*.py"])  # the example's checks are there
    assert not _holds_tests(ROOT / "docs", ["test_*.py"], ini["norecursedirs"])
