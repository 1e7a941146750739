"""Paths in the workspace file stay inside its root unless the file says otherwise (issue 18): the
ledger, live logs and the diagram page are read and written by the kit."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_distcheck.budget.config import budget_config
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.workspace import load_workspace

BASE = """
{extra}
[phase]
id = "t"
title = "paths"

[[items]]
id = "a"
title = "a"
how = "a"

[budget]
ledger = "{ledger}"
phase_ceiling_usd = 5.0
"""


def workspace(tmp_path: Path, ledger: str, extra: str = ""):
    (tmp_path / "ws" / "checks").mkdir(parents=True)
    path = tmp_path / "ws" / "checks" / "distcheck.toml"
    path.write_text(textwrap.dedent(BASE.format(ledger=ledger, extra=extra)))
    return load_workspace(path)


@pytest.mark.parametrize("ledger", ["../../outside.md", "/etc/ledger.md", "experiments/../../x.md"])
def test_a_ledger_outside_the_root_is_refused_naming_the_field(tmp_path: Path, ledger: str):
    ws = workspace(tmp_path, ledger)
    with pytest.raises(ConfigError, match=r"budget\.ledger: .* is outside the workspace root") as exc:
        budget_config(ws)
    assert "allow_paths_outside_root = true" in str(exc.value)


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path):
    ws = workspace(tmp_path, "experiments/link/ledger.md")
    (tmp_path / "ws" / "experiments").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ws" / "experiments" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="outside the workspace root"):
        budget_config(ws)


def test_paths_inside_the_root_and_explicitly_allowed_ones_resolve(tmp_path: Path):
    assert budget_config(workspace(tmp_path, "experiments/ledger.md")).ledger == tmp_path / "ws" / "experiments" / \
        "ledger.md"
    ws = load_workspace(tmp_path / "ws" / "checks" / "distcheck.toml")
    with pytest.raises(ConfigError, match="ddp.live_log: '../live.json' is outside"):
        ws.resolve("../live.json", "ddp.live_log")


def test_the_file_may_allow_paths_outside_its_root(tmp_path: Path):
    ws = workspace(tmp_path, "../shared/ledger.md", extra="allow_paths_outside_root = true")
    assert budget_config(ws).ledger == tmp_path / "shared" / "ledger.md"
