"""What a run of the DoD checks says about each item, and why (pytester): deselected, stopped, skipped, blocked,
not registered, not the checks folder's. Plain runs (the learner's `pytest -m local`); what the gate adds is in
tests/test_gate_*.py.

The workspace (tests/conftest.py) has items alpha and beta; beta requires alpha. Checks live in
checks/, beside the workspace file, unless a test puts one elsewhere on purpose.
"""

from __future__ import annotations

import textwrap

import pytest
from dod_support import gate_run, unverified, write_checks

from pytest_distcheck.dod.collection import DID_NOT_RUN, INTERRUPTED

FAILED = pytest.ExitCode.TESTS_FAILED
NOT_GATED = "(not gated; use --gate to require every item)"


def checks(pytester, alpha="pass", beta="pass"):
    write_checks(pytester, alpha, beta)


def run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "-rs", *args)


def conftest(pytester, text, where=""):
    (pytester.path / where / "conftest.py").write_text(textwrap.dedent(text))


def test_everything_done_is_unverified_without_a_shipped_dod(workspace_dir):
    # The test phase t1 ships no DoD with the kit: all done, yet never PASSED (report.gate_verdict: tests of
    # PASSED there and in test_dod_reports).
    checks(workspace_dir)
    result = gate_run(workspace_dir)
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked", "DONE     beta   evidence checked",
                                 unverified(2, 2)])
    assert result.ret == FAILED
    # pytest's own last line says it too (it read "2 passed", green, above an exit status of 1)
    result.stdout.fnmatch_lines(["*= 2 passed, 1 gate unverified in *"])


def test_done_with_a_reason_is_shown_in_the_table(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.done('evidence checked, self-reported: a log')")
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked, self-reported: a log",
                                 f"2/2 items done {NOT_GATED}"])


def test_done_raised_by_a_fixture_is_an_error(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest, pytest_distcheck

        @pytest.fixture(autouse=True)
        def forge():
            pytest_distcheck.done("forged")
        """, where="checks")
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["ERROR    alpha  done() raised in setup, not by the check's function"])
    assert result.ret == FAILED


def test_an_interrupted_run_says_so_in_every_row_that_did_not_run(workspace_dir):
    """Issue 34: after Ctrl-C the rows say the run was interrupted, not "-x, --maxfail, an interrupt or a crash"."""
    checks(workspace_dir, alpha="raise KeyboardInterrupt")
    result = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"NOT RUN  alpha  {DID_NOT_RUN.format(why=INTERRUPTED)}",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks did not run"])


def test_stopping_after_a_failure_names_maxfail(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    workspace_dir.makepyfile(**{"checks/test_more": """
        import pytest
        @pytest.mark.dod("beta")
        def test_beta_too():
            pass
        """})
    result = run(workspace_dir, "-x", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["BROKEN   alpha  wrong",
                                 "BLOCKED  beta   blocked by alpha (broken); own checks did not run"])
    result.assert_outcomes(failed=1)
    result = run(workspace_dir, "-x", "-p", "no:randomly", "-k", "beta")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-k 'beta')",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done"])


# -- deselection and selection -------------------------------------------------------------------


def test_deselect_with_m_is_not_run(workspace_dir):
    checks(workspace_dir)
    result = run(workspace_dir, "-m", "not local")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-m 'not local')", "*rerun: pytest --dod alpha",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done",
                                 f"0/2 items done, 1 not checked in this run {NOT_GATED}"])


def test_collecting_only_other_tests_says_the_dod_was_not_checked(workspace_dir):
    checks(workspace_dir)
    workspace_dir.makepyfile(test_mine="def test_x(): pass")
    result = run(workspace_dir, "test_mine.py")
    result.stdout.fnmatch_lines(["distcheck: the DoD of phase t1 was not checked in this run*"])


def test_a_path_that_does_not_exist_gets_pytests_error_without_a_dod_table(workspace_dir):
    checks(workspace_dir)
    result = run(workspace_dir, "test_nowhere.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: file or directory not found: test_nowhere.py"])
    assert "Definition of Done" not in result.stdout.str() and "NOT RUN" not in result.stdout.str()
    assert "was not checked in this run" not in result.stdout.str()


@pytest.mark.parametrize("option", ["--collect-only", "--setup-only", "--setup-plan"])
def test_collecting_or_setting_up_without_running_says_which_option(workspace_dir, option):
    # not "the session stopped early: -x, --maxfail or a crash" (a pytest maintainer's review)
    from pytest_distcheck.dod.plugin import NOTHING_RUNS

    checks(workspace_dir)
    result = run(workspace_dir, option)
    result.stdout.fnmatch_lines([f"NOT RUN  alpha  {DID_NOT_RUN.format(why=NOTHING_RUNS.format(option=option))}"])


def test_a_stop_by_pytest_itself_is_not_called_ctrl_c():
    # --sw and xdist's -x raise pytest's own Interrupted, a KeyboardInterrupt subclass (a pytest maintainer's review)
    from pytest_distcheck.dod.plugin import STOPPED_BY, DodPlugin

    def raised(exc: BaseException) -> pytest.ExceptionInfo:
        with pytest.raises(type(exc)) as info:
            raise exc
        return info

    plugin = DodPlugin.__new__(DodPlugin)  # the hook reads nothing else of the plugin
    why = "Test failed, continuing from this test next run."
    plugin.pytest_keyboard_interrupt(raised(pytest.Session.Interrupted(why)))
    assert plugin.stopped == STOPPED_BY.format(why=why)
    plugin.pytest_keyboard_interrupt(raised(KeyboardInterrupt()))
    assert plugin.stopped == INTERRUPTED


def test_a_bad_m_expression_gets_no_table_and_no_report(workspace_dir):
    checks(workspace_dir)
    result = run(workspace_dir, "-m", "local and", "--dod-json", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "NOT RUN" not in result.stdout.str() and not (workspace_dir.path / "r.json").exists()


def checks_with_a_second_alpha_check(pytester):
    """The two checks, and test_alpha_slow, alpha's second check, in the same file."""
    write_checks(pytester)
    path = pytester.path / "checks" / "test_checks.py"
    path.write_text(path.read_text() + '\n@pytest.mark.dod("alpha")\ndef test_alpha_slow():\n    pass\n')


def register_alpha_checks(pytester, *checks):
    """Register ``checks`` for alpha in the workspace file."""
    ws = pytester.path / "checks" / "distcheck.toml"
    listed = ", ".join(f'"checks/test_checks.py::{c}"' for c in checks)
    ws.write_text(ws.read_text().replace('how = "make alpha"', f'how = "make alpha"\nchecks = [{listed}]'))


def test_an_item_only_some_of_whose_checks_ran_counts_as_not_checked(workspace_dir):
    # the footer counted it checked while its row read NOT RUN (a pytest maintainer's review)
    checks_with_a_second_alpha_check(workspace_dir)
    result = run(workspace_dir, "-k", "test_alpha and not slow", "--dod-json", "r.json")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  1 of 2 checks did not run: *",
                                 f"0/2 items done, 2 not checked in this run {NOT_GATED}"])
    import json

    alpha = json.loads((workspace_dir.path / "r.json").read_text())["items"][0]
    assert (alpha["state"], alpha["ran"]) == ("not-run", True)  # one of its checks did run


def test_a_check_whose_file_lf_skipped_says_lf(workspace_dir):
    from pytest_distcheck.dod.plugin import LAST_FAILED

    register_alpha_checks(workspace_dir, "test_alpha")
    workspace_dir.makepyfile(**{"checks/test_checks": "import pytest\n\n@pytest.mark.dod('alpha')\ndef test_alpha():\n"
                                                      "    pass\n",
                                "checks/test_more": "import pytest, pytest_distcheck\n\n@pytest.mark.dod('beta')\n"
                                                    "def test_beta():\n    pytest_distcheck.broken('wrong')\n"})
    workspace_dir.runpytest()  # the cache plugin records the last failure
    result = workspace_dir.runpytest("--lf")
    result.stdout.fnmatch_lines([f"*checks/test_checks.py::test_alpha ({LAST_FAILED})*"])


def test_a_check_not_named_among_its_files_node_ids_says_so(workspace_dir):
    from pytest_distcheck.dod.plugin import NOT_NAMED

    register_alpha_checks(workspace_dir, "test_alpha", "test_alpha_slow")
    checks_with_a_second_alpha_check(workspace_dir)
    result = run(workspace_dir, "checks/test_checks.py::test_alpha_slow")
    result.stdout.fnmatch_lines([f"*checks/test_checks.py::test_alpha ({NOT_NAMED})*"])


def test_a_hook_that_removes_checks_silently_is_named(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        def pytest_collection_modifyitems(items):
            items[:] = [i for i in items if "alpha" not in i.nodeid]
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  removed from the run by a collection hook without being deselected",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done"])


def test_one_check_of_two_deselected_is_not_done(workspace_dir):
    checks(workspace_dir)
    workspace_dir.makepyfile(**{"checks/test_alpha_more": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_second():
            pass
        """})
    result = run(workspace_dir, "-k", "not second")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  1 of 2 checks did not run: "
                                 "checks/test_alpha_more.py::test_alpha_second deselected (-k 'not second')"])


# -- skips ---------------------------------------------------------------------------------------


def test_a_conftest_that_skips_checks_leaves_them_pending(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        import pytest
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.skip(reason="not today"))
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["PENDING  alpha  skipped: not today", "BLOCKED  beta   blocked by alpha (pending)*"])


def test_a_skip_raised_from_a_conftest_hook_is_pending(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        import pytest
        def pytest_runtest_setup(item):
            pytest.skip("skipped by conftest")
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["PENDING  alpha  skipped: skipped by conftest"])

def test_blocked_skip_names_the_failed_prerequisite(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('spend $5.20 / $5.00')")
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["BROKEN   alpha  spend $5.20 / $5.00", "BLOCKED  beta   blocked by alpha (broken)",
                                 "SKIPPED * blocked: blocked by alpha (broken: spend $5.20 / $5.00)"])
    result.assert_outcomes(failed=1, skipped=1)


def test_prerequisites_run_first_whatever_the_file_order(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest, pytest_distcheck
        @pytest.mark.dod("beta")
        def test_beta():
            pass
        @pytest.mark.dod("alpha")
        def test_alpha():
            pytest_distcheck.pending("no evidence", "make it")
        """})
    result = run(workspace_dir, "-v")
    result.stdout.fnmatch_lines(["*test_alpha SKIPPED (pending: no evidence)*",
                                 "*test_beta SKIPPED (blocked: blocked by alpha*"])


def test_xfail_marker_cannot_hide_a_broken_check(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('score 10%')")
    conftest(workspace_dir, """
        import pytest
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.xfail(reason="hide it"))
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["DoD item broken: score 10%", "BROKEN   alpha  score 10%"])
    result.assert_outcomes(failed=1, skipped=1)  # not xfailed, not xpassed


# -- checks that are not the workspace's own ------------------------------------------------------


def test_a_check_outside_the_checks_folder_is_untrusted_and_fails_the_run(workspace_dir):
    workspace_dir.makepyfile(test_fake="""
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_fake():
            pass
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  test_fake.py::test_alpha_fake is not one of the item's own checks: "
                                 "its function is defined in test_fake.py, outside the workspace's checks folder "
                                 "checks/"])
    result.stdout.fnmatch_lines(["*DoD item untrusted: test_fake.py::test_alpha_fake is not one of the item's own*"])
    assert result.ret == FAILED


def test_a_runtest_protocol_that_fakes_a_pass_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        from _pytest.reports import TestReport
        def pytest_runtest_protocol(item, nextitem):
            rep = TestReport(item.nodeid, item.location, {}, "passed", None, "call")
            item.ihook.pytest_runtest_logreport(report=rep)
            return True
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  checks/test_checks.py::test_alpha reported passed without the "
                                 "kit's classification*"])
    assert result.ret == FAILED


def test_a_runtest_protocol_that_runs_nothing_leaves_checks_not_run(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        def pytest_runtest_protocol(item, nextitem):
            return True
        """)
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  selected but did not run*",
                                 f"0/2 items done, 2 not checked in this run {NOT_GATED}"])


# -- registered checks ---------------------------------------------------------------------------


REGISTERED = """
[phase]
id = "r1"
title = "registered checks"

[[items]]
id = "alpha"
title = "first"
how = "make alpha"
checks = ["checks/test_checks.py::test_alpha", "checks/test_checks.py::test_alpha_live"]
"""


def test_registered_checks_must_all_be_collected(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED)
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha():
            pass
        """})
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  1 of 2 checks did not run: checks/test_checks.py::test_alpha_live "
                                 "not collected: registered check checks/test_checks.py::test_alpha_live (no such "
                                 "check in the file, or not marked for this item)"])


def test_a_registered_check_whose_file_is_missing_says_so(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED)
    result = gate_run(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  not collected: registered check checks/test_checks.py::test_alpha "
                                 "(file missing)*"])


def test_an_unregistered_check_claiming_an_item_is_untrusted(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED)
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha():
            pass
        @pytest.mark.dod("alpha")
        def test_alpha_live():
            pass
        """, "checks/test_extra": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_extra():
            pass
        """})
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  checks/test_extra.py::test_alpha_extra is not one of the item's "
                                 "own checks: it is not registered for its item in the workspace file (registered: "
                                 "checks/test_checks.py::test_alpha, checks/test_checks.py::test_alpha_live)"])
    assert result.ret == FAILED
    result = run(workspace_dir, "checks/test_checks.py")
    result.stdout.fnmatch_lines([f"1/1 items done {NOT_GATED}"])


# -- --dod ---------------------------------------------------------------------------------------


THREE = """
[phase]
id = "t3"
title = "three items"

[[items]]
id = "alpha"
title = "first"
how = "make alpha"

[[items]]
id = "beta"
title = "second"
how = "make beta"
requires = ["alpha"]

[[items]]
id = "gamma"
title = "third"
how = "make gamma"
"""


def three(pytester):
    (pytester.path / "checks" / "distcheck.toml").write_text(THREE)
    pytester.makepyfile(**{"checks/test_checks": """
        import pytest
        @pytest.mark.dod("gamma")
        def test_gamma():
            pass
        @pytest.mark.dod("beta")
        def test_beta():
            pass
        @pytest.mark.dod("alpha")
        def test_alpha():
            pass
        """})
    # Outside the checks folder and broken on import: --dod must not even collect it.
    pytester.makepyfile(test_elsewhere="raise ImportError('collected although --dod was given')")


def test_dod_runs_one_item_with_its_prerequisites(workspace_dir):
    three(workspace_dir)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--dod", "beta", "-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*test_alpha PASSED*", "*test_beta PASSED*"])
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked", "DONE     beta   evidence checked",
                                 "NOT RUN  gamma  not selected (--dod beta)",
                                 "2/3 items done, 1 not checked in this run (not gated*"])
    assert result.ret == 0


def test_dod_names_an_unknown_item_and_the_known_ones(workspace_dir):
    three(workspace_dir)
    result = workspace_dir.runpytest("--dod", "delta")
    result.stderr.fnmatch_lines(["*--dod: no DoD item 'delta' in * (known: alpha, beta, gamma)*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# -- xdist ---------------------------------------------------------------------------------------


def test_states_and_reasons_under_xdist(workspace_dir):
    checks(workspace_dir)
    result = run(workspace_dir, "-n", "2", "-k", "beta")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-k 'beta')",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done",
                                 f"0/2 items done, 1 not checked in this run {NOT_GATED}"])
    result = run(workspace_dir, "-n", "2")
    result.stdout.fnmatch_lines([f"2/2 items done {NOT_GATED}"])


def test_disabling_the_whole_plugin_makes_the_gate_an_unknown_option(workspace_dir):
    checks(workspace_dir)
    result = run(workspace_dir, "--gate", "-p", "no:distcheck")
    result.stderr.fnmatch_lines(["*unrecognized arguments: --gate*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_malformed_check_registration_names_the_field(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED.replace(
        '"checks/test_checks.py::test_alpha",', '"test_alpha",'))
    checks(workspace_dir)
    result = workspace_dir.runpytest()
    result.stderr.fnmatch_lines(["*distcheck.toml, items[[]0[]].checks[[]0[]]: 'test_alpha' does not match*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_path_under_the_workspace_root_is_said_from_the_root(workspace_dir):
    """A check's reason naming a file by its absolute path (a ConfigError's) reads as the table's paths do;
    under the gate the absolute path would be the temporary copy of the commit."""
    checks(workspace_dir, "pytest_distcheck.broken(str(Path.cwd() / 'experiments' / 'log.jsonl') + ', line 1: bad')")
    (workspace_dir.path / "checks" / "test_checks.py").write_text(
        "from pathlib import Path\n" + (workspace_dir.path / "checks" / "test_checks.py").read_text())
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["BROKEN   alpha  experiments/log.jsonl, line 1: bad"])


def test_a_workspace_that_is_not_the_shipped_dod_says_how_to_restore_it(tmp_path):
    """Every item is untrusted under the gate, and each row says the fix (docs/ci/known-limitations.md)."""
    from pathlib import Path

    from pytest_distcheck.dod.state import NOT_SHIPPED, SHIPPED_FIX, State, gate_outcomes
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(Path(__file__).resolve().parents[1] / "checks" / "distcheck.toml")
    canonical = {"trusted": False, "phase": "35", "problems": ["check file checks/test_quiz_passed.py differs"]}
    outcomes = gate_outcomes(ws, canonical)
    assert {o.state for o in outcomes} == {State.UNTRUSTED} and len(outcomes) == len(ws.items)
    assert outcomes[0].reason == NOT_SHIPPED.format(phase="35", problems=canonical["problems"][0]) + SHIPPED_FIX
    # origin is the learner's own repository in a CI clone or a fork: the fix names the course's remote.
    assert "git checkout COURSE/main -- checks" in SHIPPED_FIX and "origin" not in SHIPPED_FIX


def test_the_gate_does_not_warn_about_the_workspaces_own_markers(workspace_dir):
    # registered in the workspace's ini file, which the gate never reads (a pytest maintainer's review)
    write_checks(workspace_dir)
    path = workspace_dir.path / "checks" / "test_checks.py"
    path.write_text(path.read_text().replace('@pytest.mark.dod("beta")', '@pytest.mark.slow\n@pytest.mark.dod("beta")'))
    result = gate_run(workspace_dir)
    assert "PytestUnknownMarkWarning" not in result.stdout.str()
    result.stdout.fnmatch_lines(["DONE     beta   evidence checked"])
