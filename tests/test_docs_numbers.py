"""Every number the theory, lab and manual (docs/kit/) pages compute is recomputed here, so the pages and the
calculators cannot drift apart (issue 21).

How each kind of example (doctest, console block, inline marker) is re-run: tests/docs_support.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import CONSOLE, INLINE, console_mismatches, doctest_failures, inline_markers, inline_mismatches
from docs_support import run_command as _run

ROOT = Path(__file__).resolve().parents[1]
PAGES = (sorted((ROOT / "docs" / "theory").glob("*.md")) + sorted((ROOT / "docs" / "lab").glob("*.md"))
         + sorted((ROOT / "docs" / "kit").glob("*.md")))
IDS = [f"{p.parent.name}/{p.name}" for p in PAGES]


def test_every_theory_page_reproduces_its_numbers():
    """Each theory page carries at least one re-run example (doctest, console block or inline marker)."""
    bare = [p.name for p in PAGES if p.parent.name == "theory"
            and ">>> " not in (t := p.read_text()) and not CONSOLE.search(t) and not INLINE.search(t)]
    assert not bare, f"theory pages with no reproducible number: {bare}"


@pytest.mark.parametrize("page", [p for p in PAGES if ">>> " in p.read_text()],
                         ids=[i for p, i in zip(PAGES, IDS, strict=True) if ">>> " in p.read_text()])
def test_doctests_in_the_page(page):
    attempted, failed = doctest_failures(page)
    assert attempted > 0
    assert failed == 0, f"{page.name}: {failed} example(s) no longer match the calculators"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_console_blocks_match_the_command_output(page, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    assert console_mismatches(page.read_text(), capsys) == [], page.name


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_inline_numbers_match_the_command_output(page, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)  # prices from the shipped table, never live
    monkeypatch.chdir(ROOT)
    assert inline_mismatches(page.read_text(), capsys) == [], page.name


def test_inline_marker_parsing_and_a_drifted_value_fails(capsys):
    """The marker is read as written, and a value the command does not print is reported."""
    text = "see `$ distcheck bubble -p 4 -m 8` → `0.375`, `3/8` here"
    assert inline_markers(text) == [("distcheck bubble -p 4 -m 8", ["0.375", "3/8"])]
    out = " ".join(_run("distcheck bubble -p 4 -m 8", capsys).split())
    assert "0.375" in out and "3/8" in out
    assert "0.4375" not in out
    assert inline_mismatches(text.replace("0.375", "0.4375"), capsys) == [
        "`distcheck bubble -p 4 -m 8` no longer prints ['0.4375']"]
