"""Helpers shared by the kit's own tests."""

from __future__ import annotations

import textwrap

import pytest

MINI_WORKSPACE = """
[phase]
id = "t1"
title = "test phase"

[[items]]
id = "alpha"
title = "first deliverable"
how = "make alpha"

[[items]]
id = "beta"
title = "second deliverable"
how = "make beta"
requires = ["alpha"]
"""


@pytest.fixture
def workspace_dir(pytester: pytest.Pytester):
    """A pytester folder with a two-item workspace file at the default place, checks/distcheck.toml."""
    pytester.mkdir("checks")
    (pytester.path / "checks" / "distcheck.toml").write_text(textwrap.dedent(MINI_WORKSPACE))
    return pytester


@pytest.fixture(autouse=True)
def _the_kit_speaks_english(monkeypatch):
    """The kit's tests check its English messages, so they speak English whatever this machine's locale
    (LANG=es_ES.UTF-8 makes the kit speak Spanish); a test of the language setting unsets DISTCHECK_LANG."""
    from pytest_distcheck import i18n

    monkeypatch.setenv("DISTCHECK_LANG", i18n.DEFAULT)
    i18n.use(i18n.DEFAULT)
