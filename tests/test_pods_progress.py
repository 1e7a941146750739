"""The paid run's status line (pytest_distcheck.pods.progress): rewritten in place on a terminal, a
plain line per step elsewhere, with the time since create and the USD accrued."""

from __future__ import annotations

from pytest_distcheck.pods.preflight import PROBE_LABEL, probe_command
from pytest_distcheck.pods.progress import QUIET_EVERY_S, ReportedPod, StatusLine, label


class _Reporter:
    def __init__(self, tty: bool) -> None:
        self.tty, self.calls = tty, []

    def isatty(self) -> bool:
        return self.tty

    def write_line(self, line: str) -> None:
        self.calls.append(("line", line))

    def rewrite(self, line: str, erase: bool = False) -> None:
        self.calls.append(("rewrite", line))

    def flush(self) -> None:
        pass


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_form_writes_each_new_step_once_and_a_quiet_wait_every_30_s():
    rep, clock = _Reporter(tty=False), _Clock()
    line = StatusLine("2 x RTX 4090 (runpod)", rep, meter=lambda: (100.0, 1.18), clock=clock)
    line("creating distcheck-x")
    clock.t += 60
    line("RUNNING, port 22 not mapped yet")
    line("RUNNING, port 22 not mapped yet")  # same step: no new line
    clock.t += QUIET_EVERY_S
    line("RUNNING, port 22 not mapped yet")  # a quiet wait still shows it is alive
    line.output("tp=1 batch=1\n")
    assert rep.calls == [
        ("line", "distcheck pods: 2 x RTX 4090 (runpod): creating distcheck-x [0 s since create, $0.0000 so far]"),
        ("line", "distcheck pods: 2 x RTX 4090 (runpod): RUNNING, port 22 not mapped yet "
                 "[60 s since create, $0.0197 so far]"),
        ("line", "distcheck pods: 2 x RTX 4090 (runpod): RUNNING, port 22 not mapped yet "
                 "[90 s since create, $0.0295 so far]"),
        ("line", "tp=1 batch=1"),
    ]


def test_terminal_form_rewrites_one_line_and_writes_output_above_it():
    rep, clock = _Reporter(tty=True), _Clock()
    line = StatusLine("1 x A40 (runpod)", rep, meter=lambda: (None, None), clock=clock)
    line("creating")
    line("creating")
    line.output("hello\n")
    line("settled", metered=False)
    line.close()
    assert rep.calls == [("rewrite", "distcheck pods: 1 x A40 (runpod): creating")] * 2 + [
        ("rewrite", "hello"), ("line", ""), ("rewrite", "distcheck pods: 1 x A40 (runpod): creating"),
        ("rewrite", "distcheck pods: 1 x A40 (runpod): settled"), ("line", "")]


def test_steps_of_a_reported_pod_and_command_labels():
    rep = _Reporter(tty=False)
    line = StatusLine("p", rep)

    class Pod:
        id = "pod-1"

        def put(self, local, remote):
            pass

        def run(self, command, timeout, on_output=None):
            return 0

        def get(self, remote, local):
            pass

    pod = ReportedPod(Pod(), line)
    pod.put("/tmp/stage", "code")
    pod.run("# speedup.py: 2 ranks\ncd code && torchrun ...", 10)
    pod.get("code/r.json", "/tmp/r.json")
    assert pod.id == "pod-1"
    assert [c[1].split(": ", 2)[2] for c in rep.calls] == [
        "staging stage -> pod:code", "running speedup.py: 2 ranks", "copying back pod:code/r.json"]
    assert label("echo " + "x" * 70) == "echo " + "x" * 55 + "..."
    pod.run("# speedup.py: 2 ranks\ncd code && torchrun ...", 10, shown="the experiment")
    assert rep.calls[-1][1].endswith(": running the experiment")
    # The preflight's comment is a catalog message; in English it reads as it always did.
    assert label(probe_command(2)) == PROBE_LABEL == "preflight: GPUs, driver, torch, NCCL all-reduce, free memory"


def test_a_reservation_that_could_not_be_released_is_not_called_released():
    """Issue 32: after a failed release the open row stays counted; the line must not say otherwise."""
    from types import SimpleNamespace

    from pytest_distcheck.pods.progress import ending

    lease = SimpleNamespace(termination=None, pod_id=None, lost_name=None, notes=[],
                            reservation=SimpleNamespace(settled_row=None))
    assert ending(lease) == "no pod was created; the reservation could not be released: its open row keeps counting"
    lease.reservation.settled_row = object()
    assert ending(lease) == "no pod was created; the reservation is released"
