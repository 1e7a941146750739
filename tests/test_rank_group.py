"""The dist_world fixture: results, errors, hangs, skips and pickling, on real gloo ranks."""

from __future__ import annotations

import re
import time

import pytest

from pytest_distcheck.ranks.errors import (
    STACK_WHEN_KILLED,
    PicklingError,
    RankError,
    RanksOutOfStepWarning,
    RankTimeout,
)
from pytest_distcheck.ranks.payload import CANNOT_PICKLE, CAPTURED, KEYWORD, NOT_CALLABLE
from pytest_distcheck.ranks.pool import CAPPED, EXITED_WITH, SKIPS_DISAGREE, capped_timeout
from pytest_distcheck.ranks.worker import NOT_PICKLED


def rank_and_size():
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size(), dist.get_backend()


def pid(*_rank):
    import os

    return os.getpid()


def all_reduce_sum(value):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(value + dist.get_rank())])
    dist.all_reduce(t)
    return t.item()


def test_results_come_back_in_rank_order(dist_world):
    assert dist_world.run(rank_and_size) == [(0, 2, "gloo"), (1, 2, "gloo")]


@pytest.mark.world_size(3)
def test_world_size_marker(dist_world):
    assert [r[:2] for r in dist_world.run(rank_and_size)] == [(0, 3), (1, 3), (2, 3)]
    assert dist_world.run(all_reduce_sum, 10) == [33.0, 33.0, 33.0]


@pytest.mark.world_size(1)
def test_world_size_one(dist_world):
    assert dist_world.run(rank_and_size) == [(0, 1, "gloo")]


def test_lambdas_closures_and_tensors_travel(dist_world):
    import torch

    offset = torch.arange(3.0)

    def add_rank(t, scale=1.0):
        import torch.distributed as dist

        return (t + offset) * scale + dist.get_rank()

    out = dist_world.run(add_rank, torch.ones(3), scale=2.0)
    torch.testing.assert_close(out[0], torch.tensor([2.0, 4.0, 6.0]))
    torch.testing.assert_close(out[1], torch.tensor([3.0, 5.0, 7.0]))
    assert dist_world.run(lambda: "λ") == ["λ", "λ"]


def test_an_exception_on_one_rank_names_it_and_stops_its_peer(dist_world):
    def fail_on_rank_1():
        import torch
        import torch.distributed as dist

        if dist.get_rank() == 1:
            raise ValueError("boom on one rank")
        dist.all_reduce(torch.ones(1))  # would wait forever for rank 1 without the fixture's care

    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        dist_world.run(fail_on_rank_1, timeout=30)
    assert time.monotonic() - t0 < 25, "the peer was not stopped; it waited for the timeout"
    err = info.value
    assert 1 in err.failed_ranks
    assert "rank 1: error (ValueError: boom on one rank)" in str(err)
    assert 'raise ValueError("boom on one rank")' in str(err)  # the remote traceback text
    # the next call runs on healthy, in-step ranks
    assert dist_world.run(all_reduce_sum, 0) == [1.0, 1.0]


def test_a_hung_rank_is_dumped_and_killed_after_the_timeout(dist_world):
    def only_rank_0_joins():
        import torch
        import torch.distributed as dist

        if dist.get_rank() == 0:
            dist.all_reduce(torch.ones(1))

    with pytest.raises(RankTimeout) as info:
        dist_world.run(only_rank_0_joins, timeout=2)
    err = info.value
    assert err.failed_ranks == [0]
    assert str(err).startswith(RankTimeout.headline(1).format(ranks="0"))
    assert STACK_WHEN_KILLED in str(err) and "all_reduce" in str(err)  # faulthandler dump
    assert dist_world.run(all_reduce_sum, 1) == [3.0, 3.0]  # a new pool serves the next call


def sleep_long():
    import time

    time.sleep(60)


@pytest.mark.timeout(4)
def test_a_pytest_timeout_below_the_calls_caps_it_so_the_ranks_stacks_are_shown(dist_world):
    # The call's own timeout (60 s) is above pytest-timeout's: without the cap, pytest-timeout's bare
    # "Timeout (>4.0s)" fails this test and the ranks' stacks are never shown.
    with pytest.raises(RankTimeout) as info:
        dist_world.run(sleep_long)
    text = str(info.value)
    assert CAPPED.format(outer=4) in text
    assert info.value.failed_ranks == [0, 1] and text.count("in sleep_long") == 2  # every rank's stack


@pytest.mark.parametrize(("timeout", "left", "expected"), [
    (60, 10, (8, CAPPED.format(outer=10))),  # 2 s left for the stack dump
    (5, 10, (5, "")),  # ends in time: untouched
    (60, 1, (0.5, CAPPED.format(outer=10))),  # little left: half of it
    (60, -1, (0.01, CAPPED.format(outer=10))),  # already past: the call still gets a start
])
def test_capped_timeout(timeout, left, expected):
    assert capped_timeout(timeout, left, 10.0) == expected


def test_pytest_timeouts_own_settings_reach_the_fixture(pytester):
    # Read through pytest-timeout's hook, as it resolved them: option, ini or marker.
    pytester.makepyfile("""
        import pytest
        from pytest_distcheck.ranks.plugin import _PYTEST_TIMEOUT

        def test_option(request):
            assert request.node.stash[_PYTEST_TIMEOUT][1] == 10

        @pytest.mark.timeout(3)
        def test_marker(request):
            assert request.node.stash[_PYTEST_TIMEOUT][1] == 3
    """)
    pytester.runpytest("--timeout", "10", "-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_system_exit_and_pytest_fail_in_a_rank_are_reported(dist_world):
    def leave():
        import sys

        sys.exit(3)

    with pytest.raises(RankError, match=r"rank 0: error \(SystemExit: 3\)"):
        dist_world.run(leave)
    with pytest.raises(RankError, match=r"Failed: rank says no"):
        dist_world.run(lambda: pytest.fail("rank says no"))


def test_a_rank_that_dies_is_reported_with_how_it_died(dist_world):
    def die_on_rank_0():
        import os

        import torch.distributed as dist

        if dist.get_rank() == 0:
            os._exit(7)
        return "alive"

    with pytest.raises(RankError, match=re.escape(f"rank 0: died ({EXITED_WITH.format(code=7)})")):
        dist_world.run(die_on_rank_0, timeout=20)
    assert dist_world.run(all_reduce_sum, 0) == [1.0, 1.0]


def test_skip_inside_every_rank_skips_the_test(dist_world):
    with pytest.raises(pytest.skip.Exception, match="no GPU here"):
        dist_world.run(lambda: pytest.skip("no GPU here"))


def test_ranks_that_disagree_on_skipping_fail(dist_world):
    def skip_on_rank_1():
        import torch.distributed as dist

        if dist.get_rank() == 1:
            pytest.skip("only here")

    with pytest.raises(RankError, match=re.escape(SKIPS_DISAGREE.split("(")[0])) as err:
        dist_world.run(skip_on_rank_1)
    assert str(err.value).startswith("rank(s) 1 failed: ranks disagree")  # the rank that skipped is named


def test_unpicklable_argument_is_named(dist_world):
    import threading

    what = KEYWORD.format(name="lock")
    with pytest.raises(PicklingError, match=re.escape(CANNOT_PICKLE.format(what=what, type="lock", error=""))):
        dist_world.run(lambda lock: None, lock=threading.Lock())


def test_an_unpicklable_variable_a_function_captures_is_named(dist_world):
    import threading

    lock = threading.Lock()

    def body():
        return lock.locked()

    what = CAPTURED.format(variable="lock", name=body.__qualname__)
    with pytest.raises(PicklingError, match=re.escape(CANNOT_PICKLE.format(what=what, type="lock", error=""))):
        dist_world.run(body)


def test_unpicklable_result_is_reported(dist_world):
    with pytest.raises(RankError, match=re.escape(NOT_PICKLED.split("{")[0])):
        dist_world.run(lambda: __import__("threading").Lock())


def test_not_callable_is_a_type_error(dist_world):
    with pytest.raises(TypeError, match=re.escape(NOT_CALLABLE.format(type="int"))):
        dist_world.run(42)


def test_rank_output_is_tagged_and_captured(dist_world, capsys):
    def hello():
        import torch.distributed as dist

        print(f"hello from {dist.get_rank()}")

    dist_world.run(hello)
    out = capsys.readouterr().out
    assert "[rank 0] hello from 0" in out and "[rank 1] hello from 1" in out


def test_state_a_test_leaves_behind_is_reset(dist_world):
    def mess_up():
        import os

        import torch
        import torch.distributed as dist

        torch.manual_seed(1234)
        torch.set_default_dtype(torch.float64)
        os.environ["DISTCHECK_LEAK"] = "1"
        dist.new_group([0, 1])
        return torch.rand(1).item()

    def look():
        import os

        import torch
        import torch.distributed as dist

        return (torch.get_default_dtype(), os.environ.get("DISTCHECK_LEAK"),
                len(dist.distributed_c10d._world.pg_map))

    dist_world.run(mess_up)
    assert dist_world.run(look) == [(pytest.importorskip("torch").float32, None, 1)] * 2


def test_a_destroyed_group_is_rebuilt(dist_world):
    def destroy():
        import torch.distributed as dist

        dist.destroy_process_group()

    dist_world.run(destroy)
    assert dist_world.run(all_reduce_sum, 0) == [1.0, 1.0]


@pytest.mark.fresh_ranks
def test_fresh_ranks_starts_every_pool_the_test_calls_anew(dist_world, monkeypatch):
    # Ranks of another world size and of another debug level, alive before this test's first call on each.
    registry = dist_world._registry
    old = [p for size, debug in ((4, None), (2, "DETAIL"))
           for p in registry.get(size, "gloo", debug).run(pid, (), {}, 60)]
    four = dist_world.spawn(pid, nprocs=4)
    assert set(four).isdisjoint(old)
    assert dist_world.spawn(pid, nprocs=4) == four  # only the first call of each pool in the test restarts it
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    assert set(dist_world.run(pid)).isdisjoint(old)


def lone_async_all_reduce(*_rank):
    import torch
    import torch.distributed as dist

    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1), async_op=True)  # never matched: the ranks end out of step


def test_an_out_of_step_warning_points_at_the_tests_call(dist_world):
    with pytest.warns(RanksOutOfStepWarning) as record:
        dist_world.run(lone_async_all_reduce)
        dist_world.spawn(lone_async_all_reduce)
    assert [w.filename for w in record] == [__file__, __file__]  # not the kit's group.py
