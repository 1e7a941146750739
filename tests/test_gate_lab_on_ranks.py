"""The learner's lab runs on the ranks only, never in the process that decides the gate's verdict.

Red team t3 (2026-12-01) made `distcheck gate` say PASSED (6/6) with nothing done: lab code imported by the
live DDP check in the gate's sub-session found the DoD plugin's instance through ``gc`` and rewrote its
outcomes (H3), or built a function with the check module's globals that called ``done()`` (F). The check
now imports the lab by name on the ranks, and in the sub-session the ranks' replies and return values are
unpickled as plain data only (``pytest_distcheck.ranks.pool.plain_loads``), so neither a lab object nor
crafted bytes can run code there.
"""

from __future__ import annotations

import pickle

import pytest
from dod_support import git_commit_all
from test_gate_redteam import gate, phase35

from pytest_distcheck.ranks import pool

# t3 H3, as the red team ran it: every outcome recorded and to come turned into DONE, then its own test skipped.
REWRITES_THE_OUTCOMES = '''
def _install():
    import dataclasses
    import gc
    from pytest_distcheck.dod.plugin import DodPlugin
    from pytest_distcheck.dod.state import State

    def done(o):
        return dataclasses.replace(o, state=State.DONE, command=None, reason="evidence checked")

    class Outcomes(list):
        def append(self, o):
            super().append(done(o))

    for obj in gc.get_objects():
        if type(obj) is DodPlugin:
            obj.outcomes = Outcomes(done(o) for o in obj.outcomes)


_install()
import pytest as _pytest

_pytest.skip("not yet")
'''

# t3 F: LabConfig replaced by a function that runs in the check module's namespace and says done.
SAYS_DONE_AS_THE_CHECK = '''
def _says_done(*args, **kwargs):
    pytest_distcheck.done("evidence checked, confirmed: the lab ran live on 2 gloo ranks in this run")


def _install():
    import sys as _sys
    import types as _types
    f = _sys._getframe(1)
    while f is not None:
        g = f.f_globals
        if "_live_run_on_rank" in g and "pytest_distcheck" in g:
            global LabConfig
            real = LabConfig
            LabConfig = _types.FunctionType(_says_done.__code__, g, "LabConfig")
            LabConfig.sizes_bytes = real.sizes_bytes
            return
        f = f.f_back


_install()
'''

# Text the check's rank function returns that runs code wherever it is unpickled: the lab replaces json.dumps
# on the rank, so the JSON text comes back as a str subclass.
RUNS_CODE_WHEN_UNPICKLED = '''
class _Table(str):
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path(%r).write_text('ran')",))


import json as _json

_real_dumps = _json.dumps
_json.dumps = lambda *args, **kwargs: _Table(_real_dumps(*args, **kwargs))
'''


@pytest.mark.parametrize("attack", [REWRITES_THE_OUTCOMES, SAYS_DONE_AS_THE_CHECK], ids=["t3-H3", "t3-F"])
def test_lab_code_cannot_reach_the_verdict(pytester, attack):
    root = phase35(pytester)
    lab = root / "experiments" / "ddp_cpu" / "lab.py"
    lab.write_text(lab.read_text() + attack)
    git_commit_all(root)
    result, report = gate(pytester)  # asserts the gate failed and the example workflow rejects its report
    assert report["summary"]["done"] <= 1, report["summary"]  # spend-within-budget: nothing spent
    ddp = next(it for it in report["items"] if it["id"] == "ddp-allreduce-logged")
    assert ddp["state"] != "done", ddp


def test_a_lab_object_that_runs_code_when_unpickled_never_runs_in_the_gate(pytester):
    root = phase35(pytester)
    marker = root / "unpickled-in-the-verdict-process"
    lab = root / "experiments" / "ddp_cpu" / "lab.py"
    lab.write_text(lab.read_text() + RUNS_CODE_WHEN_UNPICKLED % str(marker))
    git_commit_all(root)
    result, report = gate(pytester)
    assert not marker.exists()
    ddp = next(it for it in report["items"] if it["id"] == "ddp-allreduce-logged")
    assert ddp["state"] == "error", ddp
    result.stdout.fnmatch_lines(["*only plain data may come back from the ranks here*builtins.exec is not plain data*"])


class _Runs:
    def __reduce__(self):
        return (print, ("ran",))


@pytest.mark.parametrize("value", [
    ("result", 1, {"rank": 0, "status": "ok"}, b"\x80", None, True),
    {"a": [1, 2.5, "x", None, True], "b": (b"y",), "c": {3}, "d": frozenset({4})},
])
def test_plain_data_round_trips(value):
    assert pool.plain_loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL)) == value


def test_anything_that_names_a_class_or_function_is_refused(capsys):
    with pytest.raises(pickle.UnpicklingError, match="builtins.print is not plain data"):
        pool.plain_loads(pickle.dumps(_Runs()))
    with pytest.raises(pickle.UnpicklingError, match="collections.OrderedDict is not plain data"):
        pool.plain_loads(pickle.dumps(__import__("collections").OrderedDict(a=1)))
    assert capsys.readouterr().out == ""


def _sends_a_crafted_reply(marker: str) -> None:
    """On a rank: from now on the worker's replies are bytes that run code wherever they are unpickled."""
    import pickle as real
    import sys
    import types

    class Payload:
        def __reduce__(self):
            return (exec, (f"import pathlib; pathlib.Path({marker!r}).write_text('ran')",))

    worker = sys.modules["pytest_distcheck.ranks.worker"]
    worker.pickle = types.SimpleNamespace(dumps=lambda obj, protocol=None: real.dumps(Payload()),
                                          loads=real.loads, HIGHEST_PROTOCOL=real.HIGHEST_PROTOCOL)


@pytest.mark.fresh_ranks
def test_a_crafted_reply_of_a_rank_runs_no_code_here(dist_world, tmp_path):
    from pytest_distcheck.ranks.errors import RankError

    marker = tmp_path / "ran-in-the-test-process"
    with pytest.raises(RankError, match=r"the rank's reply is not the kit's: builtins.exec is not plain data"):
        dist_world.run(_sends_a_crafted_reply, str(marker))
    assert not marker.exists()


# Red team t4 A1: a package init in the checks folder, imported by pytest with the checks, would run in the
# sub-session (the verdict process) and turn every outcome DONE.
CHECKS_PACKAGE_INIT = '''
import pathlib
pathlib.Path(%r).write_text("ran")
'''


def test_t4_a1_a_checks_package_init_never_runs(pytester):
    root = phase35(pytester)
    marker = root / "ran-in-the-sub-session"
    (root / "checks" / "__init__.py").write_text(CHECKS_PACKAGE_INIT % str(marker))
    git_commit_all(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--dod-markdown", "summary.md")
    assert result.ret != 0
    assert not marker.exists()
    result.stdout.fnmatch_lines(["*FAILED (the gate did not start: checks/__init__.py would run inside its "
                                 "sub-session (a checks folder holds no package and nothing Python would import in "
                                 "place of a registered check: remove it))"])
    assert "gate: FAILED" in (root / "summary.md").read_text()


# Red team t4 A6: a rank warning whose category claims a lazy attribute of a kit package made the sub-session
# import torch, whose device-backend entry points include one declared by a dist-info at the workspace root.
A6_LAB = '''
def _a6_trigger():
    import warnings
    W = type("W", (UserWarning,), {})
    W.__module__, W.__qualname__ = "pytest_distcheck.tp", "assert_tp_matches_dense"
    warnings.warn("lab: using the default bucket size", W)
_a6_trigger()
'''
A6_BACKEND = '''
import pathlib, sys
def load():
    if "--distcheck-subsession" in sys.argv:
        pathlib.Path(%r).write_text("ran")
'''


def test_t4_a6_a_root_dist_info_entry_point_never_loads_in_the_sub_session(pytester):
    root = phase35(pytester)
    marker = root / "entry-point-ran-in-the-sub-session"
    info = root / "labtools-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: labtools\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nlabtools = experiments.ddp_cpu.backend:load\n")
    (root / "experiments" / "ddp_cpu" / "backend.py").write_text(A6_BACKEND % str(marker))
    lab = root / "experiments" / "ddp_cpu" / "lab.py"
    lab.write_text(lab.read_text() + A6_LAB)
    git_commit_all(root)
    gate(pytester)
    assert not marker.exists()


def test_a_warning_category_is_never_looked_up_through_a_modules_getattr():
    import subprocess
    import sys

    code = ("import sys; from pytest_distcheck.ranks import rank_warnings as w; import pytest_distcheck.tp\n"
            "assert w._category('pytest_distcheck.tp', 'assert_tp_matches_dense') is None\n"
            "print('pytest_distcheck.tp.compare' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
