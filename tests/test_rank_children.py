"""A rank that hangs waiting on a child process: the child's stack is shown, and the fix of its cause proposed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pytest_distcheck.ranks.children import describe_children
from pytest_distcheck.ranks.errors import RankTimeout
from pytest_distcheck.ranks.report import CHILD_HANG, FORKED_CHILD_HANG, detail_rerun, hang_hint


def _fork_after_openmp() -> None:
    import multiprocessing

    import torch

    torch.set_num_threads(2)
    a = torch.randn(256, 256)
    (a @ a).sum()  # torch's OpenMP team of 2 threads starts in the rank

    def child_matmul():
        b = torch.randn(256, 256)
        (b @ b).sum()  # waits for the parent's OpenMP threads, which the fork did not copy

    p = multiprocessing.get_context("fork").Process(target=child_matmul)
    p.start()
    p.join()


def test_a_child_forked_after_threads_started_hangs_and_its_stack_and_fix_are_shown(dist_world):
    with pytest.raises(RankTimeout) as info:
        dist_world.run(_fork_after_openmp, timeout=2)
    text = str(info.value)
    assert FORKED_CHILD_HANG.format(ranks="each of ranks 0, 1") in text  # spawn, or one thread; not a DETAIL re-run
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL pytest" not in text
    rank0 = text.split("--- rank 0 ---")[1].split("--- rank 1 ---")[0]
    assert "child process " in rank0 and "(forked without exec by the rank, which runs " in rank0
    assert "in child_matmul" in rank0.split("child process ", 1)[1]  # the grandchild's own frames
    assert dist_world.run(lambda: 1) == [1, 1]  # ranks, children and all, cleaned up; fresh ranks serve


_TREE = textwrap.dedent("""
    import faulthandler, os, signal, subprocess, sys, time
    dump = open(sys.argv[1], "w")
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)  # as a rank does
    def napping():
        os.write(1, b"napping\\n")  # in its frame now (one write: the parent's line never splits it)
        time.sleep(60)
    if os.fork() == 0:
        napping()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.write(1, b"ready\\n")
    time.sleep(60)
""")


def test_a_forked_childs_stack_is_read_and_an_execd_one_is_said_unreadable(tmp_path):
    stack = tmp_path / "rank.stack"
    tree = subprocess.Popen([sys.executable, "-c", _TREE, str(stack)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert sorted([tree.stdout.readline(), tree.stdout.readline()]) == ["napping\n", "ready\n"]
        text = describe_children(tree.pid, str(stack))
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
    forked, execd = sorted(text.strip().split("\nchild process ")[-2:], key=lambda s: "forked" not in s)
    assert "(forked without exec by the rank, which runs 1 thread; the child has 1 thread; " in forked
    assert "in napping" in forked
    assert "its stack could not be read (it runs another program, started with exec" in execd
    assert describe_children(tree.pid, str(stack)) == ""  # gone: nothing to say, no error


_WAITING = 'File "/usr/lib/python3.11/multiprocessing/popen_fork.py", line 27 in poll'


@pytest.mark.parametrize(("stack", "hint"), [
    (f"{_WAITING}\nchild process 7 (forked without exec by the rank, which runs 9 threads; the child has 1 thread; x), "
     "stack:\n  File x",
     FORKED_CHILD_HANG.format(ranks="rank 0")),
    (f"{_WAITING}\nchild process 7 (1 thread; sleep 60): its stack could not be read (exec)",
     CHILD_HANG.format(ranks="rank 0")),
    # A forked child that the rank does not wait on (a Manager's server): the hang is the rank's own.
    ('File "t.py", line 3 in all_reduce\nchild process 7 (forked without exec by the rank, which runs 9 threads; '
     'the child has 1 thread; x), stack:',
     detail_rerun("t.py::test_x", "OFF")),
    ('File "t.py", line 3 in all_reduce', detail_rerun("t.py::test_x", "OFF")),
])
def test_a_timeout_proposes_the_fix_its_stacks_point_to(stack, hint):
    assert hang_hint("t.py::test_x", "OFF", {0: stack}) == hint
