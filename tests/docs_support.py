"""Re-running the numbers a page shows, shared by tests/test_docs_numbers.py and tests/test_docs_es_parity.py.

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

from markdown_it import MarkdownIt

from pytest_distcheck.cli import main

CONSOLE = re.compile(r"```console\n\$ (distcheck [^\n]*)\n(.*?)```", re.S)
INLINE = re.compile(r"`\$ (distcheck [^`]+)` →\s+((?:`[^`]+`(?:,\s+|\s+and\s+)?)+)")  # values may start a line
VALUE = re.compile(r"`([^`]+)`")


def run_command(command: str, capsys, lang: str | None = None) -> str:
    """The stdout of ``distcheck ARGS`` run in-process (``capsys``: pytest's fixture), with ``--lang lang`` when
    given (a Spanish page shows the output the command prints in Spanish)."""
    capsys.readouterr()
    main(shlex.split(command)[1:] + (["--lang", lang] if lang else []))
    return capsys.readouterr().out


def inline_markers(text: str) -> list[tuple[str, list[str]]]:
    """(command, values) of each "`$ distcheck ...` → `v`, `v`" line of a page."""
    return [(m.group(1), VALUE.findall(m.group(2))) for m in INLINE.finditer(text)]


def doctest_failures(page: Path) -> tuple[int, int]:
    """(examples attempted, examples failed) of the page's doctests, whitespace-normalised."""
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    return result.attempted, result.failed


def console_mismatches(text: str, capsys, lang: str | None = None) -> list[str]:
    """The commands of the page's ```console blocks whose output (under ``--lang lang``) is no longer the block's."""
    return [command for command, expected in CONSOLE.findall(text)
            if [line.rstrip() for line in run_command(command, capsys, lang).splitlines()]
            != [line.rstrip() for line in expected.rstrip("\n").splitlines()]]


def inline_mismatches(text: str, capsys, lang: str | None = None) -> list[str]:
    """"`command` no longer prints [values]" for each inline marker with a value the command does not print
    (under ``--lang lang``)."""
    problems = []
    for command, values in inline_markers(text):
        out = " ".join(run_command(command, capsys, lang).split())
        missing = [v for v in values if " ".join(v.split()) not in out]
        if missing:
            problems.append(f"`{command}` no longer prints {missing}")
    return problems


def headings(markdown: str) -> list[str]:
    """The text of every heading of a Markdown page (fenced code is not read as headings)."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
