"""A DoD outcome counts only when the check or the kit raised it (red-team t2 B2).

B2: the lab module, imported by a check, calls ``pytest_distcheck.done(...)`` at import when ``_pytest`` is
loaded; the check ends there and, before this, the item was done. Now the item is untrusted and the reason
names the file and line that raised the outcome.
"""

from __future__ import annotations

import json
import sys

import pytest
from dod_support import git_commit_all

CHECK = """
import pytest
import pytest_distcheck

@pytest.mark.dod("alpha")
def test_alpha():
    {body}

@pytest.mark.dod("beta")
def test_beta():
    pass
"""

DONE_AT_IMPORT = """
import sys
if "_pytest" in sys.modules:
    import pytest_distcheck
    pytest_distcheck.done("evidence checked, confirmed: the lab ran live")
"""

FORGED_TRACEBACK = """
import sys, types
from pytest_distcheck.dod.outcome import Done
f = sys._getframe()
while f is not None and not f.f_code.co_filename.endswith("test_checks.py"):
    f = f.f_back
raise Done("evidence checked").with_traceback(types.TracebackType(None, f, f.f_lasti, f.f_lineno))
"""


def _forget_experiments(monkeypatch) -> None:
    # This repository's own ``experiments`` package, imported by an earlier test in the same process, would
    # shadow the workspace's (pytester restores sys.modules only to what it was before the run).
    for name in [n for n in sys.modules if n == "experiments" or n.startswith("experiments.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def lab_workspace(workspace_dir, monkeypatch):
    """The two-item workspace with a lab package ``experiments`` the check of ``alpha`` imports."""
    _forget_experiments(monkeypatch)
    workspace_dir.makepyfile(**{"experiments/__init__": ""})
    workspace_dir.syspathinsert()

    def run(lab: str, body: str = "import experiments.lab") -> pytest.RunResult:
        workspace_dir.makepyfile(**{"experiments/lab": lab, "checks/test_checks": CHECK.format(body=body)})
        return workspace_dir.runpytest("-p", "no:cacheprovider")

    return run


def test_done_raised_by_lab_code_at_import_is_untrusted_naming_file_and_line(lab_workspace):
    result = lab_workspace(DONE_AT_IMPORT)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  Done('evidence checked, confirmed: the lab ran live') was "
                                 "raised by experiments/lab.py:4, neither the check's module nor the kit*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("call", ["pending('not yet', 'make it')", "broken('wrong')", "stale('old', 'redo')"])
def test_any_outcome_raised_by_lab_code_is_untrusted(lab_workspace, call):
    result = lab_workspace(f"import pytest_distcheck\npytest_distcheck.{call}\n")
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  * was raised by experiments/lab.py:2, neither the check's "
                                 "module nor the kit*"])


def test_a_forged_traceback_pointing_at_the_check_is_untrusted(lab_workspace):
    """The lab's own frame stays in the traceback whatever it appends: every frame between the check's
    function and the raise must be the check's or trusted code."""
    result = lab_workspace(FORGED_TRACEBACK)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  Done('evidence checked') was raised by experiments/lab.py:6*"])


def test_outcomes_the_check_and_the_kit_raise_count(lab_workspace):
    """The check's own pending, and the kit's helper raising for it (committed.require_committed)."""
    result = lab_workspace("", body="pytest_distcheck.pending('no log yet', 'make it')")
    result.stdout.fnmatch_lines(["PENDING  alpha  no log yet"])
    result = lab_workspace("", body="from pytest_distcheck.committed import require_committed\n"
                                    "    from pathlib import Path\n"
                                    "    require_committed([Path('checks/test_checks.py')], Path.cwd())")
    result.stdout.fnmatch_lines(["PENDING  alpha  * is not in a git repository*"])
    result = lab_workspace("", body="pytest_distcheck.done('evidence checked, self-reported: mine')")
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked, self-reported: mine"])


def test_b2_the_lab_raising_done_at_import_cannot_end_the_check_under_the_gate(pytester):
    """Red-team t2 B2 as a learner runs it: `pytest --gate` on the Phase 35 workspace whose lab ends the live
    check with done() at import. The lab is imported on the ranks only, so its done() is an exception of the
    ranks: the check crashed, never done."""
    from test_gate_redteam import REPO, gate, phase35

    root = phase35(pytester)
    log = json.loads((REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text())
    log["host"]["load_avg_1m"] += 0.25  # not a copy of the reference: only the lab stands between it and done
    (root / "experiments/ddp_cpu/results").mkdir()
    (root / "experiments/ddp_cpu/results/allreduce-cpu.json").write_text(json.dumps(log, indent=1))
    lab = root / "experiments" / "ddp_cpu" / "lab.py"
    lines = lab.read_text().splitlines()
    lab.write_text("\n".join(lines + ["import sys as _sys", "if '_pytest' in _sys.modules:",
                                      "    import pytest_distcheck",
                                      "    pytest_distcheck.done('evidence checked, confirmed: the lab ran live')"]))
    git_commit_all(root)
    result, report = gate(pytester)
    ddp = next(it for it in report["items"] if it["id"] == "ddp-allreduce-logged")
    assert ddp["state"] == "error", ddp
    assert "RankError: rank(s) 0, 1 failed" in ddp["reason"]
    result.stdout.fnmatch_lines(["*rank 0: error (Done: evidence checked, confirmed: the lab ran live)*"])


POSES_AS_KIT = """
import sys
__name__ = "pytest_distcheck.zz_lab"
sys.modules[__name__] = sys.modules["experiments.lab"]
import pytest_distcheck
pytest_distcheck.done("evidence checked")
"""


def test_a_sourceless_lab_posing_as_a_kit_module_is_untrusted_in_the_gates_sub_session(workspace_dir, monkeypatch):
    """A lab shipped as ``lab.pyc`` alone, compiled under a kit file name, that renames its module into the
    kit's package: the sub-session knows the kit's namespaces from before any learner code loaded."""
    import importlib.util
    import marshal

    from dod_support import IN_PROCESS_GATE

    from pytest_distcheck.dod import isolation, outcome

    monkeypatch.setattr(isolation, "REQUIRED", False)
    _forget_experiments(monkeypatch)
    workspace_dir.makepyfile(**{"experiments/__init__": "", "checks/test_checks": CHECK.format(
        body="import experiments.lab")})
    code = compile(POSES_AS_KIT, outcome.__file__.replace("outcome.py", "state.py"), "exec")
    (workspace_dir.path / "experiments" / "lab.pyc").write_bytes(
        importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code))
    workspace_dir.syspathinsert()
    result = workspace_dir.runpytest("-p", "no:cacheprovider", *IN_PROCESS_GATE)
    result.stdout.fnmatch_lines(["UNTRUSTED  alpha  Done('evidence checked') was raised by *state.py:6, neither "
                                 "the check's module nor the kit*"])
