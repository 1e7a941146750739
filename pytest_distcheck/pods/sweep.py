"""The sweep: find the kit's orphaned pods in the account and terminate them.

A pod is the kit's when its name parses (:mod:`pytest_distcheck.pods.names`); other pods are never
touched. An orphan is, by scope: ``finish``, a pod of this session's runs; any scope, a pod whose session
has ended (no process holds its lock on this machine) or whose reserved time is over (for another
machine's session, only ``FOREIGN_CLOCK_GRACE_S`` past its deadline); ``all`` (``distcheck pods --sweep
--all``), every pod of the kit. Pods left alone are reported with the reason (docs/design/pods.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods import names
from pytest_distcheck.pods.base import PodInfo, Provider
from pytest_distcheck.pods.reaper import Termination, outcome, terminate_and_confirm

DEADLINE_GRACE_S = 60.0
FOREIGN_CLOCK_GRACE_S = 3 * 3600.0  # a client clock hours off must not get a live pod swept elsewhere
SCOPES = ("start", "finish", "manual", "all")
# Why a pod is terminated or left (orphan_reason), and a sweep's lines.
NOT_OURS = N_("not a pytest-distcheck pod")
ALREADY = N_("already {status}")
EVERY_POD = N_("--all: every pytest-distcheck pod")
LEFT_OVER = N_("left over by this session (a lost create reply or an unconfirmed terminate)")
IN_USE = N_("belongs to this session, still in use")
TIME_ENDED = N_("its reserved time ended at {deadline}")
SESSION_ENDED = N_("its pytest session {session} has ended (no process holds its lock)")
SESSION_RUNNING = N_("its pytest session {session} is still running")
SESSION_UNKNOWN = N_("session {session} is not known on this machine; its dead-man switch ends it by {deadline} (or "
                     "run `distcheck pods --sweep --all`)")
SWEPT = N_("{pod} {name}: {outcome}; {why}")
LEFT_RUNNING = N_("{pod} {name}: left running; {why}")


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def orphan_reason(pod: PodInfo, scope: str, *, session: str | None = None, runs: set[str] | None = None,
                  now: float | None = None, state=names.session_state) -> tuple[bool, str]:
    """(terminate?, why) for one pod.

    Args:
        scope: "start", "finish", "manual" or "all".
        session: this process's session id (None for the command line).
        runs: at ``finish``, the run ids this process reserved; None means every run of ``session``
            (a single process, or the xdist controller after its workers ended).
        now: Unix time (default: now); ``state``: session liveness (injectable).
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    parsed = names.parse(pod.name)
    if parsed is None:
        return False, _(NOT_OURS)
    if pod.ended:
        return False, _(ALREADY).format(status=pod.status)
    now = time.time() if now is None else now
    if scope == "all":
        return True, _(EVERY_POD)
    if parsed.session == session:
        if scope == "finish" and (runs is None or parsed.run_id in runs):
            return True, _(LEFT_OVER)
        return False, _(IN_USE)
    live = state(parsed.session)
    if parsed.deadline + (FOREIGN_CLOCK_GRACE_S if live == "unknown" else DEADLINE_GRACE_S) < now:
        return True, _(TIME_ENDED).format(deadline=utc(parsed.deadline))
    if live == "ended":
        return True, _(SESSION_ENDED).format(session=parsed.session)
    if live == "alive":
        return False, _(SESSION_RUNNING).format(session=parsed.session)
    return False, _(SESSION_UNKNOWN).format(session=parsed.session, deadline=utc(parsed.deadline))


@dataclass
class SweepReport:
    """What a sweep saw and did: (pod, why) for each pod terminated or left; terminate outcomes."""

    terminated: list[tuple[PodInfo, str, Termination]] = field(default_factory=list)
    left: list[tuple[PodInfo, str]] = field(default_factory=list)

    @property
    def unconfirmed(self) -> list[Termination]:
        return [t for _, _, t in self.terminated if not t.confirmed]

    def lines(self) -> list[str]:
        out = []
        for pod, why, term in self.terminated:
            out.append(_(SWEPT).format(pod=pod.id, name=pod.name, outcome=outcome(term), why=why))
        for pod, why in self.left:
            if names.parse(pod.name) is not None:
                out.append(_(LEFT_RUNNING).format(pod=pod.id, name=pod.name, why=why))
        return out


def sweep(provider: Provider, scope: str, *, session: str | None = None, runs: set[str] | None = None,
          confirm_timeout: float = 120.0, pods: list[PodInfo] | None = None) -> SweepReport:
    """List the account's pods (unless ``pods`` is given) and terminate the kit's orphans.

    Raises:
        ProviderError: the list call failed (nothing was terminated).
    """
    report = SweepReport()
    for pod in provider.list() if pods is None else pods:
        kill, why = orphan_reason(pod, scope, session=session, runs=runs)
        if kill:
            report.terminated.append((pod, why, terminate_and_confirm(provider, pod.id, confirm_timeout)))
        else:
            report.left.append((pod, why))
    return report
