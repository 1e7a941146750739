"""Processes the gate's sub-session leaves behind: caught, killed and named by the gate's parent.

Lab code runs in the sub-session and on its ranks, so it can start a process that outlives them (a
double-forked ``setsid`` daemon) and rewrites the report after the kit wrote it (docs/ci/threat-model.md,
section 3). Design decisions:

- While the sub-session runs, the gate's parent is a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``,
  since Linux 3.4): a process of the sub-session's tree whose parent dies is reparented to it instead of to
  init, whatever sessions or process groups it made, so it cannot leave the parent's sight.
- After the sub-session exited, and before its report is read, every process under the parent that was not
  there before it started (by pid and start time, from ``/proc/<pid>/stat``; running or a zombie) is named
  and killed with SIGKILL, with everything below it, and the parent reaps what is its own; a process that
  started while the kill went on becomes the parent's when its parent dies and is killed in the next round.
  A zombie counts: it may have ended after the report was written.
- The previous subreaper setting is put back afterwards.

Not done: off Linux (no ``prctl``, no ``/proc``) nothing is found and nothing is killed; a process started
outside the parent's tree (a service manager, a daemon the learner started before the gate) is never seen.
The parent must start no other process while the gate runs (a thread's subprocess would be counted too).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
PR_GET_CHILD_SUBREAPER = 37
ROUNDS = 50  # kill rounds before giving up on a tree that keeps starting processes
CMDLINE_CHARS = 120  # of each named process's command line


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _stat(pid: str) -> tuple[int, str, int] | None:
    """``(ppid, state, start time in clock ticks since boot)`` of process ``pid``, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name in parentheses may hold spaces and ")"
    try:
        return int(fields[1]), fields[0], int(fields[19])  # stat fields 4, 3 and 22 (proc(5))
    except (IndexError, ValueError):
        return None


def processes() -> dict[int, tuple[int, str, int]]:
    """Every process this one can see in ``/proc``: pid -> ``(ppid, state, start time)``; ``{}`` without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    out = {}
    for name in names:
        if name.isdigit():
            stat = _stat(name)
            if stat is not None:
                out[int(name)] = stat
    return out


def describe(pid: int, state: str) -> str:
    """``pid 1234 (python -c ...)``: the process's command line, shortened; a zombie's name (it has none)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    if not cmd:
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                cmd = f.read().decode("utf-8", "replace").strip()
        except OSError:
            cmd = "?"
        if state == "Z":
            cmd += ", ended but not reaped"
    if len(cmd) > CMDLINE_CHARS:
        cmd = cmd[:CMDLINE_CHARS - 3] + "..."
    return f"pid {pid} ({cmd})"


class Watch:
    """The gate's parent as a child subreaper from :meth:`start` to :meth:`end`; ``end`` kills and names what
    the sub-session left. Use ``start`` right before the sub-session starts and ``end`` right after it was
    reaped, before its report is read."""

    def __init__(self) -> None:
        self._before: set[tuple[int, int]] = set()
        self._previous: int | None = None

    def start(self) -> None:
        """Note the processes under this one, then become a child subreaper (Linux; elsewhere nothing)."""
        me = os.getpid()
        self._before = {(pid, st[2]) for pid, st in processes().items() if st[0] == me}
        prctl = _prctl()
        if prctl is None:
            return
        was = ctypes.c_int(0)
        if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) == 0 and \
                prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            self._previous = was.value

    def end(self) -> list[str]:
        """Kill every process under this one that :meth:`start` did not see (with all below it), reap those
        that are this process's, put the subreaper setting back; ``["pid N (command line)", ...]``, in the
        order found; ``[]`` when there was none."""
        named: dict[int, str] = {}
        try:
            for _ in range(ROUNDS):
                if not self._kill_round(named):
                    break
            else:
                named[-1] = f"more (it kept starting processes after {ROUNDS} rounds of SIGKILL)"
        finally:
            prctl = _prctl()
            if prctl is not None and self._previous is not None:
                prctl(PR_SET_CHILD_SUBREAPER, self._previous, 0, 0, 0)
                self._previous = None
        return list(named.values())

    def _kill_round(self, named: dict[int, str]) -> bool:
        """Name, SIGKILL and reap the new processes under this one; whether there were any."""
        me = os.getpid()
        table = processes()
        below: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            below.setdefault(ppid, []).append(pid)
        mine = [pid for pid in below.get(me, []) if (pid, table[pid][2]) not in self._before]
        todo, tree = list(mine), []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo += below.get(pid, [])
        if not tree:
            return False
        for pid in tree:
            if pid not in named:
                named[pid] = describe(pid, table[pid][1])
        # A child's pid cannot be reused before this process reaps it; a grandchild's could only if its parent
        # reaped it and the kernel's pid counter came round in the moment between the scan and the kill.
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in mine:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        return True


def verdict_text(named: list[str]) -> str:
    """The reason every item becomes untrusted when the sub-session left processes (``named``: :meth:`Watch.end`)."""
    if len(named) == 1:
        return f"a process started while the gate ran outlived its sub-session: {named[0]}"
    return f"processes started while the gate ran outlived its sub-session: {', '.join(named)}"
