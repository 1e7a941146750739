"""dist_world across tests of a session: no leaks, live output with -s, start-up at collection, debug mode."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from pytest_distcheck.ranks.payload import CANNOT_PICKLE, POSITIONAL
from pytest_distcheck.ranks.plugin import LATE_MARKER

ORDERED = """
import os
import pytest

def look(name):
    import torch.distributed as dist
    return os.environ.get(name), os.getcwd(), str(dist.get_debug_level())

def set_detail():
    import torch.distributed as dist
    dist.set_debug_level(dist.DebugLevel.DETAIL)

def test_first_changes_everything(dist_world, monkeypatch, tmp_path):
    monkeypatch.setenv("DISTCHECK_T_LEAK", "1")   # before the ranks exist: the first call starts them
    monkeypatch.chdir(tmp_path)
    assert dist_world.run(look, "DISTCHECK_T_LEAK")[0][:2] == ("1", str(tmp_path))
    dist_world.run(set_detail)

def test_second_sees_none_of_it(dist_world):
    assert dist_world.run(look, "DISTCHECK_T_LEAK") == [(None, os.getcwd(), "DebugLevel.OFF")] * 2

def test_third_changes_cwd_later(dist_world, monkeypatch, tmp_path):
    dist_world.run(look, "X")
    monkeypatch.chdir(tmp_path)
    assert dist_world.run(look, "X")[1][1] == str(tmp_path)
"""


def test_nothing_leaks_between_tests(pytester):
    pytester.makepyfile(test_order=ORDERED)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=3)


LIVE = """
import os, time

def wait_for_go(flag):
    import torch.distributed as dist
    print(f"waiting-{{dist.get_rank()}}", flush=True)
    while not os.path.exists(flag):
        time.sleep(0.05)
    return "went"

def test_live(dist_world):
    assert dist_world.run(wait_for_go, {flag!r}, timeout=60) == ["went", "went"]
"""


def test_with_s_rank_output_is_live(pytester):
    flag = pytester.path / "go"
    pytester.makepyfile(test_live=LIVE.format(flag=str(flag)))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_live.py"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in proc.stdout:  # the ranks wait until both lines were seen here: only live output ends it
            seen.append(line)
            if any("[rank 0] waiting-0" in s for s in seen) and any("[rank 1] waiting-1" in s for s in seen):
                flag.touch()
        proc.wait(60)
    finally:
        proc.kill()
    assert flag.exists(), "".join(seen)
    assert "1 passed" in "".join(seen)


def test_zygote_starts_at_collection(pytester):
    # The zygote's log exists (its process runs) before the first test body: it started while collecting.
    pytester.makeconftest("""
        import glob, os, tempfile
        def pytest_collection_finish(session):
            reg = session.config.stash.get(__import__("pytest_distcheck.ranks.plugin", fromlist=["x"])._REGISTRY, None)
            assert reg is not None and reg._zygotes, "no zygote after collection"
            print("ZYGOTE-STARTED", list(reg._zygotes))
    """)
    pytester.makepyfile("def test_a(dist_world):\n    assert dist_world.run(lambda: 1) == [1, 1]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ZYGOTE-STARTED*OFF*"])


def test_zygote_starts_before_a_test_module_that_names_dist_world_is_imported(pytester):
    # A learner's module imports torch at its top: the zygote's own import must not wait for it.
    pytester.makeconftest("""
        import builtins
        def pytest_configure(config):
            builtins._distcheck_t_config = config
    """)
    pytester.makepyfile(test_early="""
        import builtins
        from pytest_distcheck.ranks.plugin import _REGISTRY
        reg = builtins._distcheck_t_config.stash.get(_REGISTRY, None)
        AT_IMPORT = sorted(reg._zygotes) if reg is not None else []

        def test_a(dist_world):
            assert AT_IMPORT == ["OFF"]
            assert dist_world.run(lambda: 1) == [1, 1]
    """)
    pytester.makepyfile(test_plain="def test_b():\n    pass\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_zygote_no_collected_test_needs_is_stopped(pytester):
    # The module names dist_world, but every test of it runs at another debug level (or uses none).
    pytester.makeconftest("""
        def pytest_collection_finish(session):
            from pytest_distcheck.ranks.plugin import _REGISTRY
            print("ZYGOTES", sorted(session.config.stash[_REGISTRY]._zygotes))
    """)
    pytester.makepyfile(test_detail="""
        import pytest

        @pytest.mark.dist_debug("INFO")
        def test_a(dist_world):
            pass

        def test_b():  # dist_world is only named here
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*ZYGOTES ?'INFO'?"])


def test_collect_only_or_deselected_tests_leave_no_zygote(pytester):
    pytester.makeconftest("""
        def pytest_collection_finish(session):
            from pytest_distcheck.ranks.plugin import _REGISTRY
            print("REGISTRY", session.config.stash.get(_REGISTRY, None))
    """)
    pytester.makepyfile("def test_a(dist_world):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "--collect-only")
    result.stdout.fnmatch_lines(["*REGISTRY None*"])
    pytester.makeconftest("""
        def pytest_collection_finish(session):
            from pytest_distcheck.ranks.plugin import _REGISTRY
            print("ZYGOTES", dict(session.config.stash[_REGISTRY]._zygotes))
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-k", "nothing_matches")
    result.stdout.fnmatch_lines(["*ZYGOTES {}*"])  # started while collecting, stopped once deselected


def test_a_zygote_still_importing_torch_is_killed_not_waited_for(tmp_path):
    """Closing a zygote that never reported ready (every dist_world test deselected) kills it at once: a
    graceful stop would be read only after its torch import, a second or more later."""
    from pytest_distcheck.ranks.zygote import Zygote

    zygote = Zygote(str(tmp_path / "zygote.log"))
    zygote.close()
    assert zygote._proc.returncode == -signal.SIGKILL  # a stop it had read would have ended it with 0


def test_the_session_environment_is_the_one_pytest_configured_with(pytester, monkeypatch):
    # No module names dist_world (a conftest fixture wraps it): the registry is made inside the first test,
    # whose monkeypatched debug level must not become the session's, as it would for every later test.
    monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG", raising=False)
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def world(request):
            return request.getfixturevalue("dist_" + "world")
    """)
    pytester.makepyfile(test_a="""
        import pytest

        @pytest.fixture
        def detail(monkeypatch):
            monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")

        def test_1_detail(detail, world):
            pass

        def test_2_default(world):
            assert "TORCH_DISTRIBUTED_DEBUG" not in world._registry.base_env
    """)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=2)


@pytest.mark.world_size(2)
@pytest.mark.parametrize("late", [pytest.mark.world_size(4), pytest.mark.dist_debug("DETAIL"), pytest.mark.fresh_ranks],
                         ids=["world_size-over-the-decorator", "dist_debug", "fresh_ranks"])
def test_a_marker_added_while_the_test_runs_fails_the_call(dist_world, request, late):
    request.node.add_marker(late)
    with pytest.raises(pytest.fail.Exception, match=LATE_MARKER.split(" (")[0].format(marker=late.name)):
        dist_world.run(len, [])


def test_the_proposed_rerun_names_the_test_from_where_pytest_was_started(pytester, monkeypatch):
    # rootdir (pytest.ini) above tests/, pytest started inside tests/: "tests/test_x.py::..." is not found there.
    pytester.makeini("[pytest]\n")
    (pytester.mkdir("tests") / "test_x.py").write_text(
        "def test_a(request):\n"  # fetched by name: no zygote starts for this in-process run
        "    assert request.getfixturevalue('dist_' + 'world')._nodeid == 'test_x.py::test_a'\n")
    monkeypatch.chdir(pytester.path / "tests")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_zygote_imports_the_kit_running_here_not_a_copy_in_the_current_folder(tmp_path, monkeypatch):
    """A workspace that is a clone of the kit (the gate's copy of a commit) holds a pytest_distcheck/ of its own;
    the zygote started there must still run this kit (found by the walkthrough of the gate)."""
    from pytest_distcheck.ranks.zygote import Zygote

    (tmp_path / "pytest_distcheck").mkdir()
    (tmp_path / "pytest_distcheck" / "__init__.py").write_text("raise SystemExit('the copy in the folder ran')\n")
    monkeypatch.chdir(tmp_path)
    zygote = Zygote(str(tmp_path / "zygote.log"))
    try:
        zygote.wait_ready()
    finally:
        zygote.close()
    assert "the copy in the folder ran" not in (tmp_path / "zygote.log").read_text()


def test_an_unpicklable_argument_s_report_is_the_test_s_line_and_the_named_culprit(pytester):
    """The PicklingError names the argument; no frame of the kit's payload code or of cloudpickle comes before
    it, and no 'During handling' chain repeats the pickler's own error."""
    pytester.makepyfile(test_lock="""
        import threading

        def test_lock(dist_world):
            dist_world.run(lambda lock: None, threading.Lock())
        """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    what = POSITIONAL.format(i=0)
    assert CANNOT_PICKLE.format(what=what, type="lock", error="cannot pickle '_thread.lock' object") in out, out
    assert "dist_world.run(lambda lock: None, threading.Lock())" in out
    assert "payload.py" not in out and "cloudpickle" not in out and "During handling" not in out, out
