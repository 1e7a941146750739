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
             "kit's. Activate the venv you installed the kit in (source {activate}) or run its pytest; to use this "
             "Python instead: {python} -m pip install torch==2.13.0 -e {target}")
# A paid test, or a call to RunPod, in a Python without the extra it needs.
MISSING_EXTRA = N_("the `{extra}` extra of pytest-distcheck is not installed in this Python (missing: {missing}); "
                   "install it with: {python} -m pip install -e '.[{extra}]' "
                   "(or pip install 'pytest-distcheck[{extra}]')")
# The DoD table's line when this Python's venv is not activated: the printed commands are bare names.
NOT_ACTIVATED = N_("distcheck: this Python's venv is not activated, so the commands printed below (pytest, distcheck, "
                   "torchrun) are not its own; first: source {activate}")
# Where no venv is found at the kit's checkout (it may be anywhere): the part of the command a person fills in.
SOME_VENV = "PATH/TO/VENV/bin/activate"


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


def activate_script(root: str | Path = ".") -> str:
    """The ``activate`` of a venv at the top of ``root`` (a folder holding a ``pyvenv.cfg``; the README's
    ``.venv`` first), as a shell word from the current folder; :data:`SOME_VENV` when there is none (a venv
    outside the checkout). Never raises. conftest.py (:data:`~pytest_distcheck.workspace_init.CONFTEST`), which
    runs without the kit, finds it the same way."""
    try:
        venvs = sorted((d.name for d in Path(root).iterdir() if (d / "pyvenv.cfg").is_file()),
                       key=lambda n: (n != ".venv", n))
    except OSError:
        venvs = []
    return shlex.quote(os.path.relpath(Path(root, venvs[0], "bin", "activate"))) if venvs else SOME_VENV


def missing_message(missing: list[str], root: str | Path = ".") -> str:
    """What to do when :func:`missing_dependencies` found some; ``root``: the kit's checkout, said from the
    current folder, and where its venv is looked for (:func:`activate_script`)."""
    from pytest_distcheck.i18n import _

    up = os.path.relpath(root)
    return _(MISSING).format(python=sys.executable, missing=", ".join(missing), activate=activate_script(root),
                             target=shlex.quote(up + "[notes,gpu]"))


def missing_extra_message(extra: str, missing: list[str]) -> str:
    """The one line for a paid test (or a RunPod call) whose extra is not installed: what is missing and the
    install line, in the language in use."""
    from pytest_distcheck.i18n import _

    return _(MISSING_EXTRA).format(extra=extra, missing=", ".join(missing), python=sys.executable)


def extra_missing(extra: str) -> str:
    """:func:`missing_extra_message` for ``extra`` when a distribution it adds is not installed, else ``""``."""
    missing = missing_dependencies(extra=extra)
    return missing_extra_message(extra, missing) if missing else ""


def not_activated(cwd: str | Path, root: str | Path) -> str | None:
    """:data:`NOT_ACTIVATED` when this Python runs from a venv whose scripts are not what ``PATH`` finds (its
    ``pytest`` was started by its full path), else ``None``; the ``activate`` is named from ``cwd`` when the venv
    is inside ``root``, else by its absolute path. Never raises."""
    import shutil
    import sysconfig

    from pytest_distcheck.i18n import _

    scripts = Path(sysconfig.get_path("scripts"))
    activate, own = scripts / "activate", scripts / "distcheck"
    if sys.prefix == sys.base_prefix or not activate.is_file() or not own.is_file():
        return None
    found = shutil.which("distcheck")
    try:
        if found is not None and Path(found).resolve() == own.resolve():
            return None
        inside = Path(root).resolve() in activate.resolve().parents
    except OSError:
        return None
    shown = os.path.relpath(activate, cwd) if inside else str(activate)
    return _(NOT_ACTIVATED).format(activate=shlex.quote(shown))
