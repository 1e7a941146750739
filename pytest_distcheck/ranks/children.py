"""The stacks of the processes a hung rank started (its children, and theirs), for the timeout report.

A rank's faulthandler (registered on SIGUSR1, writing to the rank's stack file) is inherited by a
child the rank forks without exec (``multiprocessing``'s ``fork`` start method, ``os.fork``): the
kernel keeps the handler and the child shares the rank's open stack file. So such a child is dumped
the same way, one at a time, and its stack read from what it appended. A child that runs another
program (``subprocess``, the ``spawn`` start method) lost the handler at ``exec``: SIGUSR1 would kill
it, so it is not signalled and its stack is said to be unreadable. Linux only (``/proc``); psutil.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from pytest_distcheck.i18n import N_, _, ngettext

# The header of each child's section in a rank's stack text, in the language in use (hang_hint reads them).
FORKED_CHILD = N_("child process {pid} (forked without exec by the rank, which runs {rank_threads}; the child "
                  "has {threads}; {cmdline}), stack:")
UNREAD_CHILD = N_("child process {pid} ({threads}; {cmdline}): its stack could not be read ({why})")
EXECED = N_("it runs another program, started with exec, which has no stack dump handler; py-spy dump --pid "
            "reads one")
THREADS_UNKNOWN = N_("threads unknown")
MAX_CHILDREN = 4  # dumped per rank; the rest are counted
DUMP_WAIT_S = 0.5  # how long a child may take to write its dump


def _threads(n: int) -> str:
    return ngettext("{n} thread", "{n} threads", n).format(n=n)


def _catches_sigusr1(pid: int) -> bool:
    """Whether ``pid`` has a handler for SIGUSR1 (``SigCgt`` of ``/proc/<pid>/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGUSR1 - 1) & 1)
    return False


def _read_new(path: str, start: int, wait_s: float) -> str:
    """What was appended to ``path`` after byte ``start``, once it stops growing (at most ``wait_s``)."""
    deadline, last, still = time.monotonic() + wait_s, start, 0
    while time.monotonic() < deadline and still < 3:
        time.sleep(0.02)
        size = os.path.getsize(path)
        still = still + 1 if size == last and size > start else 0
        last = size
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read().decode(errors="replace")


def describe_children(pid: int, stack_file: str, clean: Callable[[str], str] = str,
                      wait_s: float = DUMP_WAIT_S) -> str:
    """The sections of every live descendant of rank process ``pid``: its header (in the language in use) and,
    for a forked one, the stack it dumps (SIGUSR1) into ``stack_file``, filtered by ``clean``. '' when it has
    none (or on any error reading them: the report must come out anyway)."""
    try:
        import psutil

        rank = psutil.Process(pid)
        kids = [k for k in rank.children(recursive=True) if k.status() != psutil.STATUS_ZOMBIE]
        rank_threads = _threads(rank.num_threads()) if kids else ""
    except Exception:  # noqa: BLE001 - gone, not permitted, no psutil
        return ""
    out = []
    for kid in kids[:MAX_CHILDREN]:
        try:
            fields = dict(pid=kid.pid, threads=_threads(kid.num_threads()),
                          cmdline=" ".join(kid.cmdline())[:200] or kid.name())
            if not _catches_sigusr1(kid.pid):
                out.append(_(UNREAD_CHILD).format(**fields, why=_(EXECED)))
                continue
            start = os.path.getsize(stack_file)
            os.kill(kid.pid, signal.SIGUSR1)
            stack = clean(_read_new(stack_file, start, wait_s)).rstrip()
            out.append(_(FORKED_CHILD).format(**fields, rank_threads=rank_threads) + "\n" + stack)
        except Exception as exc:  # noqa: BLE001 - it ended meanwhile, or /proc is not there
            out.append(_(UNREAD_CHILD).format(pid=kid.pid, threads=_(THREADS_UNKNOWN), cmdline="?",
                                              why=type(exc).__name__))
    if len(kids) > MAX_CHILDREN:
        more = len(kids) - MAX_CHILDREN
        out.append(ngettext("... and {n} more child process", "... and {n} more child processes", more).format(n=more))
    return "".join("\n" + section for section in out)
