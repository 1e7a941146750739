"""The theory pages' worked examples are the calculators' numbers: their doctests and `distcheck` outputs re-run."""

import doctest
import re
import shlex
from pathlib import Path

import pytest

from pytest_distcheck.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "theory"
PAGES = ["00-motivation.md", "01-data-parallel-and-zero.md", "03-collectives-and-cost.md"]
CONSOLE = re.compile(r"```console\n\$ (distcheck [^\n]*)\n(.*?)```", re.S)


@pytest.mark.parametrize("page", PAGES)
def test_doctests_in_the_page(page):
    result = doctest.testfile(str(DOCS / page), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{page}: {result.failed} example(s) no longer match the calculators"


def test_console_blocks_match_the_command_output(capsys):
    blocks = [b for page in PAGES for b in CONSOLE.findall((DOCS / page).read_text())]
    assert len(blocks) >= 2
    for command, expected in blocks:
        main(shlex.split(command)[1:])
        out = capsys.readouterr().out
        assert [line.rstrip() for line in out.splitlines()] == [
            line.rstrip() for line in expected.rstrip("\n").splitlines()], command
