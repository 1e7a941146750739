"""How failed calls are explained: peers that followed a failure down, the DETAIL re-run, known torch crashes."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from pytest_distcheck.ranks import report
from pytest_distcheck.ranks.errors import RankError, RankOutcome
from pytest_distcheck.ranks.report import DDP_DETAIL_SEGFAULT, STOPPED, blame, detail_rerun, known_crash
from pytest_distcheck.ranks.tempdirs import NEW_PREFIX, SESSION_PREFIX, SessionFolder, sweep_dead_sessions


def test_a_setup_failure_after_a_peer_raised_is_reported_as_stopped():
    outcomes = [RankOutcome(0, "error", "ValueError: boom", phase="call"),
                RankOutcome(1, "error", "RuntimeError: Gloo connectFullMesh failed", traceback="tb", phase="setup")]
    out = blame(outcomes)
    assert out[0] is outcomes[0]
    assert (out[1].status, out[1].error, out[1].traceback) == ("stopped", STOPPED, "tb")


def test_setup_failures_on_every_rank_stay_errors():
    outcomes = [RankOutcome(r, "error", "RuntimeError: bad store", phase="setup") for r in range(2)]
    assert blame(outcomes) == outcomes


def test_a_dead_peer_also_counts_as_the_culprit():
    outcomes = [RankOutcome(0, "died", "killed by SIGSEGV"), RankOutcome(1, "error", "x", phase="setup")]
    assert blame(outcomes)[1].status == "stopped"


GLOO_CLOSED = ("RuntimeError: [third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
               "[127.0.0.1]:52141. This is typically caused by a remote worker crashing.")
GLOO_RESET = "RuntimeError: [pair.cc:537] Read error [127.0.0.1]:35476: Connection reset by peer. This is typically"


@pytest.mark.parametrize("gloo", [GLOO_CLOSED, GLOO_RESET])
def test_a_peer_cut_off_in_a_collective_by_a_failed_rank_is_stopped(gloo):
    outcomes = [RankOutcome(0, "error", "ZeroDivisionError: division by zero", phase="call"),
                RankOutcome(1, "error", gloo, traceback="tb", stderr="gloo log", phase="call")]
    out = blame(outcomes)
    assert out[0] is outcomes[0]
    assert (out[1].status, out[1].error, out[1].traceback, out[1].stderr) == ("stopped", STOPPED, "tb", "gloo log")
    text = str(RankError(out))
    assert text.startswith(RankError.headline(1).format(ranks="0") + "\n")  # the one that failed of its own
    assert f"  rank 1: {STOPPED}\n" in text


def test_connection_errors_on_every_failing_rank_stay_errors():
    outcomes = [RankOutcome(0, "ok"), RankOutcome(1, "error", GLOO_RESET, phase="call"),
                RankOutcome(2, "error", GLOO_CLOSED, phase="call")]
    assert blame(outcomes) == outcomes  # no rank failed of its own: gloo's error is the story
    assert str(RankError(outcomes)).startswith(RankError.headline(2).format(ranks="1, 2") + "\n")


def test_a_rank_raising_in_a_collective_of_its_own_is_not_relabelled():
    outcomes = [RankOutcome(0, "error", "ValueError: bad", phase="call"),
                RankOutcome(1, "error", "RuntimeError: shape mismatch in all_reduce", phase="call")]
    assert blame(outcomes) == outcomes


def boom_on_rank_0_while_rank_1_waits():
    import torch.distributed as dist

    if dist.get_rank() == 0:
        raise ValueError("rank zero fails")
    dist.barrier()


def test_a_peer_waiting_in_a_barrier_is_reported_as_stopped(dist_world):
    dist_world.run(int)  # the group is up: the peer fails inside the user's call, not in set-up
    with pytest.raises(RankError) as info:
        dist_world.run(boom_on_rank_0_while_rank_1_waits)
    text = str(info.value)
    assert text.startswith(RankError.headline(1).format(ranks="0") + "\n  rank 0: error (ValueError: rank zero fails)\n"
                           f"  rank 1: {STOPPED}\n")


def test_first_call_where_rank_0_raises_at_once(dist_world):
    dist_world._registry.restart(2, "gloo")  # a first call: the group is built inside it

    def raise_on_rank_0():
        import torch.distributed as dist

        if dist.get_rank() == 0:
            raise ValueError("at once")

    with pytest.raises(RankError) as info:
        dist_world.run(raise_on_rank_0)
    text = str(info.value)
    assert "rank 0: error (ValueError: at once)" in text
    assert "rank 1: error" not in text  # returned, or stopped after a peer failed: never a gloo error


def test_a_lost_connection_while_every_peer_returned_is_explained():
    outcomes = [RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "ok"),
                RankOutcome(2, "error", GLOO_RESET, phase="call"), RankOutcome(3, "ok")]
    assert report.peers_returned(outcomes) == (
        "ranks 1, 3 returned and closed their connections while ranks 0, 2 were still in a collective: "
        "a collective only some ranks issued?")


@pytest.mark.parametrize("outcomes", [
    [RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "died", "killed by SIGKILL")],
    [RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "error", "ValueError: x", phase="call")],
    [RankOutcome(0, "error", GLOO_CLOSED, phase="setup"), RankOutcome(1, "ok")],
    [RankOutcome(0, "error", "ValueError: x", phase="call"), RankOutcome(1, "ok")],
    [RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "timeout", "no result after 2 s")],
    [RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "error", GLOO_RESET, phase="call")],
])
def test_a_lost_connection_is_not_blamed_on_returned_peers_otherwise(outcomes):
    assert report.peers_returned(outcomes) == ""


def test_detail_rerun_quotes_the_node_id():
    cmd = detail_rerun("tests/test_x.py::test_y[a b]", "OFF")
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL pytest 'tests/test_x.py::test_y[a b]'" in cmd
    assert "issued differently (op, shape, dtype)" in cmd
    assert "a collective only some ranks issued still hangs under DETAIL, and the ranks' stacks show where" in cmd
    assert detail_rerun("tests/test_x.py::test_y", "DETAIL") == ""  # already on


def test_ddp_segfault_under_detail_is_named():
    stderr = 'Fatal Python error: Segmentation fault\n  File "distributed.py", line 1473 in _ddp_init_helper'
    o = RankOutcome(0, "died", "killed by SIGSEGV", stderr=stderr)
    assert known_crash(o, "DETAIL") == DDP_DETAIL_SEGFAULT
    assert known_crash(o, "INFO") == ""


def test_dead_session_folders_are_swept_at_once_and_live_ones_kept(tmp_path):
    import fcntl

    # A session folder is locked before it gets its name, so a dead one goes however young it is.
    dead, live, young = (tmp_path / f"{SESSION_PREFIX}{name}" for name in ("dead", "live", "young"))
    # A folder still being made (its owner died before naming it) goes only once it is a minute old.
    making, stale = (tmp_path / f"{NEW_PREFIX}{name}" for name in ("making", "stale"))
    for folder in (dead, live, young, making, stale):
        folder.mkdir()
        (folder / ".lock").touch()
        (folder / "rank0.out").write_text("x")
    old = time.time() - 3600
    for folder in (dead, live, stale):
        os.utime(folder, (old, old))
    held = os.open(live / ".lock", os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as a running session holds it
    try:
        assert sorted(sweep_dead_sessions(str(tmp_path))) == sorted(map(str, (dead, young, stale)))
    finally:
        os.close(held)
    assert live.exists() and making.exists()
    assert not any(p.exists() for p in (dead, young, stale))


def test_a_new_session_folder_is_named_and_locked(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = SessionFolder()
    try:
        assert os.path.basename(folder.path).startswith(SESSION_PREFIX)
        fd = os.open(os.path.join(folder.path, ".lock"), os.O_RDONLY)
        try:
            with pytest.raises(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        assert sweep_dead_sessions(str(tmp_path)) == []
    finally:
        folder.remove()
    assert not os.path.exists(folder.path) and list(tmp_path.iterdir()) == []


def test_the_errors_a_test_catches_come_from_the_top_level_package():
    import subprocess
    import sys

    import pytest_distcheck
    from pytest_distcheck.ranks import errors

    for name in ("RankError", "RankTimeout", "RanksOutOfStepWarning", "PicklingError"):
        assert getattr(pytest_distcheck, name) is getattr(errors, name) and name in pytest_distcheck.__all__
    code = "import sys, pytest_distcheck; print('torch' in sys.modules)"  # still import-light
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_the_errors_are_named_as_users_import_them_in_tracebacks():
    """pytest's short summary (-q, -r) and a traceback's last line show `pytest_distcheck.RankError`, the name a
    test catches, not `pytest_distcheck.ranks.errors.RankError` (a plugin user's walkthrough)."""
    import pickle
    import traceback

    import pytest_distcheck

    err = RankError([RankOutcome(0, "error", "ValueError: x")])
    assert traceback.format_exception_only(err)[0].startswith(f"pytest_distcheck.RankError: {err}".splitlines()[0])
    assert pickle.loads(pickle.dumps(pytest_distcheck.RankError)) is pytest_distcheck.RankError  # found by that name
    for name in ("RankError", "RankTimeout", "PicklingError", "RanksOutOfStepWarning"):
        assert getattr(pytest_distcheck, name).__module__ == "pytest_distcheck"
