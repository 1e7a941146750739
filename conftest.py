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
    sys.stderr.write(
        f"ERROR: pytest-distcheck: this Python ({sys.executable}) lacks the kit (pytest-distcheck): this pytest is "
        "not the kit's. Activate the venv you installed the kit in (the README's: source "
        f"{os.path.normpath(os.path.join(os.path.relpath(os.path.dirname(__file__)), '.venv/bin/activate'))}) or run "
        "its pytest; to use this Python instead: "
        f"{sys.executable} -m pip install '/path/to/pytest-distcheck[notes,gpu]'\n")
    raise SystemExit(4)  # pytest's exit code for a usage error
from pytest_distcheck.deps import missing_dependencies, missing_message  # noqa: E402

missing = missing_dependencies()
if missing:
    sys.stderr.write(f"ERROR: {missing_message(missing, os.path.dirname(__file__))}\n")
    raise SystemExit(4)
