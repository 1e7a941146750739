"""The gate cannot be passed with nothing done: every bypass fails it, naming the item and why (pytester).

The workspace (tests/conftest.py) has items alpha and beta; beta requires alpha. Checks live in
checks/, beside the workspace file, unless a test puts one elsewhere on purpose.
"""

from __future__ import annotations

import textwrap

import pytest
from dod_support import (
    IN_PROCESS_GATE,
    in_process_gate,  # noqa: F401  (autouse)
    unverified,
    write_checks,
)

FAILED = pytest.ExitCode.TESTS_FAILED


def ran(name):
    """The gate's reason for a workspace file outside checks/ that ran in the process (its audit hook): in these
    in-process runs a conftest.py or test file is such code. The item's own checks' reason follows it."""
    return f"{name} (workspace code other than the registered checks) ran inside the gate's sub-session"


def checks(pytester, alpha="pass", beta="pass"):
    write_checks(pytester, alpha, beta)


def gate(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", *IN_PROCESS_GATE, "-rs", *args)


def conftest(pytester, text, where=""):
    (pytester.path / where / "conftest.py").write_text(textwrap.dedent(text))


def test_everything_done_is_unverified_without_a_shipped_dod(workspace_dir):
    # The test phase t1 ships no DoD with the kit: all done, yet never PASSED (report.gate_verdict: tests of
    # PASSED there and in test_dod_reports).
    checks(workspace_dir)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked", "DONE     beta   evidence checked",
                                 unverified(2, 2)])
    assert result.ret == FAILED


def test_done_with_a_reason_is_shown_in_the_table(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.done('evidence checked, self-reported: a log')")
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked, self-reported: a log", unverified(2, 2)])


@pytest.mark.parametrize(("where", "text", "expected"), [
    ("", """
        import pytest, pytest_distcheck

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_call(item):
            pytest_distcheck.done("forged")
        """, "UNTRUSTED*alpha  done() was raised around the check, not by its function*"),
    ("checks", """
        import pytest, pytest_distcheck

        @pytest.fixture(autouse=True)
        def forge():
            pytest_distcheck.done("forged")
        """, "UNTRUSTED*alpha  Done('forged') was raised by checks/conftest.py:6, neither the check's module nor "
            "the kit*"),
])
def test_done_raised_outside_the_checks_function_does_not_count(workspace_dir, where, text, expected):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, text, where=where)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines([expected, "gate: FAILED*"])
    assert result.ret == FAILED


# -- deselection and selection -------------------------------------------------------------------


def test_deselect_with_m_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    result = gate(workspace_dir, "-m", "not local")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-m 'not local')", "*rerun: pytest --dod alpha",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done",
                                 "gate: FAILED (0/2 items done, 1 not checked in this run)"])
    assert result.ret == FAILED


def test_collecting_only_other_tests_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    workspace_dir.makepyfile(test_mine="def test_x(): pass")
    result = gate(workspace_dir, "test_mine.py")
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('test_mine.py')}",
                                 "*own checks: not-run (not collected: no test marked @pytest.mark.dod('alpha') "
                                 "under checks/)",
                                 "gate: FAILED (0/2 items done, 2 not checked in this run)"])
    assert result.ret == FAILED


def test_collect_only_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    result = gate(workspace_dir, "--collect-only")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  selected but did not run*", "gate: FAILED*"])
    assert result.ret == FAILED


@pytest.mark.parametrize("option", ["--setup-only", "--setup-plan"])
def test_setting_up_without_running_fails_the_gate(workspace_dir, option):
    checks(workspace_dir)
    result = gate(workspace_dir, option)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  selected but did not run*", "gate: FAILED*"])
    assert result.ret == FAILED


def test_stopping_early_leaves_the_rest_not_run(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    workspace_dir.makepyfile(**{"checks/test_more": """
        import pytest
        @pytest.mark.dod("beta")
        def test_beta_too():
            pass
        """})
    result = gate(workspace_dir, "-x", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["BROKEN   alpha  wrong",
                                 "BLOCKED  beta   blocked by alpha (broken); own checks did not run"])
    result.assert_outcomes(failed=1)
    result = gate(workspace_dir, "-x", "-p", "no:randomly", "-k", "beta")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-k 'beta')",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done"])


def test_a_hook_that_removes_checks_silently_is_named(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        def pytest_collection_modifyitems(items):
            items[:] = [i for i in items if "alpha" not in i.nodeid]
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('conftest.py')}",
                                 "*own checks: not-run (removed from the run by a collection hook without being "
                                 "deselected)", "UNTRUSTED  beta   *", "*own checks: done*",
                                 "gate: FAILED (0/2 items done, 1 not checked in this run)"])
    assert result.ret == FAILED


def test_one_check_of_two_deselected_is_not_done(workspace_dir):
    checks(workspace_dir)
    workspace_dir.makepyfile(**{"checks/test_alpha_more": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_second():
            pass
        """})
    result = gate(workspace_dir, "-k", "not second")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  1 of 2 checks did not run: "
                                 "checks/test_alpha_more.py::test_alpha_second deselected (-k 'not second')"])
    assert result.ret == FAILED


# -- skips ---------------------------------------------------------------------------------------


def test_a_conftest_that_skips_checks_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        import pytest
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.skip(reason="not today"))
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('conftest.py')}", "*own checks: pending (skipped: not today)",
                                 "UNTRUSTED  beta   *", "*own checks: blocked (blocked by alpha (pending: *",
                                 "gate: FAILED (0/2 items done)"])
    assert result.ret == FAILED


def test_a_skip_raised_from_a_conftest_hook_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        import pytest
        def pytest_runtest_setup(item):
            pytest.skip("skipped by conftest")
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('conftest.py')}",
                                 "*own checks: pending (skipped: skipped by conftest)",
                                 "gate: FAILED (0/2 items done)"])
    assert result.ret == FAILED


def test_blocked_skip_names_the_failed_prerequisite(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('spend $5.20 / $5.00')")
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["BROKEN   alpha  spend $5.20 / $5.00", "BLOCKED  beta   blocked by alpha (broken)",
                                 "gate: FAILED (0/2 items done)",
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
    result = gate(workspace_dir, "-v")
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
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["DoD item broken: score 10%", f"UNTRUSTED  alpha  {ran('conftest.py')}",
                                 "*own checks: broken (score 10%)", "gate: FAILED*"])
    result.assert_outcomes(failed=1, skipped=1)  # not xfailed, not xpassed


# -- checks that are not the kit's own -----------------------------------------------------------


def test_a_check_outside_the_checks_folder_is_untrusted(workspace_dir):
    workspace_dir.makepyfile(test_fake="""
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_fake():
            pass
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: its function is defined in "
                                 "test_fake.py:2, outside the workspace's checks folder checks/",
                                 f"*{ran('test_fake.py')}",
                                 "gate: FAILED*"])
    assert result.ret == FAILED


def test_untrusted_fails_the_run_even_without_the_gate(workspace_dir):
    workspace_dir.makepyfile(test_fake="""
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha_fake():
            pass
        """)
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*DoD item untrusted: not the kit's own check*"])
    assert result.ret == FAILED


def test_an_overriding_fixture_in_conftest_is_untrusted(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest, pytest_distcheck
        @pytest.mark.dod("alpha")
        def test_alpha(distcheck_workspace):
            if not distcheck_workspace.resolve("evidence.txt").is_file():
                pytest_distcheck.pending("no evidence.txt", "make alpha")
        @pytest.mark.dod("beta")
        def test_beta():
            pass
        """})
    conftest(workspace_dir, """
        import pytest
        class Everything:
            def resolve(self, rel):
                import pathlib
                return pathlib.Path(__file__)
        @pytest.fixture
        def distcheck_workspace():
            return Everything()
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: it uses fixture 'distcheck_workspace' "
                                 "from conftest.py:7; fixtures a DoD check uses must come from pytest, the kit or "
                                 "the checks folder", f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_an_autouse_fixture_that_patches_the_kit_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest, pytest_distcheck
        @pytest.fixture(autouse=True)
        def quiet(monkeypatch):
            monkeypatch.setattr(pytest_distcheck, "broken", lambda reason: None)
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: it uses fixture 'quiet' from "
                                 "conftest.py:3*pytest_distcheck.broken was replaced while the checks ran "
                                 "(now quiet.<locals>.<lambda> from conftest.py:5)", f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_patching_a_checks_helper_with_a_mock_is_untrusted(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest, pytest_distcheck
        def score():
            return 10
        @pytest.mark.dod("alpha")
        def test_alpha():
            if score() < 70:
                pytest_distcheck.broken(f"score {score()}%")
        @pytest.mark.dod("beta")
        def test_beta():
            pass
        """})
    conftest(workspace_dir, """
        import sys
        from unittest import mock
        def pytest_runtest_setup(item):
            if item.name == "test_alpha":
                item.module.score = mock.Mock(return_value=100)
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: test_checks.score is a mock",
                                 f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_a_pyfunc_call_hook_that_skips_the_function_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        def pytest_pyfunc_call(pyfuncitem):
            return True
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  the check's function never ran, yet its report says passed: "
                                 "something replaced it (foreign hooks: conftest.py:2 (pytest_pyfunc_call))",
                                 f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_a_runtest_call_wrapper_that_swallows_the_failure_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('quiz 64% (needs >= 70%)')")
    conftest(workspace_dir, """
        import pytest
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(item):
            try:
                yield
            except BaseException:
                return None
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  the check raised Broken('quiz 64% (needs >= 70%)') but its report "
                                 "says passed: something swallowed the exception*", f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_a_makereport_wrapper_that_rewrites_the_outcome_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            rep = outcome.get_result()
            rep.outcome = "passed"
            call.excinfo = None
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  the check raised Broken('wrong') but its report says passed*",
                                 f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_a_makereport_wrapper_outside_the_kits_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest
        class Late:
            @pytest.hookimpl(wrapper=True, tryfirst=True)
            def pytest_runtest_makereport(self, item, call):
                rep = yield
                rep.outcome = "passed"
                return rep
        def pytest_sessionstart(session):
            session.config.pluginmanager.register(Late(), "late")
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  *a pytest_runtest_makereport wrapper in conftest.py:4 runs after "
                                 "the kit's and can rewrite the reports of DoD checks*"])
    assert result.ret == FAILED


def test_a_logreport_hook_that_rewrites_the_outcome_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest
        class Late:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_logreport(self, report):
                report.outcome = "passed"
        def pytest_sessionstart(session):
            session.config.pluginmanager.register(Late(), "late")
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  its report was changed after the kit classified it broken "
                                 "(failed; now passed): wrong", f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


def test_a_replaced_test_function_is_untrusted(workspace_dir):
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        def pytest_collection_modifyitems(items):
            for item in items:
                item.obj = lambda: None
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: its function is defined in "
                                 "conftest.py:4, outside the workspace's checks folder checks/*",
                                 f"*{ran('conftest.py')}"])
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
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  checks/test_checks.py::test_alpha reported passed without the "
                                 "kit's classification*"])
    assert result.ret == FAILED


def test_a_runtest_protocol_that_runs_nothing_leaves_checks_not_run(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        def pytest_runtest_protocol(item, nextitem):
            return True
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('conftest.py')}", "*own checks: not-run (selected but did "
                                 "not run*", "gate: FAILED (0/2 items done, 2 not checked*"])
    assert result.ret == FAILED


def test_unregistering_the_dod_plugin_fails_the_gate(workspace_dir):
    checks(workspace_dir)
    conftest(workspace_dir, """
        def pytest_sessionstart(session):
            session.config.pluginmanager.unregister(name="distcheck-dod")
        """)
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["gate: FAILED (the DoD plugin 'distcheck-dod' did not run to the end of the session)"])
    assert result.ret == FAILED


def test_disabling_the_dod_plugin_is_refused_with_the_gate(workspace_dir):
    checks(workspace_dir)
    result = gate(workspace_dir, "-p", "no:distcheck-dod")
    result.stderr.fnmatch_lines(["*--gate needs the DoD plugin 'distcheck-dod', which was disabled*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_patching_the_kit_at_import_time_is_untrusted(workspace_dir):
    # In a subprocess: the patch would otherwise outlive the inner run in this process.
    checks(workspace_dir, alpha="pytest_distcheck.broken('wrong')")
    conftest(workspace_dir, """
        import pytest_distcheck
        def _quiet(reason):
            return None
        pytest_distcheck.broken = _quiet
        """)
    result = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider", *IN_PROCESS_GATE)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: pytest_distcheck.broken is _quiet from "
                                 "conftest.py:3, not the kit's or the checks' own*", f"*{ran('conftest.py')}"])
    assert result.ret == FAILED


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
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  1 of 2 checks did not run: checks/test_checks.py::test_alpha_live "
                                 "not collected: registered check checks/test_checks.py::test_alpha_live (no such "
                                 "check in the file, or not marked for this item)"])
    assert result.ret == FAILED


def test_a_registered_check_outside_the_run_says_so(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED)
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha():
            pass
        """})
    workspace_dir.makepyfile(test_mine="def test_x(): pass")
    result = gate(workspace_dir, "test_mine.py")
    result.stdout.fnmatch_lines([f"UNTRUSTED  alpha  {ran('test_mine.py')}",
                                 "*own checks: not-run (not collected: registered check "
                                 "checks/test_checks.py::test_alpha (its file was not among the paths this run "
                                 "collected); not collected: registered check checks/test_checks.py::test_alpha_live "
                                 "(its file was not among the paths this run collected))"])
    (workspace_dir.path / "checks" / "test_checks.py").unlink()
    (workspace_dir.path / "test_mine.py").unlink()
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["NOT RUN  alpha  not collected: registered check checks/test_checks.py::test_alpha "
                                 "(file missing)*", "gate: FAILED*"])


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
    result = gate(workspace_dir)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  not the kit's own check: it is not registered for its item in the "
                                 "workspace file (registered: checks/test_checks.py::test_alpha, "
                                 "checks/test_checks.py::test_alpha_live)"])
    assert result.ret == FAILED
    result = gate(workspace_dir, "checks/test_checks.py")
    result.stdout.fnmatch_lines([unverified(1, 1, "r1")])


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
                                 "NOT RUN  gamma  not selected (--dod alpha beta)",
                                 "2/3 items done, 1 not checked in this run (not gated*"])
    assert result.ret == 0


def test_dod_with_the_gate_still_requires_every_item(workspace_dir):
    three(workspace_dir)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--dod", "beta", "--dod", "gamma", *IN_PROCESS_GATE)
    result.stdout.fnmatch_lines([unverified(3, 3, "t3")])
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--dod", "gamma", *IN_PROCESS_GATE)
    result.stdout.fnmatch_lines(["gate: FAILED (1/3 items done, 2 not checked in this run)"])


def test_dod_names_an_unknown_item_and_the_known_ones(workspace_dir):
    three(workspace_dir)
    result = workspace_dir.runpytest("--dod", "delta")
    result.stderr.fnmatch_lines(["*--dod: no DoD item 'delta' in * (known: alpha, beta, gamma)*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# -- xdist ---------------------------------------------------------------------------------------


def test_gate_and_reasons_under_xdist(workspace_dir):
    checks(workspace_dir)
    result = gate(workspace_dir, "-n", "2", "-k", "beta")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-k 'beta')",
                                 "BLOCKED  beta   blocked by alpha (not-run); own checks: done",
                                 "gate: FAILED (0/2 items done, 1 not checked in this run)"])
    assert result.ret == FAILED
    result = gate(workspace_dir, "-n", "2")
    result.stdout.fnmatch_lines([unverified(2, 2)])


def test_disabling_the_whole_plugin_makes_the_gate_an_unknown_option(workspace_dir):
    checks(workspace_dir)
    result = gate(workspace_dir, "-p", "no:distcheck")
    result.stderr.fnmatch_lines(["*unrecognized arguments: --gate*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_malformed_check_registration_names_the_field(workspace_dir):
    (workspace_dir.path / "checks" / "distcheck.toml").write_text(REGISTERED.replace(
        '"checks/test_checks.py::test_alpha",', '"test_alpha",'))
    checks(workspace_dir)
    result = workspace_dir.runpytest()
    result.stderr.fnmatch_lines(["*distcheck.toml, items[[]0[]].checks[[]0[]]: 'test_alpha' does not match*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
