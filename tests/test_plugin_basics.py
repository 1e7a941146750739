"""Markers, options, ini keys, the report header and workspace errors, through pytester."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import plugin
from pytest_distcheck.i18n import _
from pytest_distcheck.plugin import OTHER_KIT


def test_all_markers_pass_strict_markers(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_markers":
        """
        import pytest

        @pytest.mark.local
        @pytest.mark.gpu
        @pytest.mark.budget(usd=1.5)
        @pytest.mark.world_size(2)
        @pytest.mark.fresh_ranks
        def test_marked():
            pass

        @pytest.mark.dod("alpha")
        def test_check():
            pass
        """}
    )
    result = workspace_dir.runpytest("--strict-markers", "-p", "no:cacheprovider", "-m", "not gpu")
    result.assert_outcomes(passed=1, deselected=1)


def test_markers_are_listed(workspace_dir):
    result = workspace_dir.runpytest("--markers")
    for name in ("local:", "gpu:", "budget(usd):", "world_size(n):", "dod(item_id):", "fresh_ranks:"):
        result.stdout.fnmatch_lines([f"@pytest.mark.{name}*"])


def test_a_project_without_a_workspace_keeps_its_own_gpu_local_and_budget_markers(pytester):
    # the course workspace's markers would skip the project's own `gpu` tests and refuse a bare `budget`
    pytester.makeini("[pytest]\nmarkers =\n    gpu: my own GPU tests\n    budget: my own\n")
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu
        def test_my_gpu():
            pass

        @pytest.mark.budget
        def test_my_budget():
            pass

        @pytest.mark.local
        def test_unregistered():
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3)
    # no header line, no paid-test notes: with the defaults and no workspace the kit says nothing
    assert not [line for line in result.outlines if line.startswith("distcheck")], result.outlines
    strict = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")  # marks apply at import
    strict.stdout.fnmatch_lines(["*'local' not found in `markers` configuration option*"])
    assert "@pytest.mark.gpu: my own GPU tests" in pytester.runpytest("--markers").stdout.str()


def test_without_a_workspace_the_header_says_only_a_setting_given(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider", "--distcheck-timeout", "12")
    result.stdout.fnmatch_lines(["distcheck: backend gloo, world size 2 (default), timeout 12 s; "
                                 f"{plugin.NO_WORKSPACE_FILE}; gate off"])


def test_a_pytest_ini_that_hides_pyprojects_settings_is_said(workspace_dir):
    # a learner adds pytest.ini for one key (distcheck_lang) in a repository configured in pyproject.toml
    workspace_dir.makepyprojecttoml("[tool.pytest.ini_options]\ntestpaths = ['checks']\n")
    workspace_dir.makefile(".ini", pytest="[pytest]\ndistcheck_lang = en\n")
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--co", "-q")  # a warning: said under -q too
    assert "PytestConfigWarning: " + plugin.SHADOWED_PYPROJECT.format(ini="pytest.ini") in result.stdout.str()
    (workspace_dir.path / "pytest.ini").unlink()
    assert "pyproject.toml's" not in workspace_dir.runpytest("-p", "no:cacheprovider", "--co").stdout.str()


def test_header_names_workspace_and_settings(workspace_dir):
    workspace_dir.makepyfile("def test_x(): pass")
    result = workspace_dir.runpytest("--distcheck-timeout", "12")
    result.stdout.fnmatch_lines(["distcheck: backend gloo, world size 2 (default), timeout 12 s; "
                                 "workspace checks/distcheck.toml (phase t1, 2 DoD items); gate off"])

    assert "the kit running is" not in result.stdout.str()


def test_header_says_when_the_kit_running_is_not_this_folders(workspace_dir):
    """A clone of the kit run with another clone's venv: its own edits would not run, so the header says so."""
    workspace_dir.makepyfile(**{"pytest_distcheck/plugin": "", "test_x": "def test_x(): pass"})
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([_(OTHER_KIT).format(kit=Path(plugin.__file__).resolve().parent,
                                                     here="pytest_distcheck")])

@pytest.mark.parametrize(
    ("args", "env", "ini", "message"),
    [
        (["--distcheck-timeout", "soon"], None, None, "*command line --distcheck-timeout: 'soon' is not a number*"),
        ([], "-3", None, "*environment variable DISTCHECK_TIMEOUT: must be > 0, got '-3'*"),
        ([], None, "0", "*ini key distcheck_timeout: must be > 0, got '0'*"),
    ],
)
def test_bad_timeout_names_its_source(workspace_dir, monkeypatch, args, env, ini, message):
    if env is not None:
        monkeypatch.setenv("DISTCHECK_TIMEOUT", env)
    if ini is not None:
        workspace_dir.makeini(f"[pytest]\ndistcheck_timeout = {ini}\n")
    workspace_dir.makepyfile("def test_x(): pass")
    result = workspace_dir.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_timeout_precedence_cli_over_env_over_ini(workspace_dir, monkeypatch):
    workspace_dir.makeini("[pytest]\ndistcheck_timeout = 7\n")
    workspace_dir.makepyfile("def test_x(): pass")
    workspace_dir.runpytest().stdout.fnmatch_lines(["*timeout 7 s*"])
    monkeypatch.setenv("DISTCHECK_TIMEOUT", "8")
    workspace_dir.runpytest().stdout.fnmatch_lines(["*timeout 8 s*"])
    workspace_dir.runpytest("--distcheck-timeout=9").stdout.fnmatch_lines(["*timeout 9 s*"])


def test_unknown_dod_item_is_a_usage_error(workspace_dir):
    workspace_dir.makepyfile(
        """
        import pytest

        @pytest.mark.dod("gamma")
        def test_check():
            pass
        """
    )
    result = workspace_dir.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no DoD item 'gamma' in *distcheck.toml (known: alpha, beta)*"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[phase]\nid = 1\ntitle = 'x'\n[[items]]\nid = 'A b'\ntitle = 't'\nhow = 'h'\n",
         "*distcheck.toml, items[[]0[]].id: 'A b' does not match*"),
        ("[phase]\nid = 1\ntitle = 'x'\n[[items]]\nid = 'a'\ntitle = 't'\n",
         "*distcheck.toml, items[[]0[]]: 'how' is a required property*"),
        ("[phase]\nid = 1\ntitle = 'x'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\nrequires = ['zz']\n",
         "*distcheck.toml, items[[]0[]].requires: unknown item 'zz'*"),
        ("[phase\nid = 1\n", "*distcheck.toml, line 1: *"),
    ],
)
def test_malformed_workspace_names_file_and_field(pytester, text, message):
    pytester.mkdir("checks")
    (pytester.path / "checks" / "distcheck.toml").write_text(text)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_prerequisite_cycle_is_reported(pytester):
    pytester.mkdir("checks")
    (pytester.path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 1\ntitle = 'x'\n"
        "[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\nrequires = ['b']\n"
        "[[items]]\nid = 'b'\ntitle = 't'\nhow = 'h'\nrequires = ['a']\n"
    )
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*prerequisites form a cycle: a -> b -> a*"])


def test_distcheck_config_ini_key_moves_the_workspace(pytester):
    (pytester.path / "phase.toml").write_text(
        "[phase]\nid = 'moved'\ntitle = 'x'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\n"
    )
    pytester.makeini("[pytest]\ndistcheck_config = phase.toml\n")
    pytester.makepyfile("def test_x(): pass")
    pytester.runpytest().stdout.fnmatch_lines(
        ["*phase moved, 1 DoD item)*", "*the DoD of phase moved was not checked*"])


def test_no_workspace_file_means_no_table(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "Definition of Done" not in result.stdout.str()


def test_a_suite_without_a_workspace_gets_no_budget_or_pods_banner(pytester):
    """An instructor's dist_world suite has no course workspace: the budget and pods lines are noise there
    (fresh-user trial t5), and so is the kit's own line with its defaults (a pytest maintainer's review, as
    pytest-timeout says nothing without a timeout); they come back with --max-usd or a workspace file."""
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert not [line for line in result.outlines if line.startswith("distcheck")], result.outlines
    result = pytester.runpytest("-p", "no:cacheprovider", "--max-usd", "1")
    result.stdout.fnmatch_lines(["distcheck budget: paid GPU tests on, --max-usd $1.00*", "distcheck pods:*"])


def test_the_kits_own_modules_are_not_assertion_rewritten_and_test_files_are():
    """pytest would rewrite every module of the plugin's package (pytest_distcheck/__init__.py takes the kit
    out: its asserts are internal invariants, and rewriting costs each pytest process time)."""
    import sys

    from _pytest.assertion.rewrite import AssertionRewritingHook

    import pytest_distcheck.budget.ledger
    import pytest_distcheck.dod.plugin

    assert not isinstance(pytest_distcheck.dod.plugin.__loader__, AssertionRewritingHook)
    assert not isinstance(pytest_distcheck.budget.ledger.__loader__, AssertionRewritingHook)
    assert isinstance(sys.modules[__name__].__loader__, AssertionRewritingHook)
