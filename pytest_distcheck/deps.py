"""Is the kit running in a Python that has its dependencies?

A ``pytest`` from outside the kit's virtual environment can still load the plugin (the repository's
``pythonpath = .`` puts its ``pytest_distcheck.egg-info`` entry point in reach); it must then stop with
one line that says so, not with an INTERNALERROR at the first missing import.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import sys
from pathlib import Path

from pytest_distcheck.i18n import N_

DIST = "pytest-distcheck"
MISSING = N_("pytest-distcheck: this Python ({python}) lacks the kit's dependencies {missing}: this pytest is not the "
             "kit's. Activate the venv you installed the kit in (the README's: source {activate}) or run its pytest; "
             "to use this Python instead: {python} -m pip install torch==2.13.0 -e {target}")


def missing_dependencies(requires: list[str] | None = None, extra: str = "") -> list[str]:
    """Names of the kit's required distributions not installed in this Python: those of no extra, or,
    with ``extra``, those the extra adds.

    Args:
        requires: requirement strings (default: the installed metadata's ``Requires-Dist``).
        extra: an extra's name (``"gpu"``), or ``""`` for the plain requirements.
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
        in_extra = req.marker is not None and req.marker.evaluate({"extra": extra}) if extra else False
        if (extra and not in_extra) or (not extra and req.marker is not None
                                        and not req.marker.evaluate({"extra": ""})):
            continue
        # finding its dist-info is enough; reading a METADATA file (version()) costs milliseconds each
        if next(iter(importlib.metadata.distributions(name=req.name)), None) is None:
            missing.append(req.name)
    return missing


def missing_message(missing: list[str], root: str | Path = ".") -> str:
    """What to do when :func:`missing_dependencies` found some; ``root``: the kit's checkout (the README's venv
    is ``root/.venv``), said from the current folder."""
    from pytest_distcheck.i18n import _

    up = os.path.relpath(root)
    venv = ".venv" if up == "." else f"{up}/.venv"
    return _(MISSING).format(python=sys.executable, missing=", ".join(missing),
                             activate=shlex.quote(venv + "/bin/activate"), target=shlex.quote(up + "[notes,gpu]"))


def missing_extra_message(extra: str, missing: list[str]) -> str:
    """The one line for a paid test whose extra is not installed: what is missing and the install line."""
    return (f"the `{extra}` extra of pytest-distcheck is not installed in this Python (missing: "
            f"{', '.join(missing)}); install it with: {sys.executable} -m pip install -e '.[{extra}]' "
            f"(or pip install 'pytest-distcheck[{extra}]')")
