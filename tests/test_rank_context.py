"""A call behaves like the test it runs in: environment, cwd, output of every outcome, timeouts, debug level."""

from __future__ import annotations

import os

import pytest

from pytest_distcheck.ranks.errors import RankError, RankTimeout
from pytest_distcheck.ranks.pool import EXITED_WITH, KILLED_BY
from pytest_distcheck.ranks.report import DDP_DETAIL_SEGFAULT


def getenv(name):
    return os.environ.get(name)


def env_and_cwd(name):
    return os.environ.get(name), os.getcwd()


def write_relative(name):
    import torch.distributed as dist

    with open(name, "w") as f:
        f.write(str(dist.get_rank()))
    return os.path.abspath(name)


def test_env_and_cwd_follow_the_test(dist_world, monkeypatch, tmp_path):
    dist_world.run(os.getpid)  # the ranks run already: what follows must travel with each call
    monkeypatch.setenv("DISTCHECK_T_VAR", "set by the test")
    monkeypatch.chdir(tmp_path)
    assert dist_world.run(env_and_cwd, "DISTCHECK_T_VAR") == [("set by the test", str(tmp_path))] * 2
    monkeypatch.delenv("DISTCHECK_T_VAR")
    monkeypatch.setenv("DISTCHECK_T_OTHER", "x")
    assert dist_world.run(env_and_cwd, "DISTCHECK_T_VAR")[0] == (None, str(tmp_path))
    paths = dist_world.run(write_relative, "ckpt.txt")
    assert paths == [str(tmp_path / "ckpt.txt")] * 2  # a relative write lands in the test's cwd
    monkeypatch.undo()
    assert dist_world.run(env_and_cwd, "DISTCHECK_T_OTHER") == [(None, os.getcwd())] * 2


def test_a_variable_the_session_started_with_can_be_removed(dist_world, monkeypatch):
    monkeypatch.delenv("PATH")
    assert dist_world.run(getenv, "PATH") == [None, None]
    monkeypatch.undo()
    assert dist_world.run(getenv, "PATH") == [os.environ["PATH"]] * 2


def print_then_hang():
    import sys
    import time

    import torch.distributed as dist

    print(f"rank {dist.get_rank()} about to wait")
    print("to stderr too", file=sys.stderr)
    time.sleep(600)


def test_output_of_a_hung_rank_is_shown(dist_world):
    with pytest.raises(RankTimeout) as info:
        dist_world.run(print_then_hang, timeout=1.5)
    text = str(info.value)
    assert "rank 0 about to wait" in text and "rank 1 about to wait" in text
    assert "to stderr too" in text


def test_output_before_os_exit_is_shown(dist_world):
    def leave_abruptly():
        import torch.distributed as dist

        print(f"last words of rank {dist.get_rank()}", flush=True)
        dist.barrier()  # both ranks have printed before either leaves (else a fast exit stops the other first)
        os._exit(3)

    with pytest.raises(RankError) as info:
        dist_world.run(leave_abruptly, timeout=30)
    assert f"died ({EXITED_WITH.format(code=3)})" in str(info.value)
    assert "last words of rank 0" in str(info.value) and "last words of rank 1" in str(info.value)


def test_output_of_a_raising_rank_and_c_level_output_are_shown(dist_world):
    def shout_and_fail():
        import ctypes

        libc = ctypes.CDLL(None)
        libc.write(1, b"from C on fd 1\n", 15)
        print("from python")
        raise ValueError("failed after printing")

    with pytest.raises(RankError) as info:
        dist_world.run(shout_and_fail)
    assert "from C on fd 1" in str(info.value) and "from python" in str(info.value)


def group_timeout_s(group=None):
    import torch
    import torch.distributed as dist

    group = group or dist.distributed_c10d._get_default_group()
    return group._get_backend(torch.device("cpu")).options._timeout.total_seconds()


def subgroup_timeouts_s():
    from datetime import timedelta

    import torch.distributed as dist

    plain, explicit = dist.new_group(), dist.new_group(timeout=timedelta(seconds=7))
    by_size, _ = dist.new_subgroups(group_size=1)
    return [group_timeout_s(g) for g in (None, plain, by_size, explicit)]


def test_the_group_timeout_is_above_the_call_timeout(dist_world):
    # Equal timeouts race: gloo's "Timed out waiting" could reach the pool first, as a RankError.
    for timeout in (5, 20):
        assert all(t > timeout + 5 for t in dist_world.run(group_timeout_s, timeout=timeout))


def test_a_subgroup_without_a_timeout_gets_the_groups(dist_world):
    # torch gives it its own default (gloo: 30 min): under a call of an hour gloo's "Timed out waiting" on
    # the subgroup would come before the kit's RankTimeout. A timeout the test names is kept.
    for world, plain, by_size, explicit in dist_world.run(subgroup_timeouts_s, timeout=3600):
        assert plain == by_size == world > 3600 + 5
        assert explicit == 7


def test_torchs_subgroup_default_is_back_after_the_call():
    from datetime import timedelta

    import torch.distributed as dist

    from pytest_distcheck.ranks.worker import subgroup_timeout

    c10d = dist.distributed_c10d
    if not hasattr(c10d, "_get_default_timeout"):
        pytest.skip("this torch has no _get_default_timeout: subgroups keep torch's default")
    before = c10d._get_default_timeout(dist.Backend.GLOO)
    with subgroup_timeout(dist, 42.0):
        assert c10d._get_default_timeout(dist.Backend.GLOO) == timedelta(seconds=42)
    assert c10d._get_default_timeout(dist.Backend.GLOO) == before


def test_a_lone_collective_always_ends_as_rank_timeout(dist_world):
    def only_rank_0_all_reduces():
        import torch
        import torch.distributed as dist

        if dist.get_rank() == 0:
            dist.all_reduce(torch.ones(1))

    dist_world.run(group_timeout_s, timeout=1)  # a group whose timeout is as short as the call's allows
    with pytest.raises(RankTimeout) as info:
        dist_world.run(only_rank_0_all_reduces, timeout=1)
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL pytest" in str(info.value)  # the re-run it proposes
    assert "test_a_lone_collective_always_ends_as_rank_timeout" in str(info.value)


def debug_level():
    import torch.distributed as dist

    return str(dist.get_debug_level())


def test_set_debug_level_does_not_leak_to_the_next_call(dist_world):
    def set_detail():
        import torch.distributed as dist

        dist.set_debug_level(dist.DebugLevel.DETAIL)

    before = dist_world.run(debug_level)
    dist_world.run(set_detail)
    assert dist_world.run(debug_level) == before


@pytest.mark.dist_debug("DETAIL")
def test_debug_marker_runs_on_ranks_with_that_level(dist_world):
    assert dist_world.run(debug_level) == ["DebugLevel.DETAIL"] * 2
    assert dist_world.run(getenv, "TORCH_DISTRIBUTED_DEBUG") == ["DETAIL"] * 2


@pytest.mark.dist_debug("DETAIL")
def test_ddp_segfault_under_detail_is_explained(dist_world):
    def wrap_in_ddp():
        import torch

        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))

    try:
        dist_world.run(wrap_in_ddp, timeout=60)
    except RankError as exc:
        assert KILLED_BY.format(signal="SIGSEGV") in str(exc)
        assert DDP_DETAIL_SEGFAULT in str(exc)
    else:
        pytest.skip("DDP under DETAIL works with this torch: the known crash is gone")


def test_torch_distributed_debug_set_by_the_test_selects_ranks_of_that_level(dist_world, monkeypatch):
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")  # as before mp.spawn: the children import with it
    assert dist_world.run(debug_level) == ["DebugLevel.DETAIL"] * 2
    monkeypatch.undo()
    assert dist_world.run(debug_level) == [f"DebugLevel.{os.environ.get('TORCH_DISTRIBUTED_DEBUG', 'OFF')}"] * 2


def test_an_unmarked_test_keeps_the_session_level(dist_world):
    assert dist_world.run(debug_level) == [f"DebugLevel.{os.environ.get('TORCH_DISTRIBUTED_DEBUG', 'OFF')}"] * 2


def test_the_env_tracker_sees_every_kind_of_change(monkeypatch):
    from pytest_distcheck.ranks.context import EnvTracker

    monkeypatch.setenv("DISTCHECK_T_KEEP", "1")
    tracker = EnvTracker(dict(os.environ))
    assert tracker.diff() == ({}, [])
    monkeypatch.setenv("DISTCHECK_T_NEW", "n")
    monkeypatch.setenv("DISTCHECK_T_KEEP", "2")
    assert tracker.diff() == ({"DISTCHECK_T_KEEP": "2", "DISTCHECK_T_NEW": "n"}, [])
    monkeypatch.delenv("DISTCHECK_T_KEEP")
    assert tracker.diff() == ({"DISTCHECK_T_NEW": "n"}, ["DISTCHECK_T_KEEP"])
    monkeypatch.undo()
    monkeypatch.setenv("DISTCHECK_T_KEEP", "1")
    assert tracker.diff() == ({}, [])


def test_live_tail_keeps_lines_and_characters_whole(tmp_path, capsys):
    from pytest_distcheck.ranks.pool import _Output

    out, err = tmp_path / "out", tmp_path / "err"
    out.touch()
    err.touch()
    tail = _Output(str(out), str(err))
    tail.mark()
    with open(out, "ab") as f:
        for byte in "héllo wörld\nλ-line".encode():  # one byte at a time, tailing after each
            f.write(bytes([byte]))
            f.flush()
            tail.tail(0)
    tail.tail(0, final=True)
    assert capsys.readouterr().out == "[rank 0] héllo wörld\n[rank 0] λ-line\n"
    assert tail.call_text() == ("héllo wörld\nλ-line", "")
    tail.close()


def test_the_env_tracker_follows_changes_made_between_calls(monkeypatch):
    from pytest_distcheck.ranks.context import EnvTracker

    tracker = EnvTracker(dict(os.environ))
    for i in range(3):  # as pytest does with PYTEST_CURRENT_TEST in every test phase
        monkeypatch.setenv("DISTCHECK_T_PHASE", str(i))
        assert tracker.diff() == ({"DISTCHECK_T_PHASE": str(i)}, [])
    monkeypatch.setenv("PATH", "/nowhere")
    monkeypatch.delenv("DISTCHECK_T_PHASE")
    assert tracker.diff() == ({"PATH": "/nowhere"}, [])
    monkeypatch.delenv("PATH")
    assert tracker.diff() == ({}, ["PATH"])
    monkeypatch.undo()
    assert tracker.diff() == ({}, [])


def test_the_env_tracker_takes_pytests_own_variable_alone_or_with_others(monkeypatch):
    from pytest_distcheck.ranks.context import EnvTracker

    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::a (call)")
    tracker = EnvTracker(dict(os.environ))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::b (call)")  # the only change (the fast path)
    assert tracker.diff() == ({"PYTEST_CURRENT_TEST": "t.py::b (call)"}, [])
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::c (call)")  # changed with another variable
    monkeypatch.setenv("DISTCHECK_T_WITH", "w")
    assert tracker.diff() == ({"PYTEST_CURRENT_TEST": "t.py::c (call)", "DISTCHECK_T_WITH": "w"}, [])
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::a (call)")  # back to the session's value
    assert tracker.diff() == ({"DISTCHECK_T_WITH": "w"}, [])
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("DISTCHECK_T_WITH")
    assert tracker.diff() == ({}, ["PYTEST_CURRENT_TEST"])
