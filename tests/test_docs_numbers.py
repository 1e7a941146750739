"""Every number the theory, lab and manual (docs/kit/) pages compute is recomputed here, so the pages and the
calculators cannot drift apart (issue 21).

A page shows where a number comes from in one of three ways, each re-run in-process:
- a doctest (```python >>> ...```) calling `pytest_distcheck.calc`;
- a ```console block opening with `$ distcheck ...`, whose whole output must match the command's;
- an inline line "`$ distcheck ARGS` → `VALUE`, `VALUE`" whose values must appear in the command's output.
"""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

from pytest_distcheck.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = (sorted((ROOT / "docs" / "theory").glob("*.md")) + sorted((ROOT / "docs" / "lab").glob("*.md"))
         + sorted((ROOT / "docs" / "kit").glob("*.md")))
IDS = [f"{p.parent.name}/{p.name}" for p in PAGES]

CONSOLE = re.compile(r"```console\n\$ (distcheck [^\n]*)\n(.*?)```", re.S)
INLINE = re.compile(r"`\$ (distcheck [^`]+)` → ((?:`[^`]+`(?:, | and )?)+)")
VALUE = re.compile(r"`([^`]+)`")


def _run(command: str, capsys) -> str:
    capsys.readouterr()
    main(shlex.split(command)[1:])
    return capsys.readouterr().out


def inline_markers(text: str) -> list[tuple[str, list[str]]]:
    """(command, values) of each "`$ distcheck ...` → `v`, `v`" line of a page."""
    return [(m.group(1), VALUE.findall(m.group(2))) for m in INLINE.finditer(text)]


def test_every_theory_page_reproduces_its_numbers():
    """Each theory page carries at least one re-run example (doctest, console block or inline marker)."""
    bare = [p.name for p in PAGES if p.parent.name == "theory"
            and ">>> " not in (t := p.read_text()) and not CONSOLE.search(t) and not INLINE.search(t)]
    assert not bare, f"theory pages with no reproducible number: {bare}"


@pytest.mark.parametrize("page", [p for p in PAGES if ">>> " in p.read_text()],
                         ids=[i for p, i in zip(PAGES, IDS, strict=True) if ">>> " in p.read_text()])
def test_doctests_in_the_page(page):
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{page.name}: {result.failed} example(s) no longer match the calculators"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_console_blocks_match_the_command_output(page, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    for command, expected in CONSOLE.findall(page.read_text()):
        out = _run(command, capsys)
        assert [line.rstrip() for line in out.splitlines()] == [
            line.rstrip() for line in expected.rstrip("\n").splitlines()], f"{page.name}: {command}"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_inline_numbers_match_the_command_output(page, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)  # prices from the shipped table, never live
    monkeypatch.chdir(ROOT)
    for command, values in inline_markers(page.read_text()):
        out = " ".join(_run(command, capsys).split())
        missing = [v for v in values if " ".join(v.split()) not in out]
        assert not missing, f"{page.name}: `{command}` no longer prints {missing}"


def test_inline_marker_parsing_and_a_drifted_value_fails(capsys):
    """The marker is read as written, and a value the command does not print is reported."""
    text = "see `$ distcheck bubble -p 4 -m 8` → `0.375`, `3/8` here"
    assert inline_markers(text) == [("distcheck bubble -p 4 -m 8", ["0.375", "3/8"])]
    out = " ".join(_run("distcheck bubble -p 4 -m 8", capsys).split())
    assert "0.375" in out and "3/8" in out
    assert "0.4375" not in out
