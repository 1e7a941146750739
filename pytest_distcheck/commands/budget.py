"""Show the spend ledger: its rows, totals by experiment, and what is left under each ceiling.

  distcheck budget                   the workspace's ledger ([budget] ledger of checks/distcheck.toml)
  distcheck budget --reconcile       append what RunPod billed for the ledger's pods; show every difference
  distcheck budget --settle RUN_ID --seconds S   settle a run left open by a crash: S = the pod's billed seconds
  distcheck budget --repair-torn-line            cut a last line torn by an interrupted write (kept in .distcheck/)
Exit status 1 when a ceiling is passed or a bill differs; 2 for a malformed or unreadable ledger or workspace file,
a refused settlement, or ``--reconcile`` without RUNPOD_API_KEY while the ledger names pods. Nothing is rewritten
(docs/design/budget.md).
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from collections import Counter

from pytest_distcheck.commands import DEFAULT_CONFIG, add_config_argument
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _

RECONCILED = N_("Reconciled with RunPod's bill: {n} run(s) with a pod")
NOTHING_TO_RECONCILE = N_("Nothing to reconcile: the ledger names no pod")
LEDGER_ROWS = N_("Ledger {path}: {n} row(s)")
NOTHING_SPENT = N_("; nothing spent yet")
TOTALS = N_("Totals (recomputed from the rows; a reconciled run counts the provider's bill):")
EXPERIMENT_TOTAL = N_("  {name:<16} {spent:>9} of {ceiling}  -> {left} left")
OTHER_RUNS = N_("  other runs       {spent:>9}")
DID_YOU_MEAN_KEY = N_("; is the key {name!r} misspelt?")
# Rows of an experiment the workspace does not declare: the guard refuses such a run, so a key was renamed.
UNDECLARED = N_("  {experiment!r}: {n} row(s) of an experiment the workspace file does not declare (no ceiling in "
                "[budget.experiment_ceilings_usd], not in budget.uncapped_experiments); its spend counts towards the "
                "phase only{hint}")
PHASE_TOTAL = N_("  phase total      {spent:>9} of {ceiling}  -> {left} left ({runs} run(s))")
OVERRUN_LINE = N_("OVERRUN: run {run} (pod {pod}) billed {seconds} s beyond its reservation (line {line}, {cost})")
DIFFERENCE_MEASURED = N_("DIFFERENCE: run {run} (pod {pod}): the provider billed {billed} (line {line}), the kit "
                         "measured {kit}; the provider's figure counts")
DIFFERENCE_RESERVED = N_("DIFFERENCE: run {run} (pod {pod}): the provider billed {billed} (line {line}), the kit "
                         "reserved {kit}; the provider's figure counts")
OPEN_RUNS = N_("Open runs counted at their worst case (no settled row yet): {runs}")
IN_PROGRESS = N_("Runs in progress (their process still runs; counted at their worst case): {runs}")
ABANDONED = N_("Unsettled runs whose process is gone, counted at their worst case: {runs}")
SETTLE_HOW = N_("  Settle each from the provider's bill (`distcheck budget --reconcile`, needs RUNPOD_API_KEY), or by "
                "hand\n  with the pod's billed seconds from the provider's billing page:")
SETTLE_COMMAND = N_("  distcheck budget{config} --settle {run} --seconds S    # S: billed seconds of {pod} (reserved "
                    "{seconds})")
POD = N_("pod {pod}")
CONFIRMATION = N_("Ledger: {confirmation}")
OVER_CEILING = N_("OVER a ceiling: the spend-within-budget item is broken")
# The ledger table's column heads, each padded after translation to its column's width.
COLUMNS = (N_("time (UTC)"), N_("run id"), N_("status"), N_("resource"), N_("billed s"), N_("USD/h"), N_("cost"),
           N_("experiment"), N_("purpose / pod"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_config_argument(parser)
    parser.add_argument("--settle", metavar="RUN_ID",
                        help="append the settled row of a run that has only its open row (its process died)")
    parser.add_argument("--seconds", metavar="S",
                        help="with --settle: the pod's billed seconds, from the provider's billing page")
    parser.add_argument("--reconcile", action="store_true",
                        help="ask RunPod what it billed for the ledger's pods (needs RUNPOD_API_KEY), append "
                             "reconciled rows and show every difference")
    parser.add_argument("--repair-torn-line", action="store_true",
                        help="cut a last line left torn by an interrupted write; every other row stays as it is")


def load_guard(config: str):
    """The guard of a workspace file (no session ceiling). Raises ConfigError."""
    from pathlib import Path

    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.workspace import load_workspace

    return BudgetGuard.from_workspace(load_workspace(Path(config)))


def run(args: argparse.Namespace) -> int:
    from decimal import Decimal

    from pytest_distcheck.budget import accounting
    from pytest_distcheck.budget.errors import usd

    guard = load_guard(args.config)
    if args.repair_torn_line:
        return repair(guard)
    if args.settle is not None or args.seconds is not None:
        return settle(guard, args)
    differ = False
    if args.reconcile:
        findings = guard.reconcile(_runpod_bills)
        print(_(RECONCILED).format(n=len(findings)) if findings else _(NOTHING_TO_RECONCILE))
        for f in findings:
            print(f"  {f.line()}")
        differ = any(f.state == "difference" for f in findings)
    status = guard.status()
    rows = status.rows
    print(_(LEDGER_ROWS).format(path=guard.ledger.path, n=len(rows)) + ("" if rows else _(NOTHING_SPENT)))
    if rows:
        h = [_(c) for c in COLUMNS]
        print(f"  {h[0]:<20} {h[1]:<16} {h[2]:<7} {h[3]:<20} {h[4]:>8} {h[5]:>7} {h[6]:>9}  {h[7]:<14} {h[8]}")
        for r in rows:
            print(f"  {r.time_utc:%Y-%m-%d %H:%M:%S} {r.run_id:<16} {r.status:<7} "
                  f"{r.provider + ' ' + r.resource:<20} {r.billed_s:>8} {r.rate_per_hour:>7} "
                  f"{usd(r.recomputed_cost):>9}  {r.experiment or '-':<14} {r.purpose} / {r.resource_id}")
    charges = accounting.charges(rows)
    over = False
    print(_(TOTALS))
    for key, lim in status.limits.items():
        if not key.startswith("experiment "):
            continue
        over |= lim.spent > lim.ceiling
        print(_(EXPERIMENT_TOTAL).format(name=key.removeprefix("experiment "), spent=usd(lim.spent),
                                         ceiling=usd(lim.ceiling), left=usd(max(lim.left, Decimal(0)))))
    other = sum((c.usd for c in charges if c.row.experiment not in guard.experiment_ceilings), Decimal(0))
    print(_(OTHER_RUNS).format(spent=usd(other)))
    undeclared = Counter(r.experiment for r in rows if r.experiment and r.experiment not in guard.experiments)
    for experiment, n in undeclared.items():
        close = difflib.get_close_matches(experiment, list(guard.experiment_ceilings), n=1)
        hint = _(DID_YOU_MEAN_KEY).format(name=close[0]) if close else ""
        print(_(UNDECLARED).format(experiment=experiment, n=n, hint=hint))
    phase = status.limits["phase"]
    over |= phase.spent > phase.ceiling
    print(_(PHASE_TOTAL).format(spent=usd(phase.spent), ceiling=usd(phase.ceiling),
                                left=usd(max(phase.left, Decimal(0))), runs=len(charges)))
    for ch in charges:
        if ch.overran:
            o = ch.overrun
            print(_(OVERRUN_LINE).format(run=ch.run_id, pod=o.resource_id, seconds=o.billed_s, line=o.line,
                                         cost=usd(o.recomputed_cost)))
        if ch.difference is not None and not ch.confirmed:
            template = DIFFERENCE_MEASURED if ch.self_reported is not None else DIFFERENCE_RESERVED
            print(_(template).format(run=ch.run_id, pod=ch.row.resource_id, billed=usd(ch.reconciled.recomputed_cost),
                                     line=ch.reconciled.line, kit=usd(ch.reconciled.recomputed_cost - ch.difference)))
    for ch in charges:
        if ch.terminate_failed:
            print(_(TERMINATE_FAILED_LINE).format(run=ch.run_id, pod=ch.pod_row.resource_id))
        if ch.rate_unknown:
            print(_(RATE_UNKNOWN_LINE).format(run=ch.run_id, pod=ch.pod_row.resource_id))
    if status.totals.unsettled:
        print(_(OPEN_RUNS).format(runs=", ".join(status.totals.unsettled)))
    if status.in_progress:
        print(_(IN_PROGRESS).format(runs=", ".join(status.in_progress)))
    if status.abandoned:
        print(_(ABANDONED).format(runs=", ".join(status.abandoned)))
        print(_(SETTLE_HOW))
        config = "" if args.config == DEFAULT_CONFIG else f" --config {shlex.quote(args.config)}"
        for ch in charges:
            if ch.run_id in status.abandoned:
                r = ch.pod_row
                pod = _(POD).format(pod=r.resource_id) if r.has_pod else _(NO_POD_RECORDED).format(run=r.run_id)
                print(_(SETTLE_COMMAND).format(config=config, run=r.run_id, pod=pod, seconds=r.billed_s))
    print(_(CONFIRMATION).format(confirmation=_(accounting.confirmation(rows))))
    if over:
        print(_(OVER_CEILING))
        return 1
    return 1 if differ else 0


TERMINATE_FAILED_LINE = N_("TERMINATE FAILED: run {run}: pod {pod} may still be billing; `distcheck pods --sweep` "
                           "retries it (and the next pytest session does, first)")
RATE_UNKNOWN_LINE = N_("RATE UNKNOWN: run {run}: the provider reported no rate for pod {pod}; it was metered at the "
                       "larger of the priced rate and the provider's bill; `distcheck budget --reconcile` appends "
                       "the bill")
NO_POD_RECORDED = N_("the pod named distcheck-{run}-* (none recorded: its process died before the started row; "
                     "`distcheck pods --sweep` records and ends it)")
CANNOT_RECONCILE = N_("cannot reconcile: {env} is not set (export it; reconcile asks RunPod's billing for the pods the "
                      "ledger names)")


def _runpod_bills(pod_ids: list[str]):
    """:func:`~pytest_distcheck.pods.runpod_api.pod_bills`, refused up front without a key (called only
    when the ledger names pods). Raises DistcheckError."""
    import os

    from pytest_distcheck.pods.runpod_api import API_KEY_ENV, pod_bills

    if not os.environ.get(API_KEY_ENV, "").strip():
        raise DistcheckError(_(CANNOT_RECONCILE).format(env=API_KEY_ENV))
    return pod_bills(pod_ids)


REPAIRED = N_("Cut the torn line {line} of {ledger} (a write interrupted by a kill or a power cut); its bytes are "
              "kept in {saved}. Every other row is as it was.")
NOTHING_TO_REPAIR = N_("Nothing to repair: the last line of {ledger} is whole.")
SETTLE_TOGETHER = N_("--settle RUN_ID and --seconds S go together (S: the pod's billed seconds)")
NOT_WHOLE_SECONDS = N_("--seconds {text!r} is not a whole number of seconds; nothing written")
SETTLED = N_("Settled run {run} (pod {pod}) in {ledger}, line {line}: {seconds} s x {rate}/h = {cost} (was counted at "
             "its worst case, {worst_s} s = {worst})")
OVERRUN_RECORDED = N_("OVERRUN recorded on line {line}: {seconds} s beyond the reservation = {cost}")
PHASE_NOW = N_("Phase total now {spent} of {ceiling}")


def repair(guard) -> int:
    """``--repair-torn-line``. Raises LedgerError when the ledger has other problems (nothing is cut)."""
    done = guard.ledger.repair_torn_line()
    if done is None:
        print(_(NOTHING_TO_REPAIR).format(ledger=guard.ledger.path))
    else:
        print(_(REPAIRED).format(line=done[0], ledger=guard.ledger.path, saved=done[1]))
    return 0


def settle(guard, args: argparse.Namespace) -> int:
    """``--settle RUN_ID --seconds S``: append the run's settled row. Raises SettleRefused, LedgerError."""
    from pytest_distcheck.budget import accounting
    from pytest_distcheck.budget.errors import SettleRefused, usd

    if args.settle is None or args.seconds is None:
        raise SettleRefused(_(SETTLE_TOGETHER))
    text = args.seconds.strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise SettleRefused(_(NOT_WHOLE_SECONDS).format(text=args.seconds))
    written = guard.settle_rows(args.settle, int(text))
    row = written[0]
    status = guard.status()
    worst = next(c for c in accounting.charges(status.rows) if c.run_id == row.run_id).pod_row
    print(_(SETTLED).format(run=row.run_id, pod=row.resource_id, ledger=guard.ledger.path, line=row.line,
                            seconds=row.billed_s, rate=usd(row.rate_per_hour), cost=usd(row.recomputed_cost),
                            worst_s=worst.billed_s, worst=usd(worst.recomputed_cost)))
    if len(written) > 1:
        o = written[1]
        print(_(OVERRUN_RECORDED).format(line=o.line, seconds=o.billed_s, cost=usd(o.recomputed_cost)))
    phase = status.limits["phase"]
    print(_(PHASE_NOW).format(spent=usd(phase.spent), ceiling=usd(phase.ceiling)))
    return 0
