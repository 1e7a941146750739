"""What a paid run is doing, on one status line: create, wait (seconds since the create call and USD
accrued so far), ready, staging, run, copy-back, terminate, settle.

Written through pytest's terminal reporter with capture suspended (as pytest's live logging does), so
it shows with and without ``-s`` and never lands in a test's captured output. On a terminal the line
is rewritten in place; elsewhere (a pipe, CI, pytester) each new step is a plain line of its own, and a
wait that shows no new step still gets a line every :data:`QUIET_EVERY_S` seconds. Output of a command
on the pod is written above the line. Tests: ``tests/test_pods_progress.py`` (the line) and
``tests/test_pods_tp_check.py`` (visible in a pytest run with and without ``-s``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _

QUIET_EVERY_S = 30.0
PREFIX = "distcheck pods: "
# The line's steps and endings, through the catalog (pytest_distcheck/i18n.py).
METERED = N_("{seconds} s since create, ${usd} so far")
SINCE_CREATE = N_("{seconds} s since create")
STAGING = N_("staging {file} -> pod:{remote}")
RUNNING = N_("running {command}")
COPYING_BACK = N_("copying back pod:{remote}")
CREATE_LOST = N_("the create answer was lost; {name} is looked for at session end")
NO_POD_RELEASED = N_("no pod was created; the reservation is released")
NO_POD_STILL_OPEN = N_("no pod was created; the reservation could not be released: its open row keeps counting")
TERMINATE_FAILED = N_("terminate failed, pod {pod} may still be billing; the ledger keeps its worst case")
NOT_SETTLED = N_("pod {pod} terminated; ledger not settled")
SETTLED = N_("pod {pod} terminated; settled {seconds} s x ${rate}/h = ${cost} (run {run_id})")


class StatusLine:
    """The status line of one pod. Call it with a status text; :meth:`output` writes a command's line.

    Args:
        title: what is rented, e.g. ``"2 x NVIDIA GeForce RTX 4090 (runpod)"``.
        reporter: pytest's terminal reporter (``write_line``, ``rewrite``, ``isatty``), or None: plain lines
            on ``sys.__stderr__``.
        suspend: a context manager factory that suspends output capture while writing (pytest's
            ``capman.global_and_fixture_disabled``), or None.
        meter: returns (monotonic seconds of the create call or None, USD per hour of the pod or None);
            read at each update for the elapsed time and the USD accrued.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, title: str, reporter: Any = None, suspend: Callable[[], Any] | None = None,
                 meter: Callable[[], tuple[float | None, float | None]] = lambda: (None, None),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.title = title
        self.reporter = reporter
        self.suspend = suspend or contextlib.nullcontext
        self.meter = meter
        self.clock = clock
        self.tty = bool(reporter is not None and reporter.isatty())
        self.lines: list[str] = []  # every line shown (for the plain form: as written)
        self._text = ""
        self._last_plain = ""
        self._last_plain_at = -1e18
        self._drawn = False

    def render(self, text: str, metered: bool = True) -> str:
        """The line for ``text``: prefix, title, text and (``metered``) seconds since create and USD so far."""
        started, rate = self.meter()
        extra = ""
        if started is not None and metered:
            elapsed = max(self.clock() - started, 0.0)
            seconds = f"{elapsed:.0f}"
            shown = (_(METERED).format(seconds=seconds, usd=f"{float(rate) * elapsed / 3600:.4f}") if rate is not None
                     else _(SINCE_CREATE).format(seconds=seconds))
            extra = f" [{shown}]"
        return f"{PREFIX}{self.title}: {text}{extra}"

    def __call__(self, text: str, metered: bool = True) -> None:
        """Show ``text`` (with the time since create and USD accrued unless ``metered`` is False)."""
        self._text = text
        line = self.render(text, metered)
        if self.tty:
            def draw() -> None:
                if not self._drawn:  # start below pytest's "file.py " line instead of over it
                    getattr(self.reporter, "ensure_newline", lambda: None)()
                self.reporter.rewrite(line, erase=True)
            self._write(draw)
            self._drawn = True
            self.lines.append(line)
            return
        now = self.clock()
        if text != self._last_plain or now - self._last_plain_at >= QUIET_EVERY_S:
            self._last_plain, self._last_plain_at = text, now
            self._plain(line)

    step = __call__

    def output(self, line: str) -> None:
        """A line of a command's output (with or without its newline), written above the status line."""
        line = line.rstrip("\n")
        if self.tty:
            def redraw() -> None:
                self.reporter.rewrite(line, erase=True)
                self.reporter.write_line("")
                self.reporter.rewrite(self.render(self._text), erase=True)
            self._write(redraw)
        else:
            self._plain(line, record=False)

    def close(self) -> None:
        """End the line (a newline on a terminal)."""
        if self.tty and self._drawn:
            self._write(lambda: self.reporter.write_line(""))
            self._drawn = False

    def _plain(self, line: str, record: bool = True) -> None:
        if record:
            self.lines.append(line)
        if self.reporter is None:
            print(line, file=sys.__stderr__, flush=True)  # noqa: T201 - no terminal reporter (-p no:terminal)
        else:
            self._write(lambda: self.reporter.write_line(line))

    def _write(self, fn: Callable[[], None]) -> None:
        with self.suspend():
            fn()
            if self.reporter is not None:
                self.reporter.flush()


def label(command: str) -> str:
    """How a command is shown: its first line's ``# comment`` if it starts with one (through the catalog, so
    a comment that is a msgid, like :data:`~pytest_distcheck.pods.preflight.PROBE_LABEL`, speaks the language
    in use while the command itself stays the same), else its first 60 characters."""
    first = command.lstrip().splitlines()[0] if command.strip() else ""
    if first.startswith("#"):
        return _(first.lstrip("# ").strip())
    return first[:60] + ("..." if len(first) > 60 or "\n" in command.strip() else "")


class ReportedPod:
    """A pod whose ``put``/``run``/``get`` announce their step on a :class:`StatusLine` (staging, running
    ..., copying back); everything else is the pod's own (``id``, ``run_id``, ``provider``, ...)."""

    def __init__(self, pod: Any, line: StatusLine) -> None:
        self._pod = pod
        self._line = line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pod, name)

    def put(self, local: Path, remote: str) -> None:
        self._line.step(_(STAGING).format(file=Path(local).name, remote=remote))
        self._pod.put(local, remote)

    def run(self, command: str, timeout: float, on_output: Any = None, *, shown: str | None = None) -> Any:
        """The pod's ``run``, announced as ``shown`` (text in the language in use, e.g. a formatted catalog
        message) or, without it, as :func:`label` of ``command``."""
        self._line.step(_(RUNNING).format(command=label(command) if shown is None else shown))
        return self._pod.run(command, timeout, on_output)

    def get(self, remote: str, local: Path) -> None:
        self._line.step(_(COPYING_BACK).format(remote=remote))
        self._pod.get(remote, local)


def ending(lease: Any) -> str:
    """How a lease ended, for the status line: terminated or not, and what the ledger settled."""
    term, res = lease.termination, lease.reservation
    row = getattr(res, "settled_row", None) if res is not None else None
    notes = "".join(f"; {n}" for n in getattr(lease, "notes", ()))
    if lease.pod_id is None:
        if lease.lost_name is not None:
            return _(CREATE_LOST).format(name=lease.lost_name)
        released = res is None or getattr(res, "settled_row", None) is not None
        return _(NO_POD_RELEASED if released else NO_POD_STILL_OPEN)
    if term is None or not term.confirmed:
        return _(TERMINATE_FAILED).format(pod=lease.pod_id) + notes
    if row is None:
        return _(NOT_SETTLED).format(pod=lease.pod_id) + notes
    return _(SETTLED).format(pod=lease.pod_id, seconds=row.billed_s, rate=row.rate_per_hour, cost=row.cost,
                             run_id=row.run_id) + notes
