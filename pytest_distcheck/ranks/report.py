"""How a failed call is explained: which ranks merely followed a peer down, and what to re-run.

Pure functions of the ranks' outcomes, so each rule is unit-tested without processes.
"""

from __future__ import annotations

import shlex

from pytest_distcheck.ranks.errors import RankOutcome

STOPPED = "stopped after a peer failed"


def blame(outcomes: list[RankOutcome]) -> list[RankOutcome]:
    """Mark ranks whose group set-up failed because a peer failed in the user's code as stopped.

    A rank that raises at once exits and closes its sockets; a peer still building the group then fails
    in gloo ("connectFullMesh failed", "Connection closed by peer"). That error says nothing about the
    peer's own code, so it is reported as ``stopped`` (its traceback kept). If every failing rank failed
    in set-up, nothing is changed: the set-up itself is the problem.
    """
    culprit = any(o.status in ("error", "died") and o.phase != "setup" for o in outcomes)
    if not culprit:
        return outcomes
    return [RankOutcome(o.rank, "stopped", STOPPED, traceback=o.traceback, stdout=o.stdout, stderr=o.stderr)
            if o.status == "error" and o.phase == "setup" else o for o in outcomes]


def detail_rerun(nodeid: str, level: str) -> str:
    """The exact command that re-runs a test with torch's collective checks (DETAIL), or ''."""
    if not nodeid or level == "DETAIL":
        return ""
    return ("re-run with torch's collective checks, which name a collective that ranks issued differently "
            "(op, shape, dtype, order): TORCH_DISTRIBUTED_DEBUG=DETAIL pytest " + shlex.quote(nodeid)
            + " (or mark the test @pytest.mark.dist_debug(\"DETAIL\"))")


def known_crash(o: RankOutcome, level: str) -> str:
    """A note on a known torch crash matching this rank's death, or ''."""
    text = o.stderr + o.stack
    if level == "DETAIL" and o.status == "died" and "SIGSEGV" in o.error and "_ddp_init_helper" in text:
        return ("DistributedDataParallel's constructor segfaults under TORCH_DISTRIBUTED_DEBUG=DETAIL "
                "(torch 2.13.0 does so in a plain script too, without this kit); use INFO for DDP "
                "tests, or DETAIL on code without DDP")
    return ""
