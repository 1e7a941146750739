"""Checks of pytest's command line that the kit's options need.

pytest picks its rootdir (and so its ini file) before it loads plugins such as this one, so in
``pytest --dod-json /tmp/x/dod.json`` it cannot know that ``/tmp/x/dod.json`` belongs to an option:
once that file exists, it is read as a test path and the rootdir moves to ``/tmp/x`` (no ini file, no
workspace). The ``--dod-json=PATH`` form is never misread. :func:`misread_option_paths` notices the
other form when it moved the rootdir, so the run stops with that advice instead of checking nothing.
"""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _, ngettext

# The next step of the DoD table's one line when a run collected none of the DoD's checks (``pytest tests``)...
CHECK_IT = N_("`pytest -m local` checks it")
# ... and when that run started without paths in a subfolder holding tests of its own (``cd tests && pytest``).
FROM_THE_ROOT = N_("pytest started without paths in {here}/, a folder with test files of its own, so it collected "
                    "those; check the DoD from the workspace root: cd {up} && pytest -m local")
# A kit option's existing PATH written as two words moved pytest's rootdir ({given}: as written, {fixed}: with '=').
MISREAD_PATH = N_("{given}: pytest took the existing file for a test path and moved its rootdir to {rootdir} (it "
                  "reads paths before it knows plugins' options); write it with '=': {fixed}")
# -m names markers that are not registered, under --strict-markers: DID_YOU_MEAN_MARKER each, or SEE_MARKERS.
DID_YOU_MEAN_MARKER = N_("did you mean {close!r} for {name!r}?")
SEE_MARKERS = N_("see pytest --markers")
# The kit's options whose value is a path (pytest may take an existing one for a test path).
PATH_OPTIONS = ("--dod-json", "--dod-markdown", "--workspace")


def separate_path_values(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) for each of :data:`PATH_OPTIONS` written as two words (``--dod-json PATH``)."""
    return [(a, args[n + 1]) for n, a in enumerate(args[:-1]) if a in PATH_OPTIONS]


def _rootdir_without(config: Any) -> Path | None:
    """The rootdir pytest would pick from the paths left once the kit's options took their values;
    ``None`` when this pytest's ``determine_setup`` cannot be called as expected."""
    from _pytest.config.findpaths import determine_setup

    ns = config.known_args_namespace
    given = {"inifile": getattr(ns, "inifilename", None), "override_ini": getattr(ns, "override_ini", None),
             "args": list(getattr(ns, "file_or_dir", None) or []),
             "rootdir_cmd_arg": getattr(ns, "rootdir", None) or None, "invocation_dir": config.invocation_params.dir}
    accepted = inspect.signature(determine_setup).parameters
    try:
        return Path(determine_setup(**{k: v for k, v in given.items() if k in accepted})[0])
    except Exception:  # an internal of pytest: never fail a run because its signature changed
        return None


def misread_option_paths(config: Any) -> str | None:
    """A message when a kit option's existing PATH, written ``--option PATH``, moved pytest's rootdir;
    else ``None``.

    Args:
        config: the early ``pytest.Config`` (in ``pytest_load_initial_conftests``).
    """
    pairs = [(opt, val) for opt, val in separate_path_values(list(config.invocation_params.args))
             if (config.invocation_params.dir / val).exists()]
    if not pairs:
        return None
    right = _rootdir_without(config)
    if right is None or right.resolve() == Path(config.rootpath).resolve():
        return None
    given, fixed = as_written_and_fixed(pairs)
    return _(MISREAD_PATH).format(given=given, rootdir=config.rootpath, fixed=fixed)


def as_written_and_fixed(pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """``(option, path)`` pairs as written (``--dod-json PATH``) and in the form to paste instead
    (``--dod-json=PATH``), each quoted for a POSIX shell (a path with a space stays one word)."""
    return (" ".join(f"{o} {shlex.quote(v)}" for o, v in pairs),
            " ".join(shlex.quote(f"{o}={v}") for o, v in pairs))


def subfolder_checks(config: Any, checks_dir: Path, root: Path) -> list[str] | None:
    """What a run started without paths in a subfolder of the workspace should collect: the workspace's
    checks folder, as at the root (pytest's ``testpaths`` apply only there, so ``cd docs && pytest -m
    local`` would collect docs/, find nothing and exit 5). A DoD run (``--gate``, ``--dod``) always
    checks the workspace; any other run only when the subfolder holds no test file of its own (pytest's
    ``python_files``), so ``cd tests && pytest`` still runs those tests. ``None`` when the run named
    paths, was started at the root or outside the workspace, or keeps its subfolder.
    """
    import pytest

    if config.args_source is not pytest.Config.ArgsSource.INVOCATION_DIR:
        return None
    here, root = Path(config.invocation_params.dir).resolve(), Path(root).resolve()
    if here == root or root not in here.parents:
        return None
    dod_run = config.getoption("distcheck_gate") or config.getoption("distcheck_dod")
    if not dod_run and _holds_tests(here, list(config.getini("python_files")), list(config.getini("norecursedirs"))):
        return None
    return [str(checks_dir)]


def not_checked_next_step(config: Any, root: Path) -> str:
    """The next step for a run that collected none of the DoD's checks: :data:`FROM_THE_ROOT` when it started
    without paths in a subfolder of the workspace ``root`` (which :func:`subfolder_checks` left alone, as it
    holds tests), else :data:`CHECK_IT`."""
    import pytest

    from pytest_distcheck.workspace import way_to_root

    here, root = Path(config.invocation_params.dir).resolve(), Path(root).resolve()
    if config.args_source is pytest.Config.ArgsSource.INVOCATION_DIR and root in here.parents:
        return _(FROM_THE_ROOT).format(here=here.relative_to(root).as_posix(), up=way_to_root(root, here))
    return _(CHECK_IT)


def _holds_tests(folder: Path, patterns: list[str], skip: list[str] = ()) -> bool:
    """Whether ``folder`` or a folder under it (hidden ones, virtualenvs and those matching pytest's
    ``norecursedirs``, ``skip``, left out as pytest leaves them) holds a file that matches one of pytest's
    ``python_files`` patterns."""
    import fnmatch
    import os

    for _top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules", "venv")
                   and not any(fnmatch.fnmatch(d, pat) for pat in skip)]
        if any(fnmatch.fnmatch(f, pat) for f in files for pat in patterns):
            return True
    return False


def unknown_markers(markexpr: str, registered: list[str]) -> list[str]:
    """Marker names a ``-m`` expression uses that are not registered (ini ``markers`` lines).

    Args:
        markexpr: the ``-m`` expression, e.g. ``"local and not gpu"``.
        registered: the ini ``markers`` lines (``"name(args): help"``).
    """
    import re

    known = {re.match(r"[\w-]+", line.strip()).group(0) for line in registered if re.match(r"[\w-]+", line.strip())}
    names = re.findall(r"[A-Za-z_][\w]*", re.sub(r"\([^)]*\)", " ", markexpr))
    return [n for n in dict.fromkeys(names) if n not in {"and", "or", "not"} and n not in known]


def bad_markexpr(config: Any) -> str | None:
    """A message when ``-m`` names a marker that is not registered and markers are strict; else ``None``."""
    import difflib

    expr = getattr(config.option, "markexpr", "") or ""
    strict = bool(getattr(config.option, "strict_markers", False))
    for key in ("strict_markers", "strict"):
        try:
            strict = strict or bool(config.getini(key))
        except ValueError:  # no such ini key in this pytest
            pass
    if not expr or not strict:
        return None
    registered = config.getini("markers")
    unknown = unknown_markers(expr, registered)
    if not unknown:
        return None
    known = sorted({line.split(":", 1)[0].split("(", 1)[0].strip() for line in registered})
    hints = [_(DID_YOU_MEAN_MARKER).format(close=close[0], name=name) for name in unknown
             if (close := difflib.get_close_matches(name, known, n=1))]
    return ngettext("-m {expr!r} selects nothing: {names} is not a marker ({hints}); the DoD was not checked",
                    "-m {expr!r} selects nothing: {names} are not markers ({hints}); the DoD was not checked",
                    len(unknown)).format(expr=expr, names=", ".join(map(repr, unknown)),
                                         hints=" ".join(hints) or _(SEE_MARKERS))
