"""How a failed call is explained: which ranks merely followed a peer down, and what to re-run.

Pure functions of the ranks' outcomes, so each rule is unit-tested without processes.
"""

from __future__ import annotations

import re
import shlex

from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.ranks.children import FORKED_CHILD, UNREAD_CHILD
from pytest_distcheck.ranks.errors import RankOutcome

STOPPED = N_("stopped after a peer failed")
# peers_returned: "{returned} while {lost}" (each part an ngettext of its own count).
PEERS_RETURNED = N_("{returned} while {lost}: a collective only some ranks issued?")
DETAIL_RERUN = N_("re-run with torch's collective checks, which name a collective the ranks issued differently "
                  "(op, shape, dtype): {command} (or mark the test {marker}); a collective only some ranks issued "
                  "still hangs under DETAIL, and the ranks' stacks show where")
DDP_DETAIL_SEGFAULT = N_("DistributedDataParallel's constructor segfaults under TORCH_DISTRIBUTED_DEBUG=DETAIL "
                         "(torch 2.13.0 does so in a plain script too, without this kit); use INFO for DDP "
                         "tests, or DETAIL on code without DDP")


# gloo's errors on a rank whose peer went away (closed its sockets by exiting), in set-up or a collective.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "connectFullMesh failed")


def blame(outcomes: list[RankOutcome]) -> list[RankOutcome]:
    """Mark ranks that failed only because a peer failed in the user's code as stopped.

    A rank that raises exits at once and closes its sockets; a peer still building the group, or waiting
    in a collective with it, then fails in gloo ("connectFullMesh failed", "Connection closed by peer",
    "Connection reset by peer"). That error says nothing about the peer's own code, so it is reported as
    ``stopped`` (its traceback and output kept). A rank counts as failing of its own when it died or
    raised in the call something else than gloo's lost connection. Without such a rank nothing is
    changed: the set-up or the connection itself is the problem.
    """
    def follower(o: RankOutcome) -> bool:
        return o.status == "error" and (o.phase == "setup" or any(p in o.error for p in PEER_GONE))

    if not any(o.status in ("error", "died") and not follower(o) for o in outcomes):
        return outcomes
    return [RankOutcome(o.rank, "stopped", _(STOPPED), traceback=o.traceback, stdout=o.stdout, stderr=o.stderr)
            if follower(o) else o for o in outcomes]


def peers_returned(outcomes: list[RankOutcome]) -> str:
    """What happened when the only failures are gloo's lost connection in a call and every peer returned, or ''.

    A rank left alone in a collective (one its peers never issued) hangs, unless a peer that returned
    closes its connections (``destroy_process_group`` at the end of an ``mp.spawn`` function): then the
    rank fails with gloo's "Connection closed by peer ... typically caused by a remote worker crashing",
    although no rank crashed. Only when every other rank returned normally (``ok``).
    """
    lost = [o.rank for o in outcomes
            if o.status == "error" and o.phase == "call" and any(p in o.error for p in PEER_GONE)]
    returned = [o.rank for o in outcomes if o.status == "ok"]
    if not lost or not returned or len(lost) + len(returned) != len(outcomes):
        return ""

    returned_text = ngettext("rank {ranks} returned and closed its connections",
                             "ranks {ranks} returned and closed their connections", len(returned))
    lost_text = ngettext("rank {ranks} was still in a collective", "ranks {ranks} were still in a collective",
                         len(lost))
    return _(PEERS_RETURNED).format(returned=returned_text.format(ranks=", ".join(map(str, returned))),
                                    lost=lost_text.format(ranks=", ".join(map(str, lost))))


def detail_rerun(nodeid: str, level: str) -> str:
    """The exact command that re-runs a test with torch's collective checks (DETAIL), or ''.

    DETAIL compares every collective across the ranks before running it (``ProcessGroupWrapper``), so it
    names one the ranks issued differently (op, shape, dtype); a collective only some ranks issued has
    nothing to compare with and still hangs under DETAIL, and the ranks' stacks show where.
    """
    if not nodeid or level == "DETAIL":
        return ""
    return _(DETAIL_RERUN).format(command="TORCH_DISTRIBUTED_DEBUG=DETAIL pytest " + shlex.quote(nodeid),
                                  marker='@pytest.mark.dist_debug("DETAIL")')


def known_crash(o: RankOutcome, level: str) -> str:
    """A note on a known torch crash matching this rank's death, or ''."""
    text = o.stderr + o.stack
    if level == "DETAIL" and o.status == "died" and "SIGSEGV" in o.error and "_ddp_init_helper" in text:
        return _(DDP_DETAIL_SEGFAULT)
    return ""


FORKED_CHILD_HANG = N_(
    "A child process forked from {ranks} hung, and the rank waited for it (the child's stack is under the rank's, "
    "below): a process forked after threads started (gloo's, and OpenMP's once a torch op ran on more than one "
    "thread) inherits their locks but not the threads that would release them, so its first torch op can wait "
    "forever (pytorch/pytorch#17199). Start the child with the spawn start method (multiprocessing.get_context("
    "\"spawn\"), or torch.multiprocessing.start_processes(..., start_method=\"spawn\")), or call "
    "torch.set_num_threads(1) before forking. No collective is involved, so a TORCH_DISTRIBUTED_DEBUG=DETAIL "
    "re-run would not help")
CHILD_HANG = N_("A child process of {ranks} did not finish, and the rank waited for it; its stack could not be "
                "read (see below: it runs another program). No collective is involved, so a "
                "TORCH_DISTRIBUTED_DEBUG=DETAIL re-run would not help")

# Frames of a process waiting on its child: multiprocessing (join, a Pool's or a Queue's get), subprocess, futures.
_WAITS_ON_CHILD = re.compile(r'File ".*(?:/multiprocessing/(?:popen_\w+|process|pool|queues|connection)\.py'
                             r'|/subprocess\.py|/concurrent/futures/)')


def _header(template: str) -> re.Pattern:
    """A children.py section header as a pattern: its fixed words, any values in its fields."""
    fixed = re.split(r"\{\w+\}", template)
    return re.compile("^" + ".*?".join(re.escape(part) for part in fixed), re.M)


def hang_hint(nodeid: str, level: str, stacks: dict[int, str]) -> str:
    """What a timeout proposes, from the stacks of the ranks that hung (rank -> text, with their children's
    sections, :func:`pytest_distcheck.ranks.children.describe_children`).

    A rank whose own frames wait on a child process that is there: the spawn / one-thread fix for a forked
    child (:data:`FORKED_CHILD_HANG`), or :data:`CHILD_HANG` for one that runs another program. Otherwise
    the DETAIL re-run (:func:`detail_rerun`), for a collective the ranks issued differently.
    """
    # The headers as the pool wrote them, in the language in use.
    forked_header, unread_header = _header(_(FORKED_CHILD)), _header(_(UNREAD_CHILD))
    forked, unread = [], []
    for rank, text in sorted(stacks.items()):
        forked_at, unread_at = forked_header.search(text), unread_header.search(text)
        # the rank's own frames, before its children's sections
        own = text[:min((m.start() for m in (forked_at, unread_at) if m), default=len(text))]
        if not _WAITS_ON_CHILD.search(own):
            continue
        if forked_at:
            forked.append(rank)
        elif unread_at:
            unread.append(rank)

    def ranks(rs: list[int]) -> str:
        return ngettext("rank {ranks}", "each of ranks {ranks}", len(rs)).format(ranks=", ".join(map(str, rs)))

    if forked:
        return _(FORKED_CHILD_HANG).format(ranks=ranks(forked))
    if unread:
        return _(CHILD_HANG).format(ranks=ranks(unread))
    return detail_rerun(nodeid, level)
