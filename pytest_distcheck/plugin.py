"""pytest-distcheck's pytest plugin: options, ini keys, markers and fixtures. Wiring only.

Heavy modules (torch, runpod) are imported inside fixtures and hooks that need them, so that
``pytest --help`` stays fast and works without them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck.cmdline import subfolder_checks
from pytest_distcheck.dod.plugin import DodPlugin
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.ranks import DEFAULT_WORLD_SIZE
from pytest_distcheck.settings import LANG, TIMEOUT
from pytest_distcheck.workspace import DEFAULT_PATH, NO_WORKSPACE, display_path, get_workspace, workspace_label

# Each area of the kit owns its hooks, options and fixtures in a plugin module of its own.
pytest_plugins: list[str] = [
    "pytest_distcheck.dod.options",
    "pytest_distcheck.budget.plugin",
    "pytest_distcheck.pods.plugin",
    "pytest_distcheck.ranks.plugin",
    "pytest_distcheck.paid",
]

MARKERS = {
    "dod": "dod(item_id): the Definition-of-Done item this check covers",
}
# A course workspace's markers: registered and acted on only where a workspace file is found, so a project of
# its own keeps its own `gpu`, `local` and `budget` markers (no paid test runs without a workspace's budget).
WORKSPACE_MARKERS = {
    "local": "local: a free check that runs on this machine (pytest -m local)",
    "gpu": "gpu: needs GPUs and may cost money; runs only with --max-usd",
    "budget": "budget(usd): the most this test may spend, in USD",
}
# The checks folder a run started in a subfolder without paths collects instead (None: the usual paths).
SUBFOLDER_CHECKS = pytest.StashKey[list]()
# The report header's line: {where} names the workspace or is NO_WORKSPACE_FILE, {gate} GATE_ON or GATE_OFF
# (+ SUBFOLDER).
HEADER = N_("distcheck: backend gloo, world size {world_size} (default), timeout {timeout:g} s; {where}; {gate}")
NO_WORKSPACE_FILE = N_("no workspace file (checks/distcheck.toml is not in this folder or above)")
GATE_ON, GATE_OFF = N_("gate on"), N_("gate off")
SUBFOLDER = N_("; started in a subfolder without paths: collecting {path}")
# A second header line when this folder holds the kit's source but the kit that runs is another copy (the venv
# of another clone, an install of a release): its edits here would not run.
OTHER_KIT = N_("distcheck: the kit running is {kit}, not this folder's {here}")
NO_WORKSPACE_SKIP = N_("no workspace file {label!r}")
# pytest takes pytest.ini before pyproject.toml: a pytest.ini made for one key hides the repository's settings.
SHADOWED_PYPROJECT = N_("distcheck: pytest reads {ini} here, so pyproject.toml's [tool.pytest.ini_options] is not "
                        "read (its testpaths, distcheck_config...); put your keys in one of the two")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck", "pytest-distcheck: distributed PyTorch checks on a budget")
    group.addoption(
        "--gate",
        action="store_true",
        dest="distcheck_gate",
        default=False,
        help="fail the run unless every Definition-of-Done item of the workspace is done; the DoD checks run "
        "on the commit, in a process of its own (no conftest.py, plugins, ini file or -o of yours): distcheck gate",
    )
    group.addoption(
        "--workspace",
        dest="distcheck_workspace",
        metavar="FILE",
        default=None,
        help="the workspace file (DoD and settings) to check, e.g. checks/solutions.toml for the reference "
        "solutions (default: ini distcheck_config, else the nearest checks/distcheck.toml here or above)",
    )
    TIMEOUT.add(parser, group)
    LANG.add(parser, group)
    parser.addini(
        "distcheck_config",
        f"workspace file with the phase's DoD items and settings, relative to rootdir (default: the nearest "
        f"{DEFAULT_PATH} in the folder pytest starts in or above)",
        default="",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    from pytest_distcheck.cmdline import misread_option_paths
    from pytest_distcheck.i18n import LanguageError, use_from

    # The language first (command line, env, ini: all known by now), so every message of the run speaks it.
    try:
        use_from(getattr(early_config.known_args_namespace, LANG.dest, None), str(early_config.getini(LANG.ini)))
    except LanguageError as exc:
        raise pytest.UsageError(str(exc)) from None
    problem = misread_option_paths(early_config)
    if problem:
        raise pytest.UsageError(problem)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_distcheck.deps import missing_dependencies, missing_message

    missing = missing_dependencies()
    if missing:  # a pytest outside the kit's venv: one line, not an INTERNALERROR at the first import
        raise pytest.UsageError(missing_message(missing, config.rootpath))
    ws = get_workspace(config)
    for line in [*MARKERS.values(), *(WORKSPACE_MARKERS.values() if ws is not None else ())]:
        config.addinivalue_line("markers", line)
    ini = config.inipath
    if ini is not None and ini.name in ("pytest.ini", ".pytest.ini") and _has_pytest_section(
            ini.parent / "pyproject.toml"):  # a warning: shown under -q too, above what the lost settings cause
        config.issue_config_time_warning(pytest.PytestConfigWarning(_(SHADOWED_PYPROJECT).format(ini=ini.name)), 2)
    TIMEOUT.positive_float(config)  # a bad value is a usage error now, not at the first test
    config.pluginmanager.register(DodPlugin(config), "distcheck-dod")
    paths = subfolder_checks(config, ws.checks_dir, ws.root) if ws else None
    if paths:  # from a subfolder without tests of its own (or --gate/--dod): check the workspace
        config.args = paths
        config.stash[SUBFOLDER_CHECKS] = paths


def pytest_report_header(config: pytest.Config) -> list[str]:
    ws = get_workspace(config)
    if ws is None and not (TIMEOUT.given(config) or config.getoption("distcheck_gate")):
        return []  # a project of its own, with the defaults: nothing to say, as pytest-timeout with no timeout
    where = (ngettext("workspace {label} (phase {phase}, {n} DoD item)",
                      "workspace {label} (phase {phase}, {n} DoD items)", len(ws.items)).format(
        label=workspace_label(config), phase=ws.phase_id, n=len(ws.items)) if ws else _(NO_WORKSPACE_FILE))
    gate = _(GATE_ON) if config.getoption("distcheck_gate") else _(GATE_OFF)
    ws_paths = config.stash.get(SUBFOLDER_CHECKS, None)
    if ws_paths:
        gate += _(SUBFOLDER).format(path=display_path(Path(ws_paths[0]), config.rootpath))
    lines = [_(HEADER).format(world_size=DEFAULT_WORLD_SIZE, timeout=TIMEOUT.positive_float(config), where=where,
                              gate=gate)]
    kit, here = Path(__file__).resolve().parent, config.rootpath / "pytest_distcheck"
    # Not under the gate: its folder is a copy of the commit, never the kit that runs (the gate says which it is).
    if (here / "plugin.py").is_file() and kit != here.resolve() and not config.getoption("distcheck_gate"):
        lines.append(_(OTHER_KIT).format(kit=kit, here=display_path(here, config.rootpath)))
    return lines


def _has_pytest_section(pyproject: Path) -> bool:
    import tomllib

    try:
        return "ini_options" in tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("pytest", {})
    except (OSError, ValueError):
        return False


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    # `pytest -m local` outside any workspace: say why nothing was collected instead of a bare exit 5.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and get_workspace(config) is None:
        terminalreporter.write_line("distcheck: " + _(NO_WORKSPACE).format(start=config.invocation_params.dir),
                                    yellow=True)


@pytest.fixture(scope="session")
def distcheck_workspace(pytestconfig: pytest.Config):
    """The loaded workspace file (:class:`pytest_distcheck.workspace.Workspace`); skips if there is none."""
    ws = get_workspace(pytestconfig)
    if ws is None:
        pytest.skip(_(NO_WORKSPACE_SKIP).format(label=workspace_label(pytestconfig)))
    return ws


@pytest.fixture
def distcheck_log(record_property):
    """``distcheck_log(title, text)``: show ``text`` in the run's summary, above the DoD table.

    For what a check measured (a timing table, a score): printed even when the check passes and
    output is captured, and carried across pytest-xdist workers.
    """
    import json

    from pytest_distcheck.dod.plugin import LOG_PROPERTY

    def log(title: str, text: str) -> None:
        record_property(LOG_PROPERTY, json.dumps({"title": title, "text": text}))

    return log


@pytest.fixture
def distcheck_evidence(record_property, pytestconfig: pytest.Config):
    """``distcheck_evidence(*paths, flags=())``: name the files a DoD check judged, and how far they can be
    believed (``flags``: ``self-reported``, ``confirmed``, ``fast-quiz``, ...).

    Each existing file goes in the JSON report with its sha256, so a grader can re-verify a committed one
    against the commit (``git show COMMIT:./PATH``; a file the run made, such as the live DDP log, only the run
    had); a file that is a copy of a reference solution makes the check untrusted ("copied";
    :func:`pytest_distcheck.copies.copied_from`). Paths: absolute, or relative to the workspace root.
    """
    import json

    from pytest_distcheck.copies import evidence_entry
    from pytest_distcheck.dod.plugin import EVIDENCE_PROPERTY

    ws = get_workspace(pytestconfig)
    root = ws.root if ws is not None else pytestconfig.rootpath

    def record(*paths: str | Path, flags: tuple[str, ...] | list[str] = ()) -> None:
        record_property(EVIDENCE_PROPERTY, json.dumps(evidence_entry([root / p for p in paths], root, flags)))

    return record
