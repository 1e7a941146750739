"""The pods parts one at a time: names and session locks, orphan rules, the dead-man switch on a fake
pod, the SDK's quoting and error quirks, lost create answers, the local provider, `distcheck pods`."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_distcheck.cli import main
from pytest_distcheck.pods import deadman, names, runpod_api
from pytest_distcheck.pods.base import GpuRequest, PodInfo, PodLost, ProviderError, RunTimeout, Unavailable
from pytest_distcheck.pods.fake.fixtures import API_KEY, SESSION, fake, guard, provider, timings  # noqa: F401 - fixtures
from pytest_distcheck.pods.lease import Lease
from pytest_distcheck.pods.local import LocalProvider
from pytest_distcheck.pods.reaper import Reaper, terminate_and_confirm
from pytest_distcheck.pods.session import PodsSession
from pytest_distcheck.pods.sweep import orphan_reason, sweep
from pytest_distcheck.pods.timings import Timings

GPU = "NVIDIA GeForce RTX 4090"


# -- names and session liveness -----------------------------------------------------------------
def test_pod_names_round_trip():
    name = names.pod_name("abcdef01-1a2b3c", 1_900_000_000.7)
    assert name == "distcheck-abcdef01-1a2b3c-1900000000"
    assert names.parse(name) == names.PodName("abcdef01", "abcdef01-1a2b3c", 1_900_000_000)
    assert names.parse("distcheck-notours") is None and names.parse("my-notebook") is None
    with pytest.raises(ValueError, match="is not '<8 hex digits>-<hex digits>'"):
        names.pod_name("run 1", 0)


def test_session_lock_states(tmp_path: Path):
    assert names.session_state("aaaaaaaa", tmp_path) == "unknown"
    lock = names.SessionLock("aaaaaaaa", tmp_path)
    assert names.session_state("aaaaaaaa", tmp_path) == "alive"
    lock.release()
    assert names.session_state("aaaaaaaa", tmp_path) == "ended"


def test_session_lock_released_when_the_process_is_killed(tmp_path: Path):
    code = (f"import time; from pytest_distcheck.pods.names import SessionLock; "
            f"SessionLock('bbbbbbbb', __import__('pathlib').Path({str(tmp_path)!r})); print('held', flush=True); "
            "time.sleep(60)")
    proc = subprocess.Popen(["python", "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    assert names.session_state("bbbbbbbb", tmp_path) == "alive"
    proc.kill()
    proc.wait()
    assert names.session_state("bbbbbbbb", tmp_path) == "ended"


# -- orphan rules ---------------------------------------------------------------------------------
NOW = 1_900_000_000.0


def pod(name, status="RUNNING"):
    return PodInfo("p-" + name[-4:], name, status)


@pytest.mark.parametrize("name, scope, state, expected", [
    ("my-notebook", "all", "ended", (False, "not a pytest-distcheck pod")),
    ("distcheck-5e55101d-aaaaaa-1900000600", "start", "alive", (False, "belongs to this session, still in use")),
    ("distcheck-5e55101d-aaaaaa-1900000600", "finish", "alive", (True, "left over by this session")),
    ("distcheck-11111111-aaaaaa-1900000600", "start", "ended", (True, "its pytest session 11111111 has ended")),
    ("distcheck-11111111-aaaaaa-1900000600", "start", "alive", (False, "is still running")),
    ("distcheck-11111111-aaaaaa-1900000600", "manual", "unknown", (False, "not known on this machine")),
    ("distcheck-11111111-aaaaaa-1899999000", "start", "alive", (True, "its reserved time ended")),
    # another machine's deadline is on its clock: hours of skew never get a live pod swept here
    ("distcheck-11111111-aaaaaa-1899993000", "start", "unknown", (False, "not known on this machine")),
    ("distcheck-11111111-aaaaaa-1899980000", "start", "unknown", (True, "its reserved time ended")),
    ("distcheck-11111111-aaaaaa-1900000600", "all", "alive", (True, "--all")),
])
def test_orphan_rules(name, scope, state, expected):
    kill, why = orphan_reason(pod(name), scope, session=SESSION, now=NOW, state=lambda s: state)
    assert (kill, expected[1] in why) == (expected[0], True), why


def test_finish_scope_of_a_worker_covers_only_its_runs():
    other_worker = pod(f"distcheck-{SESSION}-bbbbbb-1900000600")
    assert orphan_reason(other_worker, "finish", session=SESSION, runs={f"{SESSION}-aaaaaa"}, now=NOW)[0] is False
    assert orphan_reason(other_worker, "finish", session=SESSION, runs=None, now=NOW)[0] is True


def test_sweep_terminates_orphans_only(fake, provider, tmp_path):  # noqa: F811
    import runpod

    dead = names.SessionLock("deadbeef")
    dead.release()
    live = names.SessionLock("a11ce000")
    try:
        far = int(time.time()) + 3600
        made = {n: runpod.create_pod(n, "img", GPU, cloud_type="SECURE")["id"] for n in (
            f"distcheck-deadbeef-000001-{far}", f"distcheck-a11ce000-000002-{far}", "someone-elses-pod")}
        report = sweep(provider, "start", session=SESSION, confirm_timeout=10)
    finally:
        live.release()
    gone = {p.name for p in fake.pods if not p.alive}
    assert gone == {f"distcheck-deadbeef-000001-{far}"}
    assert [t.confirmed for _, _, t in report.terminated] == [True]
    assert made and any("still running" in line for line in report.lines())


# -- terminate until confirmed ------------------------------------------------------------------
class FlakyProvider:
    """Fails terminate/status in scripted ways; counts calls."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = 0

    def terminate(self, pod_id):
        self.calls += 1

    def status(self, pod_id):
        step = self.script.pop(0) if self.script else "GONE"
        if isinstance(step, BaseException):
            raise step
        return PodInfo(pod_id, "", step)


def test_terminate_retries_through_any_error_and_a_ctrl_c():
    import requests

    prov = FlakyProvider([requests.exceptions.JSONDecodeError("x", "<html>", 0), KeyboardInterrupt(),
                          "RUNNING", "TERMINATED"])
    result = terminate_and_confirm(prov, "p1", timeout=30, sleep=lambda s: None)
    assert result.confirmed and result.interrupted and prov.calls == 4


def test_terminate_gives_up_after_its_timeout_and_says_so():
    clock = iter(range(0, 1000, 10))
    result = terminate_and_confirm(FlakyProvider(["RUNNING"] * 100), "p1", timeout=25, sleep=lambda s: None,
                                   clock=lambda: float(next(clock)))
    assert not result.confirmed and result.last_error == "status still RUNNING"


# -- the dead-man switch, run by the fake pod ------------------------------------------------------
def test_start_command_is_safe_for_the_sdk_and_valid_bash():
    cmd = deadman.start_command(3600, 1.18, 60, 300, 15)
    assert re.fullmatch(r"[A-Za-z0-9+/= '~.&>|;_-]+", cmd), cmd
    runpod_api.check_value("dockerArgs", cmd)
    script = deadman.script(3600, 1.18, 60, 300, 15)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "runpodctl remove pod" in script and "podTerminate" in script


def test_dead_man_switch_ends_the_pod_at_its_deadline(fake, provider, timings):  # noqa: F811
    """No client at all: only the pod's own dead-man loop ends it, with the pod's own key."""
    pod_id = provider.create(GpuRequest(1, GPU, 60, "img"), "distcheck-5e55101d-000001-1900000000",
                             limit_s=2, budget_usd=1.0, margin_s=0)
    (pod,) = fake.pods
    assert fake.wait_until(lambda: not pod.alive, 30), "the pod was not ended by its switch"
    assert pod.id == pod_id and pod.terminated_by == "api"
    assert f"remove pod {pod_id}" in (fake.root / "runpodctl.log").read_text()
    assert "limit=2s" in (pod.home / "distcheck" / "deadman.log").read_text()


def test_dead_man_switch_ends_a_pod_whose_heartbeat_stops(fake, timings):  # noqa: F811
    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.ssh import new_key_pair

    quick = dataclasses.replace(timings, heartbeat_every=0.2, heartbeat_stale=1.0, ready_timeout=0.5)
    prov = RunPodProvider(quick, *new_key_pair())
    pod_id = prov.create(GpuRequest(1, GPU, 60, "img"), "distcheck-5e55101d-000002-1900000000",
                         limit_s=3600, budget_usd=1.0, margin_s=0)
    ready = prov.wait_ready(pod_id, 10)
    for _ in range(5):
        ready.heartbeat()  # alive while the client beats
        time.sleep(0.2)
    assert fake.pods[0].alive
    ready.close()  # the client goes quiet
    assert fake.wait_until(lambda: not fake.pods[0].alive, 30)
    assert "heartbeat age=" in (fake.pods[0].home / "distcheck" / "deadman.log").read_text()


# -- SDK quirks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value, what", [('bash -c "x"', "a double quote"), ("a\\b", "a backslash"),
                                         ("a\nb", "a line break")])
def test_unsafe_values_are_refused_before_sending(value, what):
    with pytest.raises(ValueError, match=f"image contains {what}"):
        runpod_api.check_value("image", value)


def test_the_sdk_quoting_bug_shows_on_the_fake(fake):  # noqa: F811
    import runpod

    runpod.api_key = API_KEY
    with pytest.raises(runpod.error.QueryError, match="Syntax Error"):
        runpod.create_pod("x", "img", GPU, docker_args='bash -c "echo hi"')
    assert fake.pods == []


def test_provider_refuses_unsafe_image_without_calling_the_api(fake, provider):  # noqa: F811
    with pytest.raises(ValueError, match="image 'img\"x' is not a container image name"):
        provider.create(GpuRequest(1, GPU, 60, 'img"x'), "distcheck-5e55101d-000003-1900000000", 60, 1.0, 0)
    assert fake.api.log == []


@pytest.mark.parametrize("kind, match", [
    ("http_502", "body that is not JSON"), ("http_500", "RunPod answered with an error: Something went wrong"),
    ("timeout", "no answer from RunPod within 2 s"), ("no_capacity", "no machine free"),
])
def test_api_failures_become_provider_errors(fake, provider, kind, match):  # noqa: F811
    fake.api.hang_seconds = 4.0  # past api_timeout=2
    fake.inject("list", kind)
    with pytest.raises(ProviderError, match=match) as info:
        provider.list()
    assert API_KEY not in str(info.value)


def test_missing_key_is_a_skip_reason(monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(Unavailable, match="RUNPOD_API_KEY is not set"):
        runpod_api.sdk()


def test_wrong_key_is_reported_without_the_key(fake, timings, monkeypatch):  # noqa: F811
    from pytest_distcheck.pods.runpod import RunPodProvider

    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_WRONG_but_secret")
    with pytest.raises(ProviderError, match="refused the API key") as info:
        RunPodProvider(timings).list()
    assert "rpa_WRONG_but_secret" not in str(info.value)


# -- a create whose answer is lost ----------------------------------------------------------------
def test_lost_create_found_later_is_settled_at_session_end(fake, guard, timings):  # noqa: F811
    """The answer never comes and the pod shows up only after create_grace: the session's final
    sweep finds it by name, records it in the ledger, terminates and settles it."""
    quick = dataclasses.replace(timings, api_timeout=1, create_grace=0.5)
    fake.api.hang_seconds = 3.0
    fake.inject("create", "timeout")
    ps = PodsSession("runpod", quick, 0.0, SESSION, worker=False)
    ps.start()
    req = GpuRequest(2, GPU, 60, "img")
    lease = ps.lease(req, lambda s, r: guard.reserve("runpod", GPU, 2, s, "t", cloud="secure"))
    with pytest.raises(ProviderError, match="showed up within"):
        lease.__enter__()
    assert fake.wait_until(lambda: len(fake.pods) == 1, 10)
    ps.finish()
    assert not fake.live_pods()
    assert [(r.status, r.resource_id) for r in guard.ledger.read()] == [
        ("open", "-"), ("started", fake.pods[0].id), ("settled", fake.pods[0].id)]


# -- the local provider ---------------------------------------------------------------------------
def local_lease(prov, guard, seconds=60):  # noqa: F811
    req = GpuRequest(2, "local", seconds)
    return Lease(prov, req, lambda s, r: guard.reserve("local", "local GPU", 2, s, "t", usd_per_gpu_hour=r),
                 Reaper(10), Timings.parse("teardown=1 ready_timeout=5"))


def test_local_provider_runs_and_costs_nothing(guard, tmp_path):  # noqa: F811
    prov = LocalProvider(gpus=["Fake GPU A", "Fake GPU B"])
    (tmp_path / "in.txt").write_text("x")
    with local_lease(prov, guard) as pod:
        pod.put(tmp_path / "in.txt", "a/in.txt")
        res = pod.run("cat a/in.txt; echo $CUDA_VISIBLE_DEVICES; cp a/in.txt a/out.txt", timeout=10)
        assert res.ok and res.tail == ["x0,1"]  # the file has no newline; CUDA_VISIBLE_DEVICES=0,1
        pod.get("a/out.txt", tmp_path / "out.txt")
        workdir = pod.inner.workdir
    assert (tmp_path / "out.txt").read_text() == "x" and not workdir.exists()
    rows = guard.ledger.read()
    assert [r.status for r in rows] == ["open", "started", "settled"] and all(r.cost == 0 for r in rows)
    assert prov.gpu_name == "local Fake GPU A"


def test_local_run_time_limit_and_release(guard):  # noqa: F811
    prov = LocalProvider(gpus=["g", "g"])
    with local_lease(prov, guard) as pod:
        with pytest.raises(RunTimeout, match="ran past its limit of 1 s"):
            pod.run("sleep 30", timeout=1)
    with pytest.raises(PodLost):
        pod.run("true", timeout=5)


def test_local_with_too_few_gpus_is_unavailable(guard):  # noqa: F811
    with pytest.raises(Unavailable, match="needs 2 GPU\\(s\\); this machine has 1"):
        with local_lease(LocalProvider(gpus=["g"]), guard):
            pass
    assert guard.ledger.read() == []


# -- timings --------------------------------------------------------------------------------------
def test_timings_parse_and_errors():
    t = Timings.parse("api_timeout=1, ready_timeout=5")
    assert (t.api_timeout, t.ready_timeout, t.confirm_timeout) == (1, 5, 300)
    with pytest.raises(ValueError, match="src: 'warp=1' is not name=seconds"):
        Timings.parse("warp=1", "src")
    with pytest.raises(ValueError, match="heartbeat_stale .* must exceed heartbeat_every"):
        Timings.parse("ready_timeout=1 heartbeat_every=10 heartbeat_stale=5")
    with pytest.raises(ValueError, match=r"heartbeat_stale \(300\) must exceed ready_timeout \(600\)"):
        Timings.parse("heartbeat_stale=300")  # the old defaults: a pod with slow SSH ended itself
    assert Timings().heartbeat_stale > Timings().ready_timeout


# -- distcheck pods -------------------------------------------------------------------------------
def test_cli_lists_and_sweeps(fake, capsys, tmp_path, monkeypatch):  # noqa: F811
    import runpod

    monkeypatch.chdir(tmp_path)  # no workspace here: the sweep has no ledger to read

    runpod.api_key = API_KEY
    dead = names.SessionLock("deadbeef")
    dead.release()
    old = runpod.create_pod(f"distcheck-deadbeef-000001-{int(time.time()) + 3600}", "img", GPU)["id"]
    other = runpod.create_pod("notebook", "img", GPU)["id"]
    assert main(["pods"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"{old} .*ORPHAN: its pytest session deadbeef has ended", out)
    assert re.search(rf"{other} .*not a pytest-distcheck pod", out)
    assert all(p.alive for p in fake.pods)
    assert main(["pods", "--sweep"]) == 0
    assert {p.id for p in fake.live_pods()} == {other}
    assert API_KEY not in capsys.readouterr().out


def test_cli_sweep_first_ends_the_pod_the_ledger_says_may_still_be_billing(fake, capsys, tmp_path,  # noqa: F811
                                                                             monkeypatch):
    """A pod whose terminate failed, of a session still alive on this machine (the sweep alone would
    leave it): the ledger names it, so `distcheck pods --sweep` ends it first and bills it."""
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.pods.fake.fixtures import write_workspace
    from pytest_distcheck.pods.recovery import RETRIED
    from pytest_distcheck.workspace import load_workspace

    write_workspace(tmp_path)
    monkeypatch.chdir(tmp_path)
    alive = names.SessionLock("0123abcd")  # its session still runs: no sweep rule ends the pod
    ws_guard = BudgetGuard.from_workspace(load_workspace(tmp_path / "checks" / "distcheck.toml"), session_id="0123abcd")
    res = ws_guard.reserve("runpod", GPU, 1, 600, "t::outage")
    pod = fake.account.new_pod({"name": f"distcheck-{res.run_id}-{int(time.time()) + 3600}", "gpuTypeId": GPU,
                                "gpuCount": 1, "imageName": "x"}, 0.0)
    res.record_pod(pod.id, 0.59)
    res.record_terminate_failed()
    assert main(["pods", "--sweep"]) == 0
    out = capsys.readouterr().out
    assert "ledger: " + RETRIED.format(pod=pod.id, run=res.run_id, why="terminate failed earlier, may be billing",
                                       outcome="terminated") in out
    assert not pod.alive and [r.status for r in ws_guard.ledger.read()][-1] == "reconciled"
    alive.release()


def test_cli_without_key_says_so(monkeypatch, capsys):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    assert main(["pods"]) == 2
    assert "RUNPOD_API_KEY is not set" in capsys.readouterr().err


def test_interpreter_exit_terminates_a_pod_left_open(fake, tmp_path):  # noqa: F811
    """A script that takes a pod and exits without closing the lease: the atexit hooks terminate it."""
    script = tmp_path / "leak.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pytest_distcheck.pods.fake.fixtures import FAST_TIMINGS
from pytest_distcheck.budget.guard import BudgetGuard
from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.pods.base import GpuRequest
from pytest_distcheck.pods.session import PodsSession
from pytest_distcheck.pods.timings import Timings

guard = BudgetGuard(Ledger({str(tmp_path / 'ledger.md')!r}, {str(tmp_path / 'lock')!r}), phase_ceiling_usd=5,
                    session_id="ab5e0000")
ps = PodsSession("runpod", Timings.parse(FAST_TIMINGS), 0.0, "ab5e0000", worker=False)
ps.start()
lease = ps.lease(GpuRequest(1, {GPU!r}, 60, "img"), lambda s, r: guard.reserve("runpod", {GPU!r}, 1, s, "leak"))
pod = lease.__enter__()
print("got", pod.id, flush=True)
sys.exit(0)  # no __exit__, no finish: only the interpreter-exit hooks are left
""")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("got "), out.stderr
    (pod,) = fake.pods
    assert not pod.alive and pod.terminated_by == "api"


def test_a_key_without_the_gpu_extra_skips_the_start_sweep_saying_what_to_install(monkeypatch):
    """A CI job that installs the kit without the gpu extra and has RUNPOD_API_KEY set (an instructor's
    walkthrough: the gate stopped with INTERNALERROR, No module named 'asyncssh'): one line, no traceback."""
    from pytest_distcheck import deps
    from pytest_distcheck.pods.session import NOT_SWEPT

    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_set_in_ci")
    monkeypatch.setattr(deps, "missing_dependencies", lambda requires=None, extra="": ["asyncssh"])
    lines: list[str] = []
    ps = PodsSession("runpod", Timings(), 0.0, SESSION, worker=False, report=lines.append)
    ps.sweep_at_start()
    ps.sweep_at_start()  # once per session
    assert lines == [NOT_SWEPT.format(reason=deps.missing_extra_message("gpu", ["asyncssh"]))]
    assert "rpa_set_in_ci" not in lines[0]
    with pytest.raises(Unavailable, match="the `gpu` extra"):
        ps.provider()


def test_without_the_sdk_a_call_to_runpod_is_unavailable_saying_what_to_install(monkeypatch):
    """What the spend check's reconciliation reports (as 'reconciliation with RunPod failed') when the key is set
    in a Python without the gpu extra."""
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_set_in_ci")
    monkeypatch.setitem(sys.modules, "runpod", None)  # as if the gpu extra were not installed
    with pytest.raises(Unavailable, match=r"the `gpu` extra of pytest-distcheck is not installed"):
        runpod_api.sdk()
