"""List the RunPod account's pods and terminate pytest-distcheck's orphans (the sweep, by hand).

Needs RUNPOD_API_KEY. `distcheck pods` lists every pod (id, name, status, $/hour) and says which are
the kit's (named distcheck-<run id>-<deadline>) and whether they are orphans. `--sweep` terminates
the orphans: pods whose pytest session has ended on this machine, or whose reserved time is over;
pods of sessions still running, and other pods, are left alone. `--sweep --all` terminates every
pod named distcheck-*, e.g. after a laptop died and you are on another machine. Pods are terminated,
never stopped, and each termination is confirmed by reading the pod back. Before the sweep, the pods
the workspace's ledger says may still be billing (a failed terminate, a run whose process died) are
ended first and recorded (pytest_distcheck.pods.recovery).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.i18n import N_, _

ALL_NEEDS_SWEEP = N_("--all only goes with --sweep")
NO_PODS = N_("no pods in the RunPod account")
ORPHAN = N_("ORPHAN: ")
NOTHING_TO_SWEEP = N_("nothing to sweep")
LEDGER_LINE = N_("ledger: {line}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--sweep", action="store_true", help="terminate the kit's orphaned pods")
    parser.add_argument("--all", action="store_true",
                        help="with --sweep: terminate every pod named distcheck-*, orphan or not")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import DistcheckError
    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.sweep import orphan_reason, sweep
    from pytest_distcheck.pods.timings import Timings

    if args.all and not args.sweep:
        raise DistcheckError(_(ALL_NEEDS_SWEEP))
    timings = Timings()
    provider = RunPodProvider(timings)
    pods = provider.list()
    scope = "all" if args.all else "manual"
    if not pods:
        print(_(NO_PODS))
    for pod in pods:
        rate = f"${pod.usd_per_hour:.3f}/h" if pod.usd_per_hour is not None else "$?/h"
        kill, why = orphan_reason(pod, scope)
        verdict = (_(ORPHAN) if kill else "") + why
        print(f"{pod.id:<16} {pod.name:<48} {pod.status:<10} {rate:>10}  {verdict}")
    if not args.sweep:
        return 0
    unconfirmed = _recover(args, provider, timings, pods)
    if unconfirmed is not None:
        pods = provider.list()  # what recovery ended is gone from the list
    report = sweep(provider, scope, confirm_timeout=timings.confirm_timeout, pods=pods)
    for line in report.lines():
        print(line)
    if not report.terminated:
        print(_(NOTHING_TO_SWEEP))
    return 1 if report.unconfirmed or unconfirmed else 0


def _recover(args: argparse.Namespace, provider, timings, pods) -> list[str] | None:
    """The ledger's pods that may still be billing, first; None when there is no workspace ledger."""
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.pods.recovery import recover
    from pytest_distcheck.workspace import load_workspace

    if not Path(args.config).is_file():
        return None
    cfg = budget_config(load_workspace(Path(args.config)))
    if cfg is None:
        return None
    done = recover(BudgetGuard.from_config(cfg), provider, timings.confirm_timeout, pods)
    for line in done.lines:
        print(_(LEDGER_LINE).format(line=line))
    return done.unconfirmed
