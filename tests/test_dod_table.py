"""DoD states from checks, the table at the end of a run, and the gate's last line, through pytester."""

from __future__ import annotations

import pytest
from dod_support import gate_run, unshipped, unverified, write_checks


def run(pytester, alpha="pass", beta="pass", *args):
    # DoD checks are trusted only under the workspace's checks folder (checks/, beside distcheck.toml).
    write_checks(pytester, alpha, beta)
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def gated(pytester, alpha="pass", beta="pass", *args):
    write_checks(pytester, alpha, beta)
    return gate_run(pytester, *args)


def test_every_item_done(workspace_dir):
    result = run(workspace_dir)
    result.stdout.fnmatch_lines([
        "*= Definition of Done: phase t1 =*",
        "DONE     alpha  evidence checked",
        "DONE     beta   evidence checked",
        "2/2 items done (not gated; use --gate to require every item)",
    ])
    assert result.ret == 0


def test_pending_is_a_skip_with_the_command_and_not_a_failure(workspace_dir):
    result = run(workspace_dir, "pytest_distcheck.pending('no log yet', 'run the lab')", "pass", "-rs")
    # beta requires alpha, which ran first in this process: beta is skipped, naming alpha and why.
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED * blocked: blocked by alpha (pending: no log yet)"])
    result.stdout.fnmatch_lines([
        "PENDING  alpha  no log yet",
        "*-> run the lab",
        "*rerun: pytest --dod alpha",
        "BLOCKED  beta   blocked by alpha (pending)",
        "*-> run the lab",
        "*rerun: pytest --dod beta",
    ])
    assert result.ret == 0


def test_pending_fails_the_gate(workspace_dir):
    result = gated(workspace_dir, "pytest_distcheck.pending('no log yet')", "pass")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # A failed gate names what is not done, each with its state.
    result.stdout.fnmatch_lines(["gate: FAILED (0/2 items done; not done: alpha (pending), beta (blocked)"
                                 f"{unshipped()})"])


def test_every_item_done_without_a_shipped_dod_is_unverified(workspace_dir):
    result = gated(workspace_dir, "pass", "pass")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([unverified(2, 2)])


def test_broken_is_always_a_failure_and_says_why(workspace_dir):
    result = run(workspace_dir, beta="pytest_distcheck.broken('spend $5.20 / $5.00')")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*DoD item broken: spend $5.20 / $5.00*", "BROKEN   beta   spend $5.20 / $5.00"])


def test_failed_assert_is_broken_other_exceptions_are_errors(workspace_dir):
    result = run(workspace_dir, alpha="assert 1 == 2, 'quiz 64% (needs >= 70%)'")
    result.stdout.fnmatch_lines(["BROKEN   alpha  quiz 64% (needs >= 70%)",
                                 "BLOCKED  beta   blocked by alpha (broken)"])
    result = run(workspace_dir, alpha="{}['missing']")
    result.stdout.fnmatch_lines(["ERROR    alpha  check crashed in call: KeyError: 'missing'"])
    # The kit's ConfigError names wrong input and where (red-team A10b: evidence linked from outside the root).
    result = run(workspace_dir, alpha="raise __import__('pytest_distcheck.errors').errors.ConfigError("
                 "'w.toml', 'page', 'docs/x.md is outside the workspace root')")
    result.stdout.fnmatch_lines(["ERROR    alpha  wrong input: w.toml, page: docs/x.md is outside the workspace root"])
    assert "crashed" not in result.stdout.str()
    # its failure is the one line, not a traceback above the table (an instructor's walkthrough)
    result.stdout.fnmatch_lines(["*DoD item error: wrong input: w.toml, page: docs/x.md is outside the workspace root"])
    assert "raise __import__" not in result.stdout.str() and "ConfigError:" not in result.stdout.str()


def test_stale_is_reported_and_fails_the_gate(workspace_dir):
    result = gated(workspace_dir, "pytest_distcheck.stale('result older than config', 'rerun')", "pass")
    result.stdout.fnmatch_lines(["STALE    alpha  result older than config", "*-> rerun"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_item_with_no_check_is_not_run(workspace_dir):
    workspace_dir.makepyfile(test_other="def test_x(): pass")
    result = gate_run(workspace_dir)
    result.stdout.fnmatch_lines([
        "NOT RUN  alpha  not collected: no test marked @pytest.mark.dod('alpha') under checks/",
        "*rerun: pytest --dod alpha",
        f"gate: FAILED (0/2 items done, 2 not checked in this run; not done: alpha (not-run), beta (not-run)"
        f"{unshipped()})",
    ])
    # Without the gate, a run with no DoD check at all (the kit's own tests) says so in one line.
    result = workspace_dir.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["distcheck: the DoD of phase t1 was not checked in this run (none of its checks "
                                 "under checks/ was collected); `pytest -m local` checks it"])
    assert "NOT RUN" not in result.stdout.str()
    assert result.ret == 0


def test_deselected_check_fails_the_gate(workspace_dir):
    result = gated(workspace_dir, "pass", "pass", "-k", "beta")
    result.stdout.fnmatch_lines(["NOT RUN  alpha  deselected (-k 'beta')",
                                 "gate: FAILED (0/2 items done, 1 not checked in this run; not done: alpha (not-run), "
                                 f"beta (blocked){unshipped()})"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_skipped_check_is_pending_with_the_skip_reason(workspace_dir):
    result = run(workspace_dir, alpha="pytest.skip('needs GPUs')")
    result.stdout.fnmatch_lines(["PENDING  alpha  skipped: needs GPUs"])


def test_table_is_right_under_xdist(workspace_dir):
    result = run(workspace_dir, "pass", "pytest_distcheck.pending('later')", "-n", "2")
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked", "PENDING  beta   later"])
    assert result.stdout.str().count("Definition of Done") == 1


def test_distcheck_log_is_printed_above_the_table(workspace_dir):
    workspace_dir.makepyfile(
        """
        def test_measure(distcheck_log):
            distcheck_log("all-reduce sweep", "4096 B  1.0 us")
        """
    )
    result = workspace_dir.runpytest("-n", "2")
    result.stdout.fnmatch_lines([
        "*- all-reduce sweep (test_distcheck_log_is_printed_above_the_table.py::test_measure) -*",
        "4096 B  1.0 us",
        "distcheck: the DoD of phase t1 was not checked in this run*",
    ])


def test_broken_and_not_run_rows_give_no_evidence_command(workspace_dir):
    # The item's command would overwrite evidence that is wrong (fix it as the reason says) or not
    # yet checked (nothing is known to be wrong): only the rerun line applies.
    result = run(workspace_dir, "pytest_distcheck.broken('line 4: not valid JSON')", "pass")
    out = result.stdout.str()
    assert "-> make alpha" not in out and "-> make beta" not in out
    result.stdout.fnmatch_lines(["BROKEN*alpha*line 4: not valid JSON", "*rerun: pytest --dod alpha",
                                 "BLOCKED*beta*blocked by alpha (broken)*",
                                 "*-> first fix alpha (broken), then: pytest --dod alpha",
                                 "*rerun: pytest --dod beta"])


def test_not_run_row_gives_no_evidence_command(workspace_dir):
    result = run(workspace_dir, "pass", "pass", "-k", "beta")
    assert "-> make beta" not in result.stdout.str()
    result.stdout.fnmatch_lines(["NOT RUN*alpha*", "*rerun: pytest --dod alpha"])


def test_every_line_of_a_reason_is_indented_under_the_reason_column(workspace_dir):
    result = run(workspace_dir, "pytest_distcheck.pending('a note in progress\\nnotes/a.md:4 not counted', 'cite')")
    result.stdout.fnmatch_lines(["PENDING  alpha  a note in progress",
                                 "                notes/a.md:4 not counted",
                                 "                -> cite"])


def test_a_long_reason_an_earlier_row_gave_is_not_repeated(workspace_dir):
    """The gate's untrusted workspace gives every item the same long reason (an instructor's walkthrough: six
    copies of it); the table says it once, the reports keep it on every item."""
    from pytest_distcheck.dod.table import SAME_REASON, SAME_REASON_FROM

    toml = workspace_dir.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace('requires = ["alpha"]\n', ""))  # beta on its own, not blocked
    long, short = "x" * (SAME_REASON_FROM + 1), "too short to skip"
    result = run(workspace_dir, f"pytest_distcheck.broken({long!r})", f"pytest_distcheck.broken({long!r})")
    result.stdout.fnmatch_lines([f"BROKEN   alpha  {long}", f"BROKEN   beta   {SAME_REASON.format(item='alpha')}"])
    result = run(workspace_dir, f"pytest_distcheck.broken({short!r})", f"pytest_distcheck.broken({short!r})")
    result.stdout.fnmatch_lines([f"BROKEN   alpha  {short}", f"BROKEN   beta   {short}"])
