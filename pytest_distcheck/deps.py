"""Is the kit running in a Python that has its dependencies?

A ``pytest`` from outside the kit's virtual environment can still load the plugin (the repository's
``pythonpath = .`` puts its ``pytest_distcheck.egg-info`` entry point in reach); it must then stop with
one line that says so, not with an INTERNALERROR at the first missing import.
"""

from __future__ import annotations

import importlib.metadata
import sys

DIST = "pytest-distcheck"


def missing_dependencies(requires: list[str] | None = None) -> list[str]:
    """Names of the kit's required distributions (no extras) not installed in this Python.

    Args:
        requires: requirement strings (default: the installed metadata's ``Requires-Dist``).
    """
    from packaging.requirements import Requirement

    if requires is None:
        try:
            requires = importlib.metadata.requires(DIST) or []
        except importlib.metadata.PackageNotFoundError:
            return []
    missing = []
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement
        try:
            importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(req.name)
    return missing


def missing_message(missing: list[str]) -> str:
    """What to do when :func:`missing_dependencies` found some."""
    return (f"pytest-distcheck: this Python ({sys.executable}) lacks the kit's dependencies "
            f"{', '.join(missing)}: this pytest is not the kit's. Activate the kit's venv "
            f"(source .venv/bin/activate) or run .venv/bin/pytest; to use this Python instead: "
            f"{sys.executable} -m pip install -e '.[notes,gpu]'")
