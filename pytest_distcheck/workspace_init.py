"""``distcheck init``: lay out a fresh phase workspace from the phase pack, never overwriting.

Writes, relative to the destination: every file of the phase pack (:mod:`pytest_distcheck.phase_pack`), byte for
byte; an empty spend ledger at the pack's ``[budget] ledger`` (kept if it exists); the lines of
:data:`GITIGNORE_LINES` missing from ``.gitignore``; :data:`CONFTEST` when the folder has no ``conftest.py``; and a
``pytest.ini`` (:func:`pytest_ini`) when it has no pytest configuration (else :data:`CONFIG_HINT` says what to add).
A file there with other contents stops it before anything is written. Design record: docs/design/workspace.md.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.phase_pack import pack_files, pack_root

GITIGNORE_LINES = ("/.distcheck/", ".venv/", "__pycache__/", "*.pyc", ".pytest_cache/")
# Runs under any pytest, kit or not, so it imports the kit only once the kit's plugin is known to be loaded.
CONFTEST = """\
\"\"\"A workspace's conftest.py (distcheck init writes this one). A pytest that has not loaded the kit
(pytest-distcheck), or loaded it without its dependencies (from outside the venv, through this folder's
egg-info), stops here with one line instead of an error about an option or a module it does not know.
Nothing else: the gate (pytest --gate) checks in a process that never loads this file, and trusts no DoD
check that takes a fixture from it (docs/ci/gate.md).\"\"\"

import os
import sys

# At import, not in a hook: an ini file's addopts (--dist) fails pytest's argument parsing before any hook.
# The kit's entry point (or -p pytest_distcheck.plugin) has imported its plugin by now, when installed.
if "pytest_distcheck.plugin" not in sys.modules:
    import shlex

    here = os.path.dirname(os.path.abspath(__file__))
    venvs = sorted((n for n in os.listdir(here) if os.path.isfile(os.path.join(here, n, "pyvenv.cfg"))),
                   key=lambda n: (n != ".venv", n))  # the README's .venv first
    activate = (shlex.quote(os.path.relpath(os.path.join(here, venvs[0], "bin", "activate"))) if venvs
                else "PATH/TO/VENV/bin/activate")
    # Without the kit there is no catalog: its two languages are here, chosen as the kit would (DISTCHECK_LANG,
    # the distcheck_lang that distcheck init --lang wrote in pytest.ini, the locale).
    import configparser

    ini = configparser.ConfigParser(interpolation=None)
    try:
        ini.read(os.path.join(here, "pytest.ini"), encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        pass
    lang = os.environ.get("DISTCHECK_LANG") or ini.get("pytest", "distcheck_lang", fallback="") or next(
        (os.environ[v] for v in ("LC_ALL", "LC_MESSAGES", "LANG") if os.environ.get(v)), "")
    line = ("pytest-distcheck: a este Python ({python}) le falta el kit (pytest-distcheck): este pytest no es el del "
            "kit. Activa el venv en el que instalaste el kit (source {activate}) o ejecuta su pytest; para usar este "
            "Python: {python} -m pip install '/ruta/a/pytest-distcheck[notes,gpu]'"
            if lang.strip().lower().startswith("es") else
            "pytest-distcheck: this Python ({python}) lacks the kit (pytest-distcheck): this pytest is not the kit's. "
            "Activate the venv you installed the kit in (source {activate}) or run its pytest; to use this Python "
            "instead: {python} -m pip install '/path/to/pytest-distcheck[notes,gpu]'")
    sys.stderr.write("ERROR: " + line.format(python=sys.executable, activate=activate) + "\\n")
    raise SystemExit(4)  # pytest's exit code for a usage error
from pytest_distcheck.deps import missing_dependencies, missing_message  # noqa: E402

missing = missing_dependencies()
if missing:
    sys.stderr.write(f"ERROR: {missing_message(missing, os.path.dirname(__file__))}\\n")
    raise SystemExit(4)
"""
PYTEST_INI = """\
[pytest]
# Written by distcheck init: `pytest` here runs the phase's DoD checks (checks/); the labs' code
# (experiments/) imports from this folder.
testpaths = checks
pythonpath = .
addopts = --strict-markers
"""
# Appended to PYTEST_INI by `distcheck init --lang LANG`.
PYTEST_INI_LANG = """\
# distcheck init --lang {lang}: the kit speaks this language here (pytest --lang or DISTCHECK_LANG overrides it).
distcheck_lang = {lang}
"""
# When the folder configures pytest already: what to add there ({lang_hint}: LANG_HINT, or "" without --lang).
CONFIG_HINT = N_("{config} configures pytest here: add testpaths = [\"checks\"] and pythonpath = [\".\"] to it so "
                 "`pytest` runs the checks{lang_hint}")
LANG_HINT = N_(", and distcheck_lang = \"{lang}\" so the kit speaks that language here")
# (file, the section that holds pytest's settings in it): pytest reads the first it finds.
PYTEST_CONFIGS = (("pytest.ini", ""), ("pyproject.toml", "[tool.pytest"), ("tox.ini", "[pytest]"),
                  ("setup.cfg", "[tool:pytest]"))


@dataclass
class InitReport:
    """What :func:`init_workspace` did (or would not do), as paths relative to the destination.

    Attributes:
        written: files created (or, for ``.gitignore``, appended to).
        kept: files already there with the same contents (or the learner's own ledger).
        conflicts: files there with other contents; when any, nothing was written.
        pytest_config_hint: what to add to an existing pytest configuration, or ``""``.
    """

    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    pytest_config_hint: str = ""


def _empty_ledger(workspace_file: Path) -> tuple[str, str]:
    """(the ledger's path from ``[budget]``, an empty ledger: title, rule, column header)."""
    from pytest_distcheck.budget.ledger import header_lines

    raw = tomllib.loads(workspace_file.read_text(encoding="utf-8"))
    rel = raw["budget"]["ledger"]
    text = (f"# Phase {raw['phase']['id']} cloud spend ledger\n\n"
            "Append-only: the kit adds rows; never edit or remove one. `distcheck budget` shows the totals.\n\n"
            + "\n".join(header_lines()) + "\n")
    return rel, text


def _pytest_config(dest: Path) -> str | None:
    """The file in ``dest`` that configures pytest, or ``None``."""
    for name, section in PYTEST_CONFIGS:
        path = dest / name
        if path.is_file() and (not section or section in path.read_text(encoding="utf-8", errors="replace")):
            return name
    return None


def configured_lang(root: Path) -> str:
    """The ``distcheck_lang`` that the pytest configuration in ``root`` sets (the file pytest reads there, as
    :func:`_pytest_config` finds it), else ``""``: so the ``distcheck`` commands in a workspace speak as its
    ``pytest`` does. A file that cannot be parsed sets nothing here (pytest names its own errors)."""
    import configparser

    name = _pytest_config(Path(root))
    if name is None:
        return ""
    path = Path(root) / name
    try:
        if name == "pyproject.toml":
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("pytest", {})
            return str(table.get("ini_options", {}).get("distcheck_lang", "")).strip()
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return ""
    section = dict(PYTEST_CONFIGS)[name].strip("[]") or "pytest"
    return parser.get(section, "distcheck_lang", fallback="").strip()


def pytest_ini(lang: str | None = None) -> str:
    """The ``pytest.ini`` init writes: :data:`PYTEST_INI`, and with ``lang`` the ini key ``distcheck_lang``."""
    return PYTEST_INI + (PYTEST_INI_LANG.format(lang=lang) if lang else "")


def _init_inis(lang: str | None) -> set[str]:
    """The pytest.ini files init writes that count as this one: with ``lang``, that language's; without, any
    (init again without ``--lang`` keeps the language the workspace was made with)."""
    from pytest_distcheck.i18n import SUPPORTED

    return {pytest_ini(lang)} if lang else {pytest_ini(None), *map(pytest_ini, SUPPORTED)}


def init_workspace(dest: Path, lang: str | None = None) -> InitReport:
    """Create a phase workspace in ``dest`` (created if missing). Idempotent; never overwrites.

    ``lang`` (one of :data:`pytest_distcheck.i18n.SUPPORTED`, or ``None``): the language the kit speaks in the
    new workspace, set in the ``pytest.ini`` it writes (``None``: each run's own setting, as everywhere).

    Raises:
        DistcheckError: the kit was installed without its phase pack.
        OSError: a file could not be written.
    """
    dest = Path(dest)
    root = pack_root()
    report = InitReport()
    planned: dict[str, bytes] = {rel: (root / rel).read_bytes() for rel in pack_files(root)}
    for rel, data in planned.items():
        target = dest / rel
        if target.exists():
            (report.kept if target.is_file() and target.read_bytes() == data else report.conflicts).append(rel)
    if report.conflicts:
        return report
    ledger_rel, ledger_text = _empty_ledger(root / "checks" / "distcheck.toml")
    config = _pytest_config(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for rel, data in planned.items():
        if rel not in report.kept:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
            report.written.append(rel)
    if (dest / ledger_rel).exists():
        report.kept.append(ledger_rel)
    else:
        (dest / ledger_rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / ledger_rel).write_text(ledger_text, encoding="utf-8")
        report.written.append(ledger_rel)
    _add_gitignore(dest / ".gitignore", report)
    if (dest / "conftest.py").exists():
        report.kept.append("conftest.py")
    else:
        (dest / "conftest.py").write_text(CONFTEST, encoding="utf-8")
        report.written.append("conftest.py")
    ini = pytest_ini(lang)
    if config is None:
        (dest / "pytest.ini").write_text(ini, encoding="utf-8")
        report.written.append("pytest.ini")
    elif config == "pytest.ini" and (dest / "pytest.ini").read_text(encoding="utf-8") in _init_inis(lang):
        report.kept.append("pytest.ini")
    else:
        report.pytest_config_hint = _(CONFIG_HINT).format(
            config=config, lang_hint=_(LANG_HINT).format(lang=lang) if lang else "")
    return report


def _add_gitignore(path: Path, report: InitReport) -> None:
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    # "/.venv", ".venv" and ".venv/" all ignore the venv folder at the top: any of them counts as there.
    have = {line.strip().strip("/") for line in old.splitlines()}
    missing = [line for line in GITIGNORE_LINES if line.strip("/") not in have]
    if not missing:
        report.kept.append(".gitignore")
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(("\n" if old and not old.endswith("\n") else "") + "\n".join(missing) + "\n")
    report.written.append(".gitignore")
