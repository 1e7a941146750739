"""The gpu_pod fixture through pytest itself (pytester, in a subprocess) against the fake RunPod API:
the ledger gets its rows, and no pod is left billing after a pass, a failure, Ctrl-C, SIGTERM, a budget
refusal, or with 8 xdist workers racing for the same ceiling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pytest_distcheck.budget.ledger import Ledger
from pytest_distcheck.paid import PAID_REFUSED
from pytest_distcheck.pods.fake.fixtures import API_KEY, FAST_TIMINGS, fake, pod_dir  # noqa: F401 - fixtures
from pytest_distcheck.pods.plugin import HEADER_LOCAL, HEADER_RUNPOD_KEY, LOCAL_RATE_BOUND, SKIPPED, UNKNOWN_PROVIDER

POD_TEST = """
import pytest

@pytest.mark.gpu
@pytest.mark.pod(gpus=2, minutes=1, experiment="tp-inference")
def test_on_pod(gpu_pod, tmp_path):
    (tmp_path / "in.txt").write_text("hello")
    gpu_pod.put(tmp_path / "in.txt", "job/in.txt")
    res = gpu_pod.run("cd job && tr a-z A-Z < in.txt > out.txt && echo ran on $RUNPOD_POD_ID", timeout=30)
    assert res.ok and res.tail[-1].startswith("ran on ")
    gpu_pod.get("job/out.txt", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "HELLO"
    {extra}
"""


def ledger_rows(root):
    return Ledger(root / "ledger.md", root / ".distcheck" / "budget.lock").read()


def no_pod_billing(fake):  # noqa: F811
    assert fake.wait_until(lambda: not fake.live_pods(), 20), [(p.name, p.id) for p in fake.live_pods()]
    assert not fake.calls("stop")


def test_pod_test_passes_and_settles(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([HEADER_RUNPOD_KEY])
    no_pod_billing(fake)
    (pod,) = fake.pods
    rows = ledger_rows(pod_dir.path)
    assert [(r.status, r.resource_id, r.experiment) for r in rows] == [
        ("open", "-", "tp-inference"), ("started", pod.id, "tp-inference"), ("settled", pod.id, "tp-inference"),
        ("reconciled", pod.id, "tp-inference")]
    assert rows[1].run_id in pod.name and pod.name.startswith("distcheck-")


def test_without_max_usd_the_test_is_skipped_and_nothing_is_created(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*--max-usd*"])
    assert fake.pods == [] and [name for name, _ in fake.api.log] == ["myself"]  # only the start sweep's list


def test_without_api_key_it_skips_with_the_reason(pod_dir, fake, monkeypatch):  # noqa: F811
    monkeypatch.delenv("RUNPOD_API_KEY")
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*RUNPOD_API_KEY is not set*"])
    assert fake.pods == []


def test_failing_test_still_terminates(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra="raise RuntimeError('the test broke')"))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    no_pod_billing(fake)
    assert [r.status for r in ledger_rows(pod_dir.path)] == ["open", "started", "settled", "reconciled"]


def test_keyboard_interrupt_terminates(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra="raise KeyboardInterrupt"))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    no_pod_billing(fake)
    assert [r.status for r in ledger_rows(pod_dir.path)] == ["open", "started", "settled", "reconciled"]


def _start_pytest(pod_dir, *args):  # noqa: F811
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--max-usd", "3", *args],
                            cwd=pod_dir.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_running(fake, proc, marker="sleep"):  # noqa: F811
    ok = fake.wait_until(lambda: any(marker in c for p in fake.pods for c in fake.ssh_commands(p)) or
                         proc.poll() is not None, 60)
    assert ok and proc.poll() is None, proc.stdout.read() if proc.poll() is not None else "no command ran"


def test_sigterm_to_pytest_terminates_and_settles(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra="gpu_pod.run('sleep 120', timeout=200)"))
    proc = _start_pytest(pod_dir)
    _wait_running(fake, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    no_pod_billing(fake)
    assert [r.status for r in ledger_rows(pod_dir.path)] == ["open", "started", "settled", "reconciled"], out
    assert API_KEY not in out


def test_sigkill_leaves_it_to_the_dead_man_switch(pod_dir, fake):  # noqa: F811
    """The laptop dies: no client code runs. The pod's own loop sees the heartbeat go stale (6 s here)
    and terminates its pod with runpodctl and its own key."""
    # the shortest staleness the timings allow (above ready_timeout), so the wait for the switch is short
    pod_dir.makeini(f"[pytest]\ndistcheck_pod_timings = {FAST_TIMINGS} ready_timeout=5 heartbeat_stale=6\n")
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra="gpu_pod.run('sleep 120', timeout=200)"))
    proc = _start_pytest(pod_dir)
    _wait_running(fake, proc)
    proc.kill()
    proc.wait(30)
    (pod,) = fake.pods
    assert fake.wait_until(lambda: not pod.alive, 40), "the dead-man switch did not end the pod"
    assert "remove pod " + pod.id in (fake.root / "runpodctl.log").read_text()
    log = (pod.home / "distcheck" / "deadman.log").read_text()
    assert "heartbeat age=" in log
    # the crash left the open row (worst case) in the ledger, never forgotten
    assert [r.status for r in ledger_rows(pod_dir.path)] == ["open", "started"]


def test_budget_refusal_creates_nothing(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    # 2 x $0.59/h for 60 s + 10 s ready + 2 s teardown = $0.0236 > $0.01
    result = pod_dir.runpytest_subprocess("--max-usd", "0.01", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # an error, as any failed setup: never a pass or a silent skip
    (reason,) = refusals_shown_plainly(result)
    assert reason.startswith("test_pod.py::test_on_pod: 2 x RTX 4090 on runpod secure") and "would cost up to" in reason
    assert fake.pods == [] and ledger_rows(pod_dir.path) == []


def refusals_shown_plainly(result) -> list[str]:
    """The refusals' reasons, from the run's summary lines, once each is checked to be shown as the kit's message
    alone: once in its test's error block, without a traceback or a line of the kit's source."""
    out = result.stdout.str()
    for code in ("Traceback", "pytest_distcheck/", "def gpu_pod", "def reserve", "raise ", "lease.__enter__",
                 "Refused", "Raises:"):
        assert code not in out, code
    head = "distcheck: " + PAID_REFUSED.format(reason="")
    reasons = [line.removeprefix(head) for line in result.outlines if line.startswith(head)]
    blocks = out.split(" ERRORS ")[1].split("\n" + head)[0].split(" ERROR at setup of ")[1:]
    assert len(reasons) == len(blocks) >= 1
    for block, reason in zip(blocks, reasons, strict=True):
        assert block.count(reason.partition(": ")[2]) == 1, (block, reason)  # after "<test id>: "
    return reasons


def test_no_live_price_is_refused_plainly_without_the_key(pod_dir, fake):  # noqa: F811
    fake.inject("gpu", "http_502", times=20)  # every price lookup fails: RunPod gives no live rate
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    (reason,) = refusals_shown_plainly(result)
    assert "no live runpod price for 2 x NVIDIA GeForce RTX 4090 (secure)" in reason
    assert "nothing was reserved or created" in reason
    result.stdout.fnmatch_lines(["*failed before it was ready; no pod was created; the reservation is released"])
    assert API_KEY not in "\n".join(result.outlines + result.errlines)
    assert fake.pods == [] and not (pod_dir.path / "ledger.md").exists()


def test_a_corrupt_ledger_refuses_each_paid_test_plainly(pod_dir, fake):  # noqa: F811
    (pod_dir.path / "ledger.md").write_text("| not | the | ledger |\n")
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""), test_more="""
        import pytest

        @pytest.mark.gpu
        def test_other(gpu_pod):
            pass
        """)
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    reasons = refusals_shown_plainly(result)
    assert [r.partition(": ")[0] for r in reasons] == ["test_more.py::test_other", "test_pod.py::test_on_pod"]
    assert all("ledger.md, line 1: " in r for r in reasons)
    assert fake.pods == [] and (pod_dir.path / "ledger.md").read_text() == "| not | the | ledger |\n"


def test_a_malformed_budget_section_refuses_plainly(pod_dir, fake):  # noqa: F811
    toml = pod_dir.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace("phase_ceiling_usd = 5.0", 'phase_ceiling_usd = "five"'))
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    (reason,) = refusals_shown_plainly(result)
    assert reason.startswith("test_pod.py::test_on_pod: ") and "phase_ceiling_usd" in reason
    assert fake.pods == [] and not (pod_dir.path / "ledger.md").exists()


def test_a_bug_before_the_pod_keeps_its_traceback(pod_dir, fake):  # noqa: F811
    pod_dir.makeconftest("""
        from pytest_distcheck.pods.lease import Lease

        def broken(self):
            raise RuntimeError("a bug in the kit")

        Lease._check_live_rate = broken
        """)
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*def broken(self):*", "E*RuntimeError: a bug in the kit"])
    assert PAID_REFUSED.format(reason="") not in result.stdout.str()
    assert fake.pods == [] and [r.status for r in ledger_rows(pod_dir.path)] == ["open", "settled"]


def test_twice_as_many_xdist_workers_as_the_ceiling_holds_never_reserve_past_it(pod_dir, fake):  # noqa: F811
    body = "\n".join(
        f"""
@pytest.mark.gpu
@pytest.mark.pod(gpus=2, minutes=1)
def test_{n}(gpu_pod):
    assert gpu_pod.run("sleep 1", timeout=30).ok
""" for n in range(4))
    pod_dir.makepyfile(test_many="import pytest\n" + body)
    peak = []

    def watch():
        while not done:
            peak.append(len(fake.live_pods()))
            time.sleep(0.02)

    import threading

    done = False
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    # each reservation: $1.18/h x 72 s = $0.0236; a $0.05 ceiling holds 2 at once, and 4 workers race for them
    result = pod_dir.runpytest_subprocess("--max-usd", "0.05", "-n", "4", "-p", "no:cacheprovider")
    done = True
    t.join()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1
    errors = outcomes.get("error", outcomes.get("errors", 0))
    assert outcomes.get("passed", 0) + errors == 4
    # each loser was refused by the guard, and the controller lists it as the workers reported it
    assert sum(line.startswith("distcheck: " + PAID_REFUSED.format(reason="")) for line in result.outlines) == errors
    assert max(peak) <= 2
    no_pod_billing(fake)
    rows = ledger_rows(pod_dir.path)
    settled = [r for r in rows if r.status == "settled"]
    assert len(settled) == len(fake.pods) == outcomes["passed"]
    assert sum(r.cost for r in settled) <= 0.05


def test_api_key_never_shown(pod_dir, fake):  # noqa: F811
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra="raise RuntimeError('see the traceback')"))
    fake.inject("create", "http_500")
    fake.inject("get", "http_502")
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider", "-vv", "-rA",
                                          "--junitxml=report.xml", "--showlocals")
    text = "\n".join(result.outlines + result.errlines)
    assert "RunPod answered with an error" in text  # the create failure is reported...
    assert API_KEY not in text  # ...without the key
    assert API_KEY not in (pod_dir.path / "report.xml").read_text()
    ledger = pod_dir.path / "ledger.md"
    assert not ledger.exists() or API_KEY not in ledger.read_text()
    no_pod_billing(fake)


@pytest.mark.parametrize("args, message", [
    (["--gpu-provider", "aws"], UNKNOWN_PROVIDER.format(source="command line --gpu-provider", value="aws",
                                                        choices="runpod, local")),
    (["--gpu-local-rate", "-1"], "command line --gpu-local-rate: " + LOCAL_RATE_BOUND.format(max=100, value="-1")),
])
def test_bad_settings_are_usage_errors(pod_dir, args, message):  # noqa: F811
    result = pod_dir.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_provider_from_env_and_local_skips_without_gpus(pod_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DISTCHECK_GPU_PROVIDER", "local")
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not os.path.exists(os.path.join(p, "nvidia-smi"))))
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest_subprocess("--max-usd", "3", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([HEADER_LOCAL.format(rate=0),
                                 "*" + SKIPPED.format(provider="local", reason="*needs 2 GPU(s); this machine has 0*")])


def test_bad_timings_ini_is_a_usage_error(pod_dir):  # noqa: F811
    pod_dir.makeini("[pytest]\ndistcheck_pod_timings = ready_timeout=soon\n")
    result = pod_dir.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini key distcheck_pod_timings: ready_timeout='soon' is not a number*"])


def test_a_key_without_the_gpu_extra_is_said_in_the_header_and_nothing_is_swept(pod_dir, fake, monkeypatch):  # noqa: F811
    """The header no longer promises sweeps a Python without the gpu extra cannot make (an instructor's gate job)."""
    from pytest_distcheck import deps
    from pytest_distcheck.pods.plugin import HEADER_RUNPOD_NO_EXTRA
    from pytest_distcheck.pods.session import NOT_SWEPT

    monkeypatch.setattr(deps, "missing_dependencies", lambda requires=None, extra="": ["asyncssh"] if extra else [])
    pod_dir.makepyfile(test_pod=POD_TEST.format(extra=""))
    result = pod_dir.runpytest("--co", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([NOT_SWEPT.format(reason=deps.missing_extra_message("gpu", ["asyncssh"])),
                                 HEADER_RUNPOD_NO_EXTRA])
    assert fake.api.log == [] and API_KEY not in result.stdout.str()
