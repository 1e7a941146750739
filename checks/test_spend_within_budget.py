"""DoD item spend-within-budget: the phase's cloud spend, recomputed from the ledger's rows, is within
the phase ceiling and every experiment's ceiling (both from [budget] of the workspace file).

The ledger must parse (its hash chain included: an edited, deleted or inserted row is named). When
RUNPOD_API_KEY is set, the ledger is first reconciled with what RunPod billed for its pods; a
reconciled run counts the provider's bill, and every difference is shown. Overruns count in full.
The ledger is "append-only and committed" (lab 00): it must be committed as it is
(pytest_distcheck.committed asks git), so the CI gate judges the rows the learner published.
"""

from __future__ import annotations

import os
from decimal import Decimal

import pytest

import pytest_distcheck
from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.config import budget_config
from pytest_distcheck.budget.errors import rows as count_rows
from pytest_distcheck.budget.errors import runs as count_runs
from pytest_distcheck.budget.errors import usd
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError, DistcheckError
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m


def _reconcile(cfg) -> list[str]:
    """Reconcile with RunPod when a key is set; lines for the log (a failure is shown, not fatal)."""
    if not os.environ.get("RUNPOD_API_KEY", "").strip():
        return [_(m.NOT_RECONCILED)]
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.pods.runpod_api import pod_bills

    try:
        findings = BudgetGuard.from_config(cfg).reconcile(pod_bills)
    except DistcheckError as exc:
        return [_(m.RECONCILE_FAILED).format(error=exc)]
    return [_(m.RECONCILED).format(finding=f.line()) for f in findings]


@pytest.mark.local
@pytest.mark.dod("spend-within-budget")
def test_spend_within_budget(distcheck_workspace, distcheck_log, distcheck_evidence):
    item = distcheck_workspace.item("spend-within-budget")
    try:
        cfg = budget_config(distcheck_workspace)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    if cfg is None:
        pytest_distcheck.broken(_(m.NO_BUDGET_SECTION).format(path=distcheck_workspace.path))
    if not cfg.ledger.is_file():
        misnamed = cfg.misnamed_ledger()  # a misspelt path beside the real ledger: not "no ledger yet"
        if misnamed is not None:
            pytest_distcheck.broken(str(misnamed))
        pytest_distcheck.pending(_(m.NO_LEDGER).format(ledger=cfg.ledger_rel), item.how)
    distcheck_evidence(cfg.ledger)
    try:
        notes = _reconcile(cfg)
        # parse() checks every row, the chain, and that cost == rate_per_hour x billed_s / 3600.
        rows = cfg.open_ledger().read()
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    # Totals from each row's recomputed cost; nothing written in the file as a total is read.
    charges = accounting.charges(rows)
    total = sum((c.usd for c in charges), Decimal(0))
    lines = [_(m.SPEND_SUMMARY).format(rows=count_rows(len(rows)), runs=count_runs(len(charges)), total=usd(total),
                                       ceiling=usd(cfg.phase_ceiling_usd))]
    over = []
    if total > cfg.phase_ceiling_usd:
        over.append(_(m.OVER_PHASE).format(total=usd(total), ceiling=usd(cfg.phase_ceiling_usd)))
    for exp, ceiling in cfg.experiment_ceilings_usd.items():
        spent = sum((c.usd for c in charges if c.row.experiment == exp), Decimal(0))
        lines.append(_(m.EXPERIMENT_SPENT).format(experiment=exp, spent=usd(spent), ceiling=usd(ceiling)))
        if spent > ceiling:
            rows_of = ", ".join(str(c.row.line) for c in charges if c.row.experiment == exp)
            over.append(_(m.OVER_EXPERIMENT).format(experiment=exp, lines=rows_of, spent=usd(spent),
                                                    ceiling=usd(ceiling)))
    unsettled = [c.run_id for c in charges if not c.settled]
    if unsettled:
        lines.append(_(m.OPEN_RUNS).format(runs=", ".join(unsettled)))
    for c in charges:
        if c.overran:
            lines.append(_(m.OVERRUN).format(run=c.run_id, seconds=c.overrun.billed_s, line=c.overrun.line,
                                             cost=usd(c.overrun.recomputed_cost)))
    lines += notes
    lines.append(_(m.LEDGER_LINE).format(confirmation=_(accounting.confirmation(rows))))
    if over:
        pytest_distcheck.broken(_(m.OVERSPENT).format(ledger=cfg.ledger_rel, over="; ".join(over)))
    distcheck_log(_(m.SPEND_TITLE).format(ledger=cfg.ledger_rel), "\n".join(lines))
    require_committed([cfg.ledger], distcheck_workspace.root)
    # The ledger is written on the learner's machine, reconciled rows included: the provider is not asked in
    # this run, so the evidence is self-reported whatever the ledger says (red-team A03).
    label = provenance.ledger_label(accounting.confirmation(rows) == accounting.PROVIDER_CONFIRMED)
    distcheck_evidence(flags=[provenance.SELF_REPORTED])
    pytest_distcheck.done(_(m.SPEND_DONE).format(label=label, summary=lines[0]))
