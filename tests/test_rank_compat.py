"""Suites written for mp.spawn run on dist_world.spawn; asserts in ranks show values; world size by parameter."""

from __future__ import annotations

import os
import re
import sys

import pytest

from pytest_distcheck.ranks.errors import RankError
from pytest_distcheck.ranks.group import NO_JOIN
from pytest_distcheck.ranks.plugin import BAD_DEBUG_MARKER, LATE_MARKER, SESSION_LEVEL, WORLD_SIZE_TWICE
from pytest_distcheck.ranks.report import STOPPED
from pytest_distcheck.ranks.worker import HOW_BACKEND, WRONG_BACKEND


def checks_a_sum(expected):
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    total = t.item()
    assert total == expected


def test_a_failing_assert_in_a_rank_shows_its_values(dist_world):
    with pytest.raises(RankError) as info:
        dist_world.run(checks_a_sum, 5.0)
    assert "assert 2.0 == 5.0" in str(info.value)  # pytest's rewriting, done in the ranks


def test_a_nested_function_assert_shows_values_too(dist_world):
    def nested():
        value = 3
        assert value == 4

    with pytest.raises(RankError, match=r"assert 3 == 4"):
        dist_world.run(nested)


# --- an mp.spawn course test, as written for torch.multiprocessing.spawn ------------------------------
def _course_worker(rank, world_size, results_dir):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"  # hard-coded, as course code does: unused on the pool
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    with open(os.path.join(results_dir, f"rank{rank}.txt"), "w") as f:
        f.write(str(t.item()))
    dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, 3])
def test_ported_mp_spawn_course_test(dist_world, tmp_path, world_size):
    # was: mp.spawn(_course_worker, args=(world_size, str(tmp_path)), nprocs=world_size, join=True)
    dist_world.spawn(_course_worker, args=(world_size, str(tmp_path)), nprocs=world_size, join=True)
    total = world_size * (world_size + 1) / 2
    assert [float((tmp_path / f"rank{r}.txt").read_text()) for r in range(world_size)] == [total] * world_size


def test_init_destroy_init_again_within_one_call(dist_world):
    def twice(rank):
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")  # no-op: the pool's group is up
        dist.destroy_process_group()
        dist.init_process_group(backend="gloo", init_method="env://")  # a new group on the pool's store
        t = torch.ones(1)
        dist.all_reduce(t)
        dist.destroy_process_group()
        return rank, t.item()

    assert dist_world.spawn(twice) == [(0, 2.0), (1, 2.0)]
    assert dist_world.run(lambda: __import__("torch.distributed").distributed.get_world_size()) == [2, 2]


def _group_arrivals() -> list[bytes]:
    import gc

    rank = next(o for o in gc.get_objects() if type(o).__name__ == "_Rank")
    return [rank.store.get(f"pg/{rank.generation}/up/arrived/{r}") for r in range(rank.world_size)]


@pytest.mark.fresh_ranks
def test_no_rank_runs_user_code_before_every_peer_has_connected_the_group(dist_world):
    """A rank whose gloo connect returned first, and whose user code destroyed the group at once, closed a socket
    its peer was still connecting (test_init_destroy_init_again_within_one_call failed so in .ci/run, 2 runs in
    5): each rank waits on the store for every peer after the group is made."""
    assert dist_world.run(_group_arrivals) == [[b"1", b"1"]] * 2


def test_an_incompatible_init_says_what_to_remove(dist_world):
    def wrong(rank):
        import torch.distributed as dist

        dist.init_process_group("gloo", rank=rank, world_size=4)

    with pytest.raises(RankError, match=r"world_size=4 \(the group has 2 ranks\).*Remove the init_process_group"):
        dist_world.spawn(wrong)


def _wants_nccl(rank):
    import torch.distributed as dist

    dist.init_process_group("nccl")


def test_an_init_with_another_backend_gets_a_hint_about_the_backend_only(dist_world):
    """Fresh-user trial t5: the hint was about the world size, which was right."""
    with pytest.raises(RankError) as info:
        dist_world.spawn(_wants_nccl)
    text = str(info.value)
    assert WRONG_BACKEND.format(backend="nccl", group="gloo") in text and HOW_BACKEND.format(backend="gloo") in text
    assert "world size" not in text.split("Remove the init_process_group", 1)[1].split("\n", 1)[0]


def test_spawn_refuses_join_false(dist_world):
    with pytest.raises(TypeError, match=re.escape(NO_JOIN)):
        dist_world.spawn(print, join=False)


def world_size():
    import torch.distributed as dist

    return dist.get_world_size()


@pytest.mark.parametrize("dist_world", [1, 3], indirect=True)
def test_world_size_by_indirect_parametrize(dist_world, request):
    n = request.node.callspec.params["dist_world"]
    assert dist_world.run(world_size) == [n] * n


RUNTIME_MARKER = """
import pytest

def test_adds_marker_late(dist_world, request):
    request.node.add_marker(pytest.mark.world_size(4))
    dist_world.run(lambda: None)

@pytest.mark.world_size(3)
@pytest.mark.parametrize("dist_world", [2], indirect=True)
def test_twice(dist_world):
    pass

@pytest.mark.dist_debug("LOUD")
def test_bad_level(dist_world):
    pass
"""


def test_misplaced_world_sizes_and_levels_are_clear_errors(pytester):
    pytester.makepyfile(RUNTIME_MARKER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*test_twice?2?: " + WORLD_SIZE_TWICE,
        "*test_bad_level: " + BAD_DEBUG_MARKER.format(value="LOUD"),
        "*test_adds_marker_late: " + LATE_MARKER.format(marker="world_size", size=2, level=SESSION_LEVEL, fix="*"),
    ])


def test_a_package_rewritten_in_the_parent_keeps_its_resources_in_the_ranks(pytester):
    """A module pytest rewrote (a plugin, or a package named by register_assert_rewrite) is imported in the
    ranks through the kit's rewriting loader; importlib.resources must still find the files beside it
    (the kit's own schemas are read that way)."""
    pkg = pytester.mkpydir("withdata")
    (pkg / "data.txt").write_text("payload")
    pytester.makeconftest("import pytest\npytest.register_assert_rewrite('withdata')\n")
    pytester.makepyfile(
        """
        import withdata  # rewritten here, so the ranks import it through the kit's loader

        def read():
            import importlib.resources
            return importlib.resources.files("withdata").joinpath("data.txt").read_text()

        def test_reads(dist_world):
            assert dist_world.run(read) == ["payload", "payload"]
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


# --- which functions travel by reference: importability is decided as the ranks would import ----------
def test_a_function_of_an_importable_test_module_goes_by_reference():
    from pytest_distcheck.ranks.payload import _by_value

    assert _by_value(checks_a_sum) == []  # this module is on sys.path (prepend mode): the ranks import it
    assert _by_value(int) == [] and _by_value(os.makedirs) == []  # built-in and frozen modules


def test_a_module_imported_from_off_sys_path_goes_by_value(tmp_path, monkeypatch):
    """--import-mode=importlib imports tests/test_x.py as ``tests.test_x`` without putting its folder on
    sys.path: find_spec would answer from sys.modules, yet the ranks cannot import it."""
    import importlib.util

    from pytest_distcheck.ranks.payload import _by_value

    (tmp_path / "offpath_pkg").mkdir()
    file = tmp_path / "offpath_pkg" / "test_mod.py"
    file.write_text("def fn():\n    return 1\n")
    spec = importlib.util.spec_from_file_location("offpath_pkg.test_mod", file)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "offpath_pkg.test_mod", module)
    spec.loader.exec_module(module)
    assert _by_value(module.fn) == [module]


IMPORTLIB_MODE = """
import torch.distributed as dist

def body(x):
    assert x + dist.get_rank() == 1  # fails on rank 1 only (two failing ranks race for the headline)
    return x

def test_module_level(dist_world):
    dist_world.run(body, 1)
"""


def test_import_mode_importlib_test_modules_in_subfolders(pytester):
    # The project is a folder below pytest's cwd (which `python -m pytest` puts on sys.path), as under
    # the `pytest` command, whose sys.path has no project folder: its modules are importable only here.
    for folder, init in (("plain", False), ("pkg", True)):  # tests/ with and without __init__.py
        (pytester.path / "proj" / folder).mkdir(parents=True)
        if init:
            (pytester.path / "proj" / folder / "__init__.py").touch()
        (pytester.path / "proj" / folder / "test_e.py").write_text(IMPORTLIB_MODE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--import-mode=importlib",
                                           "--rootdir=proj", "proj")
    result.assert_outcomes(failed=2)
    result.stdout.no_fnmatch_line("*ModuleNotFoundError*")
    # rewritten in the parent, sent by value
    # Counted in the tracebacks only: under CI=true pytest's short summary repeats the whole message.
    rewritten = [line for line in result.stdout.lines
                 if line.startswith("E ") and "rank 1: error (AssertionError: assert (1 + 1) == 1)" in line]
    assert len(rewritten) == 2


def _record_rank(rank, results):
    results[rank] = rank * 10


def test_a_manager_dict_passed_to_spawn_works_in_the_ranks(dist_world):
    # The ranks fork from a zygote of their own, so their authkey must be set to this process's.
    import multiprocessing

    with multiprocessing.Manager() as manager:
        results = manager.dict()
        dist_world.spawn(_record_rank, args=(results,))
        assert dict(results) == {0: 0, 1: 10}


def _fails_on_rank_1(rank, world_size):
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    if rank == 1:
        raise ValueError("bad input on rank 1")


def test_spawn_raises_what_mp_spawn_raises(dist_world):
    # A ported `with pytest.raises(mp.ProcessRaisedException, match=...)` keeps working.
    import torch.multiprocessing as mp

    with pytest.raises(mp.ProcessRaisedException, match="bad input on rank 1") as info:
        dist_world.spawn(_fails_on_rank_1, args=(2,))
    assert isinstance(info.value, RankError) and info.value.error_index == 1
    assert f"rank 0: {STOPPED}" in str(info.value) or "rank 0: ok" in str(info.value)


def _only_rank_0_all_reduces_then_destroys(rank):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=2)
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # the course bug: rank 1 never joins
    dist.destroy_process_group()  # rank 1 gets here at once and closes its connections


def test_a_lone_collective_cut_off_by_a_peers_destroy_is_explained(dist_world, tmp_path):
    # Not "a remote worker crashing": rank 1 returned; rank 0 was left alone in its collective.
    with pytest.raises(RankError) as info:
        dist_world.spawn(_only_rank_0_all_reduces_then_destroys, nprocs=2)
    text = str(info.value)
    assert text.startswith("rank(s) 0 failed: rank 1 returned and closed its connections while rank 0 was "
                           "still in a collective: a collective only some ranks issued?\n"), text
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL pytest" in text
    assert "test_a_lone_collective_cut_off_by_a_peers_destroy_is_explained" in text
    assert "rank 1: ok" in text and "rank 0: error (RuntimeError: " in text  # gloo's own words are kept
    assert "by peer" in text  # closed or reset, as gloo saw it
    dist_world.spawn(_course_worker, args=(2, str(tmp_path)), nprocs=2)  # the next call is served as usual
    assert (tmp_path / "rank1.txt").read_text() == "3.0"


def test_a_spawn_error_needs_no_torch_here(monkeypatch):
    from pytest_distcheck.ranks.errors import RankOutcome, spawn_error

    monkeypatch.delitem(sys.modules, "torch.multiprocessing", raising=False)
    err = RankError([RankOutcome(0, "error", "ValueError: x", phase="call")])
    assert spawn_error(err) is err and "torch.multiprocessing" not in sys.modules


def _on_own_store(path: str, kind: str):
    import torch
    import torch.distributed as dist

    store = dist.HashStore() if kind == "hash" else dist.FileStore(path, dist.get_world_size())
    try:
        dist.init_process_group("gloo", store=store, rank=dist.get_rank(), world_size=dist.get_world_size())
    except RuntimeError as exc:
        return str(exc)
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item(), os.path.getsize(path) > 0  # the group met on the user's store: its file holds the keys


def test_a_users_store_in_init_process_group_is_honoured(dist_world, tmp_path):
    path = str(tmp_path / "my-store")
    assert dist_world.run(_on_own_store, path, "file") == [(2.0, True)] * 2
    assert dist_world.run(checks_a_sum, 2) == [None, None]  # the next call is back on the pool's own group


def test_a_hash_store_no_other_rank_can_reach_is_refused_saying_why(dist_world, tmp_path):
    from pytest_distcheck.ranks.worker import USER_HASH_STORE

    assert dist_world.run(_on_own_store, str(tmp_path / "unused"), "hash") == [USER_HASH_STORE] * 2



def test_library_state_left_by_an_earlier_call_is_noted_with_its_test(monkeypatch):
    import types

    from pytest_distcheck.ranks.errors import RankOutcome
    from pytest_distcheck.ranks.module_state import MEGATRON_LEFT_INITIALISED, StateWatch

    fake = types.ModuleType("megatron.core.parallel_state")  # megatron-core's globals, as they look initialised
    fake._DATA_PARALLEL_GROUP = None
    monkeypatch.setitem(sys.modules, "megatron.core.parallel_state", fake)
    watch = StateWatch()
    watch.after_call("tests/test_a.py::test_one")
    assert watch.note() == ""  # nothing initialised
    fake._DATA_PARALLEL_GROUP = object()
    watch.after_call("tests/test_a.py::test_two")
    watch.after_call("tests/test_a.py::test_three")  # still the state test_two left
    note = MEGATRON_LEFT_INITIALISED.format(test="tests/test_a.py::test_two")
    assert watch.note() == note
    err = RankError([RankOutcome(0, "error", "AssertionError: x", note=note), RankOutcome(1, "error", "y", note=note)])
    assert f"note (ranks 0, 1): {note}" in str(err).splitlines()
    fake._DATA_PARALLEL_GROUP = None  # destroy_model_parallel
    watch.after_call("tests/test_a.py::test_four")
    assert watch.note() == ""
