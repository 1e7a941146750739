"""What the ledger says was spent: one charge per run, totals overall, by experiment and by session.

Pure functions over parsed rows (no file I/O). Every amount is recomputed from each row's
rate_per_hour and billed_s (``LedgerRow.recomputed_cost``), never taken from a written total.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from pytest_distcheck.budget.ledger import LedgerRow


@dataclass(frozen=True)
class Charge:
    """What one run costs by the ledger.

    Attributes:
        row: the row that counts: the settled row, or the open row while the run has no settled row.
        settled: whether ``row`` is a settled row (else the cost is the open row's worst case).
    """

    row: LedgerRow
    settled: bool

    @property
    def run_id(self) -> str:
        return self.row.run_id

    @property
    def usd(self) -> Decimal:
        return self.row.recomputed_cost


def charges(rows: Iterable[LedgerRow]) -> list[Charge]:
    """One charge per run id, in the order runs first appear."""
    out: dict[str, Charge] = {}
    for row in rows:
        if row.status == "settled" or row.run_id not in out:
            out[row.run_id] = Charge(row, row.status == "settled")
    return list(out.values())


@dataclass(frozen=True)
class Totals:
    """Sums of :func:`charges`, in USD (exact Decimals).

    Attributes:
        total: every run.
        by_experiment: experiment id -> its runs' sum (runs with no experiment are only in ``total``).
        unsettled: run ids counted at their open row's worst case.
    """

    total: Decimal
    by_experiment: dict[str, Decimal] = field(default_factory=dict)
    unsettled: tuple[str, ...] = ()

    def experiment(self, exp_id: str) -> Decimal:
        return self.by_experiment.get(exp_id, Decimal(0))


def totals(rows: Iterable[LedgerRow], run_prefix: str | None = None) -> Totals:
    """Totals over the ledger's charges; with ``run_prefix``, only runs whose id starts with it
    (a session's runs are ``<session id>-<n>``)."""
    total = Decimal(0)
    by_exp: dict[str, Decimal] = {}
    unsettled: list[str] = []
    for ch in charges(rows):
        if run_prefix is not None and not ch.run_id.startswith(run_prefix):
            continue
        total += ch.usd
        if ch.row.experiment:
            by_exp[ch.row.experiment] = by_exp.get(ch.row.experiment, Decimal(0)) + ch.usd
        if not ch.settled:
            unsettled.append(ch.run_id)
    return Totals(total, by_exp, tuple(unsettled))
