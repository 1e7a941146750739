"""Isolation and recovery of the persistent rank pool: crashes, kills, out-of-step ranks, leaked state."""

from __future__ import annotations

import os
import select
import signal
import threading

import pytest

from pytest_distcheck.ranks.errors import RankError, RanksOutOfStepWarning
from pytest_distcheck.ranks.pool import KILLED_BY
from pytest_distcheck.ranks.report import STOPPED


def pid_and_parent():
    return os.getpid(), os.getppid()


def in_step_all_reduce():
    """A barrier and an all-reduce: only ranks in step with each other get through both."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    return t.item()


def _kill_and_wait(pid: int, seconds: float = 10.0) -> bool:
    """SIGKILL ``pid``; True once all its threads are gone (a pidfd turns readable then)."""
    fd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)


def test_a_segfault_is_reported_with_its_signal_and_stack(dist_world):
    def crash_on_rank_1():
        import ctypes

        import torch
        import torch.distributed as dist

        if dist.get_rank() == 1:
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        dist.all_reduce(torch.ones(1))  # fails fast once rank 1's sockets close

    before = dist_world.run(pid_and_parent)
    with pytest.raises(RankError) as info:
        dist_world.run(crash_on_rank_1, timeout=30)
    text = str(info.value)
    assert f"rank 1: died ({KILLED_BY.format(signal='SIGSEGV')})" in text
    assert "Fatal Python error: Segmentation fault" in text and "crash_on_rank_1" in text  # faulthandler
    after = dist_world.run(pid_and_parent)
    assert {p for p, _ in after}.isdisjoint(p for p, _ in before)  # fresh ranks...
    assert {z for _, z in after} == {z for _, z in before}  # ...forked from the same zygote (no new import)
    assert dist_world.run(in_step_all_reduce) == [3.0, 3.0]


def test_a_rank_killed_from_outside_during_a_call(dist_world):
    pids = [p for p, _ in dist_world.run(pid_and_parent)]

    def rank_1_sleeps_rank_0_waits_for_it():
        import time

        import torch
        import torch.distributed as dist

        if dist.get_rank() == 1:
            time.sleep(60)
        dist.all_reduce(torch.ones(1))

    killer = threading.Timer(1.0, os.kill, (pids[1], signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(RankError) as info:
            dist_world.run(rank_1_sleeps_rank_0_waits_for_it, timeout=30)
    finally:
        killer.cancel()
    assert f"rank 1: died ({KILLED_BY.format(signal='SIGKILL')})" in str(info.value)
    # rank 0's all-reduce failed at once instead of waiting out the timeout; gloo's error is kept below
    assert f"rank 0: {STOPPED}" in str(info.value) and "Connection closed by peer" in str(info.value)
    assert dist_world.run(in_step_all_reduce) == [3.0, 3.0]


def test_a_rank_killed_between_calls_is_replaced(dist_world):
    pids = [p for p, _ in dist_world.run(pid_and_parent)]
    assert _kill_and_wait(pids[0])
    assert dist_world.run(in_step_all_reduce) == [3.0, 3.0]
    assert set(p for p, _ in dist_world.run(pid_and_parent)).isdisjoint(pids)


def test_ranks_left_out_of_step_are_detected_and_replaced(dist_world):
    def only_rank_0_starts_an_all_reduce():
        import torch
        import torch.distributed as dist

        if dist.get_rank() == 0:
            dist.all_reduce(torch.ones(1), async_op=True)  # never waited on, never matched

    pids = [p for p, _ in dist_world.run(pid_and_parent)]
    with pytest.warns(RanksOutOfStepWarning, match=r"rank 0: \d+, rank 1: \d+") as record:
        assert dist_world.run(only_rank_0_starts_an_all_reduce) == [None, None]
    # the warning proposes the exact re-run that makes torch name the unmatched collective
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL pytest" in str(record[0].message)
    assert "test_ranks_left_out_of_step_are_detected_and_replaced" in str(record[0].message)
    assert dist_world.run(in_step_all_reduce) == [3.0, 3.0]
    assert set(p for p, _ in dist_world.run(pid_and_parent)).isdisjoint(pids)


def members_use_a_subgroup(members):
    """Correct torch usage: every rank calls new_group, only its members use it."""
    import torch
    import torch.distributed as dist

    group = dist.new_group(members)
    t = torch.ones(1)
    if dist.get_rank() in members:
        dist.all_reduce(t, group=group)
    return t.item()


@pytest.mark.filterwarnings("error::pytest_distcheck.ranks.errors.RanksOutOfStepWarning")
@pytest.mark.parametrize(("dist_world", "members"), [(4, [0, 1]), (2, [0])], indirect=["dist_world"])
def test_a_subgroup_only_its_members_use_is_not_out_of_step(dist_world, members, monkeypatch):
    # Members' pg_map grew, non-members' did not: both must say "subgroups made" (no sequence number),
    # and a rank without a number is never compared.
    from pytest_distcheck.ranks.pool import RankPool

    seen = []
    collect = RankPool._collect

    def spy(self, *args):
        out = collect(self, *args)
        seen.append(out[2:])  # (sequence numbers, keep) per rank
        return out

    monkeypatch.setattr(RankPool, "_collect", spy)
    n = dist_world.world_size
    expected = [float(len(members)) if r in members else 1.0 for r in range(n)]
    pids = dist_world.run(pid_and_parent)
    for _ in range(2):
        assert dist_world.run(members_use_a_subgroup, members) == expected
    assert seen[1] == ([None] * n, [False] * n)
    assert dist_world.run(in_step_all_reduce) == [n * (n + 1) / 2] * n  # rebuilt group, in step
    assert dist_world.run(pid_and_parent) == pids  # the ranks were kept, not replaced


def test_the_group_is_kept_while_ranks_stay_in_step(dist_world):
    def group_id():
        import torch.distributed as dist

        return id(dist.distributed_c10d._get_default_group())

    first = dist_world.run(group_id)
    dist_world.run(in_step_all_reduce)
    assert dist_world.run(group_id) == first


def test_more_state_is_reset_between_calls(dist_world, tmp_path):
    def mess_up(where):
        import os
        import random
        import warnings

        import numpy
        import torch

        torch.set_grad_enabled(False)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(2)
        numpy.random.seed(7)
        random.seed(7)
        warnings.simplefilter("error")
        os.chdir(where)

    def look():
        import os
        import random
        import warnings

        import numpy
        import torch

        return (torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(),
                numpy.random.rand(), random.random(), torch.rand(1).item(), len(warnings.filters), os.getcwd())

    before = dist_world.run(look)
    dist_world.run(mess_up, str(tmp_path))
    after = dist_world.run(look)
    assert after == before  # same RNG draws too: every call starts from the same RNG state
    assert after[0][:3] == (True, False, 1)


@pytest.fixture
def numpy_rng():
    """NumPy's global RNG, seeded for the test and put back after it (the tests below move it)."""
    numpy = pytest.importorskip("numpy")
    before = numpy.random.get_state()
    numpy.random.seed(1234)
    yield numpy
    numpy.random.set_state(before)


def test_numpy_rng_restore_puts_back_draws_seeds_and_the_cached_gaussian(numpy_rng, monkeypatch):
    from pytest_distcheck.ranks.worker import NumpyRng

    np = numpy_rng
    saved = NumpyRng(np)
    assert saved._raw is not None  # the fast path is on with this numpy: the checks below exercise it
    first = (np.random.rand(), np.random.standard_normal())  # leaves a cached Gaussian behind
    saved.restore()
    assert (np.random.rand(), np.random.standard_normal()) == first
    saved.restore()
    np.random.seed(7)
    saved.restore()
    assert np.random.rand() == first[0]
    saved.restore()
    with monkeypatch.context() as m:  # nothing drew since: no set_state at all (the point of the fast path)
        m.setattr(np.random, "set_state", None)
        saved.restore()
    assert np.random.rand() == first[0]


def test_numpy_rng_restore_without_the_fast_path_still_restores(numpy_rng):
    from pytest_distcheck.ranks.worker import NumpyRng

    np = numpy_rng
    np.random.standard_normal()  # a cached Gaussian in the saved state: no fast path
    saved = NumpyRng(np)
    assert saved._raw is None
    first = [np.random.standard_normal() for _ in range(3)]
    saved.restore()
    assert [np.random.standard_normal() for _ in range(3)] == first


def test_fresh_ranks_do_not_see_module_state_of_earlier_calls(dist_world):
    import sys

    def mark_a_module():
        import sys

        sys.modules["json"].distcheck_mark = True

    def marked():
        import sys

        return getattr(sys.modules["json"], "distcheck_mark", False)

    dist_world.run(mark_a_module)
    assert dist_world.run(marked) == [True, True]  # module state persists on the same pool (documented)
    pool = dist_world._registry.get(dist_world.world_size, dist_world.backend)
    pool.close()  # what @pytest.mark.fresh_ranks does before a test
    assert dist_world.run(marked) == [False, False]
    assert "json" in sys.modules  # (the parent is untouched either way)


def test_a_longer_timeout_gets_a_new_group_on_a_fresh_store_prefix(dist_world):
    # A rebuilt group must not reuse the old group's store keys (peers would dial stale addresses).
    for timeout in (30, 31, 32, 33, 34):
        assert dist_world.run(in_step_all_reduce, timeout=timeout) == [3.0, 3.0]
