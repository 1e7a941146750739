"""The package's docstrings are contracts: no module docstring over 15 lines, no attempt id in the code.

A design record lives in docs/design/; a guard is named by the behaviour it keeps, never by the attempt that
found it ("red-team A09", "t4 A6", "R3"). Two kinds of id are names, not attempts: the strategy chooser's rule
ids (R0..R9, its decision table's own, printed by ``distcheck strategy --rules``) where the rules live, and the
GPU names the kit prices (A40).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest_distcheck
from pytest_distcheck.strategy.model import RULES

PACKAGE = Path(pytest_distcheck.__file__).resolve().parent
MAX_MODULE_DOCSTRING = 15  # lines, the quotes included
ATTEMPT_ID = re.compile(r"(?i:\bred[- ]team\b)|\bt\d+ [A-Z]\d+\b|\b[AR]\d{1,2}\b")
# Where the rule ids are the decision table's names.
RULE_HOMES = ("strategy/", "commands/strategy.py")


def _gpu_names() -> set[str]:
    prices = json.loads((PACKAGE / "data" / "prices.json").read_text(encoding="utf-8"))["prices"]
    return {word for p in prices for name in (p["gpu"], *p.get("aliases", ())) for word in name.split()}


def module_docstring_lines(source: str) -> int:
    """Lines of a module's docstring, the quotes included; 0 without one."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def attempt_ids(source: str, rel: str, names: set[str]) -> list[str]:
    """``rel:line: id`` for each attempt id in ``source`` (the package file ``rel``): a rule id outside
    :data:`RULE_HOMES` is one; a GPU name in ``names`` is not."""
    found = []
    for n, line in enumerate(source.splitlines(), 1):
        for m in ATTEMPT_ID.finditer(line):
            token = m.group()
            if token in names or (token in RULES and rel.startswith(RULE_HOMES)):
                continue
            found.append(f"{rel}:{n}: {token}")
    return found


def test_no_module_docstring_in_the_package_is_longer_than_15_lines():
    long = [f"{p.relative_to(PACKAGE)}: {n} lines" for p in sorted(PACKAGE.rglob("*.py"))
            if (n := module_docstring_lines(p.read_text(encoding="utf-8"))) > MAX_MODULE_DOCSTRING]
    assert not long, "move the design record to docs/design/<area>.md:\n" + "\n".join(long)


def test_no_attempt_id_appears_in_the_package():
    names = _gpu_names()
    found = [hit for p in sorted(PACKAGE.rglob("*.py"))
             for hit in attempt_ids(p.read_text(encoding="utf-8"), p.relative_to(PACKAGE).as_posix(), names)]
    assert not found, "name each guard by the behaviour it keeps:\n" + "\n".join(found)


def test_attempt_ids_are_told_from_rule_ids_and_gpu_names():
    names = _gpu_names()
    assert "A40" in names and set(RULES) >= {"R0", "R3", "R9"}
    code = "# a copy is untrusted (red-team R3)\nx = 1  # t4 A6\n# A09\nrule = 'R3'\ngpu = 'A40'\n"
    assert attempt_ids(code, "plugin.py", names) == ["plugin.py:1: red-team", "plugin.py:1: R3",
                                                     "plugin.py:2: t4 A6", "plugin.py:3: A09", "plugin.py:4: R3"]
    assert attempt_ids(code, "strategy/training.py", names) == [
        "strategy/training.py:1: red-team", "strategy/training.py:2: t4 A6", "strategy/training.py:3: A09"]
    assert module_docstring_lines('"""One.\n\nTwo.\n"""\nx = 1\n') == 4
    assert module_docstring_lines("x = 1\n") == 0
