"""The rank processes as seen from outside: ports under xdist, parallel sessions, and no leftovers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pytest_distcheck.ranks.errors import RankTimeout
from pytest_distcheck.ranks.plugin import BAD_WORLD_SIZE_MARKER
from pytest_distcheck.ranks.pool import OUT_OF_STEP, TIMEOUT_DETAIL

TIMED_OUT_2_S = RankTimeout.headline(2).format(ranks="0, 1") + ": " + TIMEOUT_DETAIL.format(limit="2 s")

MANY_ALL_REDUCES = """
import os
import pytest

def all_reduce_and_pid():
    import torch, torch.distributed as dist
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item(), os.getpid()

@pytest.mark.parametrize("i", range({n}))
def test_all_reduce(dist_world, i):
    out = dist_world.run(all_reduce_and_pid)
    assert [v for v, _ in out] == [2.0, 2.0]
    with open({pidfile!r}, "a") as f:
        f.write("".join(f"{{pid}}\\n" for _, pid in out))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _pids(path) -> set[int]:
    return {int(x) for x in path.read_text().split()} if path.exists() else set()


def _wait_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = {p for p in pids if _alive(p)}
        if not left:
            return left
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


def test_xdist_and_two_sessions_at_once_never_collide(pytester):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(test_many=MANY_ALL_REDUCES.format(n=12, pidfile=str(pidfile)))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "test_many.py"]
    procs = [subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
        assert "12 passed" in out
        assert "Address already in use" not in out and "EADDRINUSE" not in out
    pids = _pids(pidfile)
    assert len(pids) >= 4  # 2 sessions x 2 xdist workers x 2 ranks, at least
    assert not _wait_gone(pids), "rank processes outlived their sessions"


def test_no_rank_survives_a_session_with_failures_and_timeouts(pytester):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(
        f"""
        import os

        def record():
            with open({str(pidfile)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")

        def test_ok(dist_world):
            dist_world.run(record)

        def test_raises(dist_world):
            dist_world.run(lambda: (record(), 1 / 0))

        def test_hangs(dist_world):
            def hang():
                import time
                record()
                time.sleep(600)
            dist_world.run(hang, timeout=2)

        def test_after(dist_world):
            dist_world.run(record)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*ZeroDivisionError*", f"*{TIMED_OUT_2_S}*"])
    pids = _pids(pidfile)
    assert len(pids) >= 4  # the hung pool was replaced by a new one
    assert not _wait_gone(pids)


def test_ranks_die_with_a_killed_pytest(pytester):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(
        f"""
        import os

        def test_blocked(dist_world):
            def block():
                import time
                with open({str(pidfile)!r}, "a") as f:
                    f.write(f"{{os.getpid()}}\\n")
                time.sleep(600)
            dist_world.run(block, timeout=600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(_pids(pidfile)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = _pids(pidfile)
    assert len(pids) == 2, "the ranks never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not _wait_gone(pids), "ranks outlived a SIGKILLed pytest (parent-death signal missing)"


def test_ini_timeout_applies_and_skip_in_ranks_skips(pytester):
    pytester.makeini("[pytest]\ndistcheck_timeout = 2\n")
    pytester.makepyfile(
        """
        import pytest

        def test_hang(dist_world):
            dist_world.run(lambda: __import__("time").sleep(600))

        def test_skip(dist_world):
            dist_world.run(lambda: pytest.skip("needs 2 GPUs"))
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([f"*{TIMED_OUT_2_S}*", "SKIPPED*needs 2 GPUs*"])


def test_bad_world_size_marker_is_a_clear_error(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.world_size("two")
        def test_x(dist_world):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_x: " + BAD_WORLD_SIZE_MARKER.format(value="two") + "*"])
    assert result.ret != 0


def test_fresh_ranks_marker_starts_new_processes(pytester):
    pytester.makepyfile(
        """
        import os
        import pytest

        PIDS = []

        def test_first(dist_world):
            PIDS.append(dist_world.run(os.getpid))

        def test_same_pool(dist_world):
            assert dist_world.run(os.getpid) == PIDS[0]

        @pytest.mark.fresh_ranks
        def test_fresh(dist_world):
            assert set(dist_world.run(os.getpid)).isdisjoint(PIDS[0])
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=3)


BLOCKED_AND_OUT_OF_STEP = """
import os
import pytest

def record():
    with open({pidfile!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n{{os.getppid()}}\\n")

def in_step():
    import torch, torch.distributed as dist
    dist.barrier()
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item()

def skip_a_collective():
    import torch, torch.distributed as dist
    record()
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1), async_op=True)

@pytest.mark.parametrize("i", range({n}))
def test_out_of_step_then_healthy(dist_world, i):
    dist_world.run(skip_a_collective)
    assert dist_world.run(in_step) == [2.0, 2.0]

def test_blocked(dist_world):
    def block():
        import time
        record()
        time.sleep(600)
    if os.environ.get("DISTCHECK_TEST_BLOCK"):
        dist_world.run(block, timeout=600)
"""


def test_ranks_out_of_step_are_healed_under_xdist(pytester):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(test_steps=BLOCKED_AND_OUT_OF_STEP.format(n=6, pidfile=str(pidfile)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-W", "default")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*RanksOutOfStepWarning: " + OUT_OF_STEP.split(" (")[0] + "*"])
    pids = _pids(pidfile)
    assert len(pids) >= 6  # fresh ranks after each out-of-step call, plus the zygote(s) they came from
    assert not _wait_gone(pids), "ranks or zygotes outlived the session"


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_ctrl_c_leaves_nothing_running(pytester, xdist):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(test_steps=BLOCKED_AND_OUT_OF_STEP.format(n=0, pidfile=str(pidfile)))
    # A terminal's Ctrl-C sends SIGINT to the foreground process group: pytest and its xdist workers. SIGINT
    # starts at its default, as in a terminal (a background job of a script inherits it ignored).
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *xdist], cwd=pytester.path,
                            env=dict(os.environ, DISTCHECK_TEST_BLOCK="1"), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while len(_pids(pidfile)) < 3 and time.monotonic() < deadline:  # 2 ranks and their zygote
        time.sleep(0.2)
    pids = _pids(pidfile)
    assert len(pids) == 3, "the ranks never started"
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    assert "KeyboardInterrupt" in out or "Interrupted" in out, out
    assert not _wait_gone(pids), "ranks or their zygote outlived Ctrl-C"


BLOCK_AND_RECORD = """
import os

def test_blocked_{i}(dist_world):
    with open({pidfile!r}, "a") as f:
        f.write(f"worker {{os.getpid()}}\\n")
    def block():
        import time
        with open({pidfile!r}, "a") as f:
            f.write(f"rank {{os.getpid()}}\\nzygote {{os.getppid()}}\\n")
        time.sleep(600)
    dist_world.run(block, timeout=600)
"""


def _roles(path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    if path.exists():
        for line in path.read_text().split("\n"):
            if line:
                role, pid = line.split()
                out.setdefault(role, set()).add(int(pid))
    return out


def test_a_killed_xdist_controller_takes_zygotes_and_ranks_with_it(pytester):
    pidfile = pytester.path / "pids.txt"
    pytester.makepyfile(**{f"test_b{i}": BLOCK_AND_RECORD.format(i=i, pidfile=str(pidfile)) for i in range(2)})
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(_roles(pidfile).get("rank", ())) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    roles = _roles(pidfile)
    assert len(roles.get("rank", ())) == 4 and len(roles.get("worker", ())) == 2, "the ranks never started"
    # Stopped xdist workers cannot notice the dead controller themselves: only the zygotes' own watch acts.
    for pid in roles["worker"]:
        os.kill(pid, signal.SIGSTOP)
    try:
        proc.kill()
        proc.wait()
        left = _wait_gone(roles["rank"] | roles["zygote"], seconds=30)
        assert not left, f"still running after the xdist controller was killed: {sorted(left)}"
    finally:
        for pid in roles["worker"]:
            os.kill(pid, signal.SIGKILL)
