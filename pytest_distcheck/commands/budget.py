"""Show the spend ledger: its rows, totals by experiment, and what is left under each ceiling.

  distcheck budget                 the workspace's ledger ([budget] ledger of checks/distcheck.toml)
  distcheck budget --settle RUN_ID --seconds S
                                   settle a run left open by a crash: S = the pod's billed seconds
                                   from the provider's billing page

Every amount is recomputed from the rows (rate x billed seconds); a run with an open row and no
settled row counts its worst case until it is settled. ``--settle`` appends one ``settled`` row
(the open row's rate, provider, resource, experiment and pod id) and rewrites nothing.
Exit status 1 when a ceiling is passed, 2 for a malformed ledger or a refused settlement.
"""

from __future__ import annotations

import argparse
import re
import shlex

from pytest_distcheck.commands import DEFAULT_CONFIG, add_config_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_config_argument(parser)
    parser.add_argument("--settle", metavar="RUN_ID",
                        help="append the settled row of a run that has only its open row (its process died)")
    parser.add_argument("--seconds", metavar="S",
                        help="with --settle: the pod's billed seconds, from the provider's billing page")


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
    if args.settle is not None or args.seconds is not None:
        return settle(guard, args)
    status = guard.status()
    rows = status.rows
    print(f"Ledger {guard.ledger.path}: {len(rows)} row(s)" + ("; nothing spent yet" if not rows else ""))
    if rows:
        print(f"  {'time (UTC)':<20} {'run id':<16} {'status':<7} {'resource':<20} {'billed s':>8} "
              f"{'USD/h':>7} {'cost':>9}  {'experiment':<14} purpose / pod")
        for r in rows:
            print(f"  {r.time_utc:%Y-%m-%d %H:%M:%S} {r.run_id:<16} {r.status:<7} "
                  f"{r.provider + ' ' + r.resource:<20} {r.billed_s:>8} {r.rate_per_hour:>7} "
                  f"{usd(r.recomputed_cost):>9}  {r.experiment or '-':<14} {r.purpose} / {r.resource_id}")
    charges = accounting.charges(rows)
    over = False
    print("Totals (recomputed from the rows):")
    for key, lim in status.limits.items():
        if not key.startswith("experiment "):
            continue
        over |= lim.spent > lim.ceiling
        print(f"  {key.removeprefix('experiment '):<16} {usd(lim.spent):>9} of {usd(lim.ceiling)}"
              f"  -> {usd(max(lim.left, Decimal(0)))} left")
    other = sum((c.usd for c in charges if c.row.experiment not in guard.experiment_ceilings), Decimal(0))
    print(f"  {'other runs':<16} {usd(other):>9}")
    phase = status.limits["phase"]
    over |= phase.spent > phase.ceiling
    print(f"  {'phase total':<16} {usd(phase.spent):>9} of {usd(phase.ceiling)}  -> "
          f"{usd(max(phase.left, Decimal(0)))} left ({len(charges)} run(s))")
    if status.totals.unsettled:
        print(f"Open runs counted at their worst case (no settled row yet): {', '.join(status.totals.unsettled)}")
        print("  Once a run's pod is gone (ended by its dead-man switch or `distcheck pods --sweep`) and its "
              "process died, settle it\n  with the pod's billed seconds from the provider's billing page:")
        config = "" if args.config == DEFAULT_CONFIG else f" --config {shlex.quote(args.config)}"
        for ch in charges:
            if not ch.settled:
                r = ch.row
                print(f"  distcheck budget{config} --settle {r.run_id} --seconds S"
                      f"    # S <= {r.billed_s}: billed seconds of pod {r.resource_id}")
    pending = {k: e for k, e in status.held.items() if not e["recorded"]}
    if pending:
        print(f"Reserved by runs in progress: {usd(phase.held)} ({', '.join(pending)})")
    if over:
        print("OVER a ceiling: the spend-within-budget item is broken")
        return 1
    return 0


def settle(guard, args: argparse.Namespace) -> int:
    """``--settle RUN_ID --seconds S``: append the run's settled row. Raises SettleRefused, LedgerError."""
    from pytest_distcheck.budget.errors import SettleRefused, usd

    if args.settle is None or args.seconds is None:
        raise SettleRefused("--settle RUN_ID and --seconds S go together (S: the pod's billed seconds)")
    text = args.seconds.strip()
    if not re.fullmatch(r"-?\d+", text):
        raise SettleRefused(f"--seconds {args.seconds!r} is not a whole number of seconds; nothing written")
    row = guard.settle_open_run(args.settle, int(text))
    status = guard.status()
    opened = next(r for r in status.rows if r.run_id == row.run_id and r.status == "open")
    print(f"Settled run {row.run_id} (pod {row.resource_id}) in {guard.ledger.path}, line {row.line}: "
          f"{row.billed_s} s x {usd(row.rate_per_hour)}/h = {usd(row.recomputed_cost)} "
          f"(was counted at its worst case, {opened.billed_s} s = {usd(opened.recomputed_cost)})")
    phase = status.limits["phase"]
    print(f"Phase total now {usd(phase.spent)} of {usd(phase.ceiling)}")
    return 0
