"""A workspace's conftest.py (distcheck init writes this one). A pytest that has not loaded the kit
(pytest-distcheck), or loaded it without its dependencies (from outside the venv, through this folder's
egg-info), stops here with one line instead of an error about an option or a module it does not know.
Nothing else: the gate (pytest --gate) checks in a process that never loads this file, and trusts no DoD
check that takes a fixture from it (docs/ci/gate.md)."""

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
    sys.stderr.write("ERROR: " + line.format(python=sys.executable, activate=activate) + "\n")
    raise SystemExit(4)  # pytest's exit code for a usage error
from pytest_distcheck.deps import missing_dependencies, missing_message  # noqa: E402

missing = missing_dependencies()
if missing:
    sys.stderr.write(f"ERROR: {missing_message(missing, os.path.dirname(__file__))}\n")
    raise SystemExit(4)
