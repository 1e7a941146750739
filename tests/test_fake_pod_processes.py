"""The fake pod's processes end with it, as on RunPod where the machine is gone: those an SSH command started
in sessions of their own (torchrun's workers) too, and the fake's event loop ends without a traceback."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from pytest_distcheck.pods.base import GpuRequest
from pytest_distcheck.pods.fake.fixtures import FAST_TIMINGS, fake, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.fake.sshd import kill_tree

GPU = "NVIDIA GeForce RTX 4090"
NAME = "distcheck-5e55101d-000001-1900000000"
# As torchrun starts its workers: a child in a session (and process group) of its own, which waits.
WORKER = "import subprocess, sys; p = subprocess.Popen(['sleep', '60'], start_new_session=True); " \
         "open(sys.argv[1], 'w').write(str(p.pid)); p.wait()"
DAEMON = "import subprocess, sys; p = subprocess.Popen(['sleep', '60'], start_new_session=True, " \
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); open(sys.argv[1], 'w').write(str(p.pid))"


def _gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _wait_pid(path: Path) -> int:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if path.is_file() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path}")


@pytest.fixture
def pod(provider):  # noqa: F811
    pod_id = provider.create(GpuRequest(1, GPU, 60, "img"), NAME, limit_s=60, budget_usd=1.0, margin_s=0)
    pod = provider.wait_ready(pod_id, 10)
    yield pod
    pod.close()


def _run_in_background(pod, command: str) -> threading.Thread:
    def go() -> None:
        try:
            pod.run(command, 60)
        except Exception:  # noqa: BLE001 - the pod ends under it: PodLost, which this test does not look at
            pass

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def _worker(pod, tmp_path: Path) -> int:
    path = tmp_path / "worker.pid"
    _run_in_background(pod, f"{shlex.quote(sys.executable)} -c {shlex.quote(WORKER)} {shlex.quote(str(path))}")
    return _wait_pid(path)


def test_terminating_a_pod_kills_the_processes_its_command_started_in_sessions_of_their_own(
        fake, provider, pod, tmp_path):  # noqa: F811
    worker = _worker(pod, tmp_path)
    assert os.getsid(worker) == worker  # out of the command's process group: killpg alone missed it
    provider.terminate(pod.id)
    assert _gone(worker), "a process of the terminated pod is still running"


def test_closing_the_ssh_channel_kills_the_whole_command(fake, pod, tmp_path):  # noqa: F811
    worker = _worker(pod, tmp_path)
    pod.close()
    assert _gone(worker), "the command's worker outlived its SSH channel"
    assert fake.pods[0].alive


def test_a_process_that_left_the_pods_process_tree_ends_with_the_pod(fake, provider, pod, tmp_path):  # noqa: F811
    path = tmp_path / "daemon.pid"
    # A daemon: in a session of its own (Popen returns once it is), its parent gone as the command returns.
    result = pod.run(f"{shlex.quote(sys.executable)} -c {shlex.quote(DAEMON)} {shlex.quote(str(path))}", 10)
    assert result.exit_status == 0
    daemon = _wait_pid(path)
    assert not _gone(daemon, within=0.3)  # the command's end leaves it, as sshd does on a pod
    provider.terminate(pod.id)
    assert _gone(daemon), "a process of the terminated pod is still running"


def test_kill_tree_kills_descendants_in_sessions_of_their_own(tmp_path):
    path = tmp_path / "worker.pid"
    top = subprocess.Popen([sys.executable, "-c", WORKER, str(path)], start_new_session=True)
    try:
        worker = _wait_pid(path)
        kill_tree(top.pid)
        assert top.wait(5) < 0 and _gone(worker)
    finally:
        top.kill()


# What `distcheck rehearse` does on Ctrl-C, in short: its fake API stops (the `with` block ends) while a command
# runs on the pod whose worker holds the command's output pipes; then the interpreter exits.
STOPPED_WHILE_RUNNING = textwrap.dedent("""
    import os, shlex, sys, threading, time
    from pathlib import Path
    from pytest_distcheck.pods.base import GpuRequest
    from pytest_distcheck.pods.fake import FakeRunPod
    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.ssh import new_key_pair
    from pytest_distcheck.pods.timings import Timings

    root, worker = Path(sys.argv[1]), sys.argv[2]
    pid_file = root / "worker.pid"
    with FakeRunPod(root / "fake", api_key="k") as fake:
        os.environ.update(RUNPOD_API_BASE_URL=fake.url, RUNPOD_API_KEY="k", XDG_CACHE_HOME=str(root / "cache"))
        provider = RunPodProvider(Timings.parse({timings!r}), *new_key_pair())
        pod_id = provider.create(GpuRequest(1, {gpu!r}, 60, "img"), {name!r}, limit_s=60, budget_usd=1.0,
                                 margin_s=0)
        pod = provider.wait_ready(pod_id, 10)
        command = shlex.join([sys.executable, "-c", worker, str(pid_file)])
        def run():
            try:
                pod.run(command, 60)
            except Exception:  # PodLost, once the fake is gone
                pass

        threading.Thread(target=run, daemon=True).start()
        while not (pid_file.is_file() and pid_file.read_text()):
            time.sleep(0.05)
        loop = fake._loop.loop
    print("loop closed:", loop.is_closed(), flush=True)
""").format(gpu=GPU, name=NAME, timings=FAST_TIMINGS)


def test_stopping_the_fake_mid_command_kills_it_and_closes_its_loop_without_a_traceback(tmp_path):
    """The traceback a Ctrl-C during the rehearsal's experiment printed after its last line: ``Exception ignored
    in: BaseSubprocessTransport.__del__ ... RuntimeError: Event loop is closed`` (the command's transport was
    left open, its pipes held by torchrun's workers, and collected once the loop was closed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    for name in ("RUNPOD_API_KEY", "RUNPOD_API_BASE_URL", "DISTCHECK_RUNPOD_REST_URL"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", STOPPED_WHILE_RUNNING,
                           str(tmp_path), WORKER], env=env, capture_output=True, text=True, timeout=60)
    worker = int((tmp_path / "worker.pid").read_text())
    assert _gone(worker, within=1), "the worker outlived the fake"
    assert done.returncode == 0, done.stderr
    assert done.stdout == "loop closed: True\n"
    for said in ("Exception ignored", "Event loop is closed", "unclosed transport", "Traceback"):
        assert said not in done.stderr, done.stderr
