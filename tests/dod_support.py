"""DoD checks that the gate, table and report tests put beside the workspace of tests/conftest.py."""

from __future__ import annotations

import pytest

# Two DoD checks for MINI_WORKSPACE; each body is filled in by the test (``pass`` means done).
CHECKS = """
import pytest
import pytest_distcheck

@pytest.mark.local
@pytest.mark.dod("alpha")
def test_alpha():
    {alpha}

@pytest.mark.dod("beta")
def test_beta():
    {beta}
"""


def write_checks(pytester: pytest.Pytester, alpha: str = "pass", beta: str = "pass") -> None:
    """Put the two checks in checks/, beside the workspace file, where the gate trusts them."""
    pytester.makepyfile(**{"checks/test_checks": CHECKS.format(alpha=alpha, beta=beta)})
