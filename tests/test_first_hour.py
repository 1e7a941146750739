"""The first hour of a new learner (issue 12): each stumble found on a fresh clone, kept as a test."""

from __future__ import annotations

import re
import shlex
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from dod_support import write_checks

from pytest_distcheck.cmdline import CHECK_IT, FROM_THE_ROOT, unknown_markers
from pytest_distcheck.deps import missing_dependencies
from pytest_distcheck.paid import NO_KEY_STEP, NO_KEY_WHY, NOTHING_PAID_RAN, SKIPPED_WHY
from pytest_distcheck.workspace import (
    DID_YOU_MEAN,
    NAME_ANOTHER,
    NAMED_MISSING,
    NO_WORKSPACE,
    THERE_ARE,
    missing_named,
)

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _bash_blocks(text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(1)) for m in re.finditer(r"```(?:bash)?\n(.*?)```", text, re.S)]


def test_the_readme_activates_the_venv_before_its_first_bare_command():
    activate = README.find("source .venv/bin/activate")
    assert activate != -1, "the README never says to activate the venv"
    bare = [pos for pos, block in _bash_blocks(README)
            if re.search(r"^(\$ )?(pytest|distcheck|torchrun) ", block, re.M)]
    assert bare and activate < bare[0], "a bare pytest/distcheck command comes before the venv is activated"
    assert README.count("source .venv/bin/activate") == 1  # stated once


def test_ci_runs_the_readme_s_test_command_and_both_install_steps_show_progress():
    """`.ci/run` calls the README's test command exactly; neither README command silences pip (`-q` made the
    install silent for about 9 minutes on a loaded machine)."""
    commands = [line for line in README.splitlines() if line.startswith("python3.11 -m venv .venv && ")]
    test = next(c for c in commands if "pytest tests" in c)
    assert test in (REPO / ".ci" / "run").read_text().splitlines()
    assert len(commands) == 2 and not [c for c in commands if re.search(r"pip install[^&]* (-q|--quiet)\b", c)]


def test_the_main_command_installs_the_paid_path_client():
    main = next(block for _, block in _bash_blocks(README) if "pytest -m local" in block and "pip install" in block)
    extras = re.search(r"-e '\.\[([\w,]+)\]'", main).group(1).split(",")
    assert "gpu" in extras and "torch==2.13.0" in main
    gpu = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert {re.split(r"[=<>]", r)[0] for r in gpu} >= {"runpod", "asyncssh"}


def test_missing_dependencies_reads_the_required_ones_only():
    requires = ["pytest>=8", "no-such-dist-for-distcheck>=1", "runpod==1.12.0; extra == 'gpu'"]
    assert missing_dependencies(requires) == ["no-such-dist-for-distcheck"]


def test_a_pytest_without_the_kit_s_dependencies_says_so_in_one_line(workspace_dir, monkeypatch):
    """A system pytest that finds the plugin (through the repo's egg-info) but not filelock: not an
    INTERNALERROR but a usage error naming the venv."""
    import pytest_distcheck.deps as deps

    monkeypatch.setattr(deps, "missing_dependencies", lambda: ["filelock"])
    write_checks(workspace_dir)
    (workspace_dir.path / "venv").mkdir()  # the venv under another name than the README's .venv
    (workspace_dir.path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-distcheck: this Python (*) lacks the kit's dependencies filelock: "
                                 "this pytest is not the kit's. Activate the venv you installed the kit in "
                                 "(source venv/bin/activate)*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_venv_started_by_its_full_path_says_its_commands_need_it_activated(workspace_dir, monkeypatch):
    """`.venv/bin/pytest -m local` without activating: the table's bare `distcheck ...` would run another copy
    (or none); the DoD table says to activate first (also under -q, which hides the header), naming the venv
    from where pytest started."""
    import shutil
    import sysconfig

    import pytest_distcheck.deps as deps

    scripts = Path(sysconfig.get_path("scripts"))
    if sys.prefix == sys.base_prefix or not (scripts / "distcheck").is_file():
        pytest.skip("this suite does not run in a venv with the kit's commands")
    write_checks(workspace_dir)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "-q")
    result.stdout.fnmatch_lines(["*= Definition of Done: phase t1 =*",
                                 deps.NOT_ACTIVATED.format(activate=shlex.quote(str(scripts / "activate")))])
    monkeypatch.setattr(shutil, "which", lambda name: str(scripts / name))  # activated: nothing to say
    assert deps.not_activated(workspace_dir.path, workspace_dir.path) is None


def test_unknown_markers():
    lines = ["local: free", "gpu: paid", "world_size(n): ranks"]
    assert unknown_markers("locl", lines) == ["locl"]
    assert unknown_markers("local and not (gpu or world_size)", lines) == []
    assert unknown_markers("local or nope(x=1)", lines) == ["nope"]


def test_a_misspelled_marker_expression_is_named_and_no_table_blames_a_crash(workspace_dir):
    write_checks(workspace_dir)
    workspace_dir.makeini("[pytest]\naddopts = --strict-markers\n")
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "-m", "locl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["distcheck: -m 'locl' selects nothing: 'locl' is not a marker (did you mean "
                                 "'local' for 'locl'?); the DoD was not checked"])
    assert "NOT RUN" not in result.stdout.str() and "stopped early" not in result.stdout.str()


def test_a_marker_registered_in_a_nested_conftest_is_not_misnamed(workspace_dir):
    write_checks(workspace_dir)
    workspace_dir.makeini("[pytest]\naddopts = --strict-markers\n")
    workspace_dir.makepyfile(**{"sub/conftest": "def pytest_configure(config):\n"
                                                "    config.addinivalue_line('markers', 'mine: my own')\n",
                                "sub/test_mine": "import pytest\n\n@pytest.mark.mine\ndef test_m():\n    pass\n"})
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "-m", "mine", "sub")
    assert result.ret == 0 and "not a marker" not in result.stdout.str()


def test_a_kit_test_run_prints_one_line_instead_of_the_dod_table(workspace_dir):
    write_checks(workspace_dir)
    workspace_dir.makepyfile(**{"tests/test_kit": "def test_kit():\n    pass\n"})
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "tests")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["distcheck: the DoD of phase t1 was not checked in this run (none of its checks "
                                 f"under checks/ was collected); {CHECK_IT}"])
    assert "NOT RUN" not in result.stdout.str() and "Definition of Done" not in result.stdout.str()


PAID_WORKSPACE = """
[phase]
id = "p"
title = "paid path"

[[items]]
id = "spend"
title = "spend within budget"
how = "distcheck budget"

[[items]]
id = "paid"
title = "a result from a paid run"
how = "pytest -m gpu --max-usd 3"
requires = ["spend"]
"""


# The free checks of PAID_WORKSPACE: the spend item is done, the paid one pending on `pytest -m gpu --max-usd 3`.
PAID_CHECKS = textwrap.dedent("""
        import pytest, pytest_distcheck

        @pytest.mark.local
        @pytest.mark.dod("spend")
        def test_spend():
            pass

        @pytest.mark.local
        @pytest.mark.dod("paid")
        def test_paid():
            pytest_distcheck.pending("no result yet", "pytest -m gpu --max-usd 3")
""")


def test_the_paid_command_explains_itself_and_checks_its_free_prerequisites(pytester):
    """`pytest -m gpu` (no budget): the paid test's skip reason is shown without -rs, and the table says
    what is missing (the result) instead of "blocked by spend (not-run)": the items whose `how` is this
    command, and their prerequisites, get their free checks run."""
    pytester.makefile(".toml", **{"checks/distcheck": PAID_WORKSPACE})
    pytester.makepyfile(**{"checks/test_checks": PAID_CHECKS, "checks/test_pod": textwrap.dedent("""
        import pytest

        @pytest.mark.gpu
        def test_on_a_pod():
            pass
        """)})
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "gpu")
    out = result.stdout.str()
    assert "blocked" not in out.lower()
    result.stdout.fnmatch_lines([
        "distcheck: paid test skipped: checks/test_pod.py::test_on_a_pod: paid GPU test: give this session a "
        "budget to run it: pytest -m gpu --max-usd 3*",
        "DONE     spend  evidence checked",
        "PENDING  paid   no result yet",
    ])
    result.assert_outcomes(passed=1, skipped=2, deselected=0)


def test_missing_dependencies_of_an_extra():
    requires = ["pytest>=8", "no-such-dist-for-distcheck>=1; extra == 'gpu'", "also-not-here; extra == 'notes'"]
    assert missing_dependencies(requires, extra="gpu") == ["no-such-dist-for-distcheck"]
    assert missing_dependencies(requires) == []


def test_a_paid_test_without_the_gpu_extra_names_the_install_line(pytester, monkeypatch):
    """With a budget and the runpod provider but no runpod/asyncssh: one line with the exact install
    command, not a raw ModuleNotFoundError from the pod fixture."""
    import pytest_distcheck.deps as deps

    real = deps.missing_dependencies
    monkeypatch.setattr(deps, "missing_dependencies", lambda requires=None, extra="": ["asyncssh"] if extra else
                        real(requires, extra))
    pytester.makefile(".toml", **{"checks/distcheck": PAID_WORKSPACE + "\n[budget]\nledger = 'ledger.md'\n"
                                  "phase_ceiling_usd = 5.0\n"})
    pytester.makepyfile(**{"checks/test_pod": "import pytest\n\n@pytest.mark.gpu\ndef test_on_a_pod():\n"
                                              "    raise ModuleNotFoundError(\"No module named 'asyncssh'\")\n"})
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "gpu", "--max-usd", "3", "checks/test_pod.py")
    result.stdout.fnmatch_lines(["*the `gpu` extra of pytest-distcheck is not installed in this Python (missing: "
                                 "asyncssh); install it with: * -m pip install -e '.[[]gpu]'*"])
    assert "ModuleNotFoundError" not in result.stdout.str()


def test_a_misspelled_workspace_file_is_a_usage_error_that_offers_the_closest_name(workspace_dir):
    """`--workspace checks/solution.toml` (for solutions.toml): not a marker error of the first check claiming
    there is no checks/distcheck.toml, but the file named, where it was looked for, and the closest name."""
    write_checks(workspace_dir)
    (workspace_dir.path / "checks" / "solutions.toml").write_text((workspace_dir.path / "checks" /
                                                                    "distcheck.toml").read_text())
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "-m", "local", "--workspace", "checks/solution.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = NAMED_MISSING.format(source="--workspace", base=workspace_dir.path,
                                hint=DID_YOU_MEAN.format(path="checks/solutions.toml"))
    result.stderr.fnmatch_lines([f"ERROR: distcheck: checks/solution.toml: {said}"])
    assert "mark.dod" not in result.stderr.str()


def test_a_missing_workspace_file_with_no_close_name_lists_its_neighbours_or_names_the_next_step(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text("")
    assert missing_named("checks/zzz.toml", tmp_path, "--workspace") == NAMED_MISSING.format(
        source="--workspace", base=tmp_path, hint=THERE_ARE.format(paths="checks/distcheck.toml"))
    assert missing_named("chekcs/distcheck.toml", tmp_path, "--workspace").endswith(
        DID_YOU_MEAN.format(path="checks/distcheck.toml"))
    assert missing_named("elsewhere/zzz.toml", tmp_path, "--workspace").endswith(NAME_ANOTHER)


def test_pytest_outside_any_workspace_says_none_was_found_and_where_to_go(pytester):
    """`pytest -m local` in a folder with no workspace above it: not a bare "collected 0 items" but why,
    and the next step; the exit status stays pytest's "nothing collected"."""
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "local")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["distcheck: " + NO_WORKSPACE.format(start=pytester.path)])


def test_a_suite_without_a_workspace_that_collects_tests_gets_no_workspace_line(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0 and "no workspace found" not in result.stdout.str()


def test_pytest_in_a_subfolder_with_tests_of_its_own_names_the_folder_and_the_way_back(workspace_dir, monkeypatch):
    """`cd tests && pytest -m local`: the line must not answer "`pytest -m local` checks it" (the command just
    run) but say why nothing of the DoD was collected and where to run it from."""
    write_checks(workspace_dir)
    workspace_dir.makeini("[pytest]\ntestpaths = checks\n")
    workspace_dir.makepyfile(**{"tests/deep/test_kit": "def test_kit():\n    pass\n"})
    monkeypatch.chdir(workspace_dir.path / "tests" / "deep")
    out = workspace_dir.runpytest("-p", "no:cacheprovider", "-m", "local").stdout
    out.fnmatch_lines(["distcheck: the DoD of phase t1 was not checked in this run*; "
                       + FROM_THE_ROOT.format(here="tests/deep", up="../..")])
    assert CHECK_IT not in out.str()


def _paid_run(pytester, *args, body="gpu_pod):\n            pass"):
    pytester.makefile(".toml", **{"checks/distcheck": PAID_WORKSPACE + "\n[budget]\nledger = 'ledger.md'\n"
                                  "phase_ceiling_usd = 5.0\n"})
    pod = textwrap.dedent("""
        @pytest.mark.gpu
        def test_on_a_pod(BODY
        """).replace("BODY", body)
    pytester.makepyfile(**{"checks/test_checks": PAID_CHECKS + pod})
    return pytester.runpytest("-p", "no:cacheprovider", "-m", "gpu", "--max-usd", "3", *args)


def test_the_paid_command_without_a_key_names_the_key_as_the_next_step_and_fails(pytester, monkeypatch):
    """`pytest -m gpu --max-usd 3` with no RUNPOD_API_KEY: nothing the learner asked for ran, so not exit 0,
    and the item's next step is not the same command again but the key, then that command."""
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    result = _paid_run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "distcheck: paid test skipped: *RUNPOD_API_KEY is not set*",
        "distcheck: " + NOTHING_PAID_RAN.format(why=NO_KEY_WHY, status=4),
        "PENDING  paid   no result yet", "*-> " + NO_KEY_STEP.format(how="pytest -m gpu --max-usd 3")])


def test_a_budgeted_run_whose_paid_tests_all_skip_for_another_reason_fails_without_naming_the_key(pytester):
    result = _paid_run(pytester, "--gpu-provider", "local", body="):\n            pytest.skip('too few GPUs')")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["distcheck: " + NOTHING_PAID_RAN.format(why=SKIPPED_WHY, status=4),
                                 "*-> pytest -m gpu --max-usd 3"])
    assert "RUNPOD_API_KEY=" not in result.stdout.str()


def test_a_misspelled_config_of_a_command_offers_the_closest_name(tmp_path, monkeypatch, capsys):
    from pytest_distcheck.cli import main

    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "solutions.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    assert main(["budget", "--config", "checks/solution.toml"]) == 2
    assert capsys.readouterr().err == ("distcheck budget: checks/solution.toml: workspace file not found"
                                       + DID_YOU_MEAN.format(path="checks/solutions.toml") + "\n")


def test_the_missing_dependencies_line_speaks_the_language_in_use(workspace_dir, monkeypatch):
    import pytest_distcheck.deps as deps

    monkeypatch.setattr(deps, "missing_dependencies", lambda: ["filelock"])
    write_checks(workspace_dir)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--lang", "es")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-distcheck: a este Python (*) le faltan dependencias del kit, filelock: "
                                 "este pytest no es el del kit. Activa el venv en el que instalaste el kit*"])
