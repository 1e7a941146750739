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
