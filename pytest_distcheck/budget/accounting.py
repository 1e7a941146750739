"""What the ledger says was spent: one charge per run, totals overall, by experiment and by session.

Pure functions over parsed rows (no file I/O). Every amount is recomputed from each row's
rate_per_hour and billed_s (``LedgerRow.recomputed_cost``), never taken from a written total. A run
counts its latest ``reconciled`` row, else its ``settled`` plus ``overrun`` rows, else its ``started``
or ``open`` row (its worst case); event rows cost nothing (docs/design/budget.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from pytest_distcheck.budget.ledger import LedgerRow
from pytest_distcheck.i18n import N_

# confirmation()'s answers: identifiers a caller compares, spoken as _(answer).
NOTHING_SPENT = N_("nothing spent")
NOTHING_SETTLED = N_("no run settled yet: open runs are counted at their worst case")
PROVIDER_CONFIRMED = N_("confirmed by the provider")
SELF_REPORTED = N_("self-reported")

# A provider's amount confirms the kit's within this many seconds at the pod's rate (the kit counts from
# its create call to confirmed termination: a few polls more than the provider).
MATCH_S = 10


@dataclass(frozen=True)
class Charge:
    """What one run costs by the ledger.

    Attributes:
        rows: every row of the run, in file order.
    """

    rows: tuple[LedgerRow, ...]

    def _last(self, status: str) -> LedgerRow | None:
        return next((r for r in reversed(self.rows) if r.status == status), None)

    @property
    def run_id(self) -> str:
        return self.rows[0].run_id

    @property
    def reconciled(self) -> LedgerRow | None:
        """The latest ``reconciled`` row (the provider's bill), or None."""
        return self._last("reconciled")

    @property
    def settled_row(self) -> LedgerRow | None:
        return self._last("settled")

    @property
    def overrun(self) -> LedgerRow | None:
        return self._last("overrun")

    @property
    def pod_row(self) -> LedgerRow:
        """The run's ``started`` row, else its first row: the pod, its rate and its worst case."""
        return self._last("started") or self.rows[0]

    @property
    def row(self) -> LedgerRow:
        """The row that counts (the reconciled, settled or worst-case row); its line for messages."""
        return self.reconciled or self.settled_row or self.pod_row

    @property
    def settled(self) -> bool:
        """Whether the run is over by the ledger (settled or reconciled), not counted at a worst case."""
        return self.reconciled is not None or self.settled_row is not None

    @property
    def self_reported(self) -> Decimal | None:
        """USD the kit measured (settled + overrun), or None while the run is not settled."""
        if self.settled_row is None:
            return None
        over = self.overrun
        return self.settled_row.recomputed_cost + (over.recomputed_cost if over else Decimal(0))

    @property
    def usd(self) -> Decimal:
        """What the run counts (see the module docstring)."""
        if self.reconciled is not None:
            return self.reconciled.recomputed_cost
        mine = self.self_reported
        return mine if mine is not None else self.pod_row.recomputed_cost

    @property
    def difference(self) -> Decimal | None:
        """Provider's bill minus what the kit measured (or its worst case), when reconciled; else None."""
        if self.reconciled is None:
            return None
        mine = self.self_reported
        return self.reconciled.recomputed_cost - (mine if mine is not None else self.pod_row.recomputed_cost)

    @property
    def confirmed(self) -> bool:
        """The provider's bill for the pod matches what the kit measured (within ``MATCH_S`` seconds at
        the pod's rate, plus a hundredth of a cent of rounding)."""
        diff = self.difference
        tolerance = self.pod_row.rate_per_hour * MATCH_S / 3600 + Decimal("0.0001")
        return diff is not None and self.self_reported is not None and abs(diff) <= tolerance

    @property
    def overran(self) -> bool:
        return self.overrun is not None

    @property
    def terminate_failed(self) -> bool:
        """A ``terminate-failed`` row says its pod may still be billing (and the run is not settled)."""
        return not self.settled and self._last("terminate-failed") is not None

    @property
    def rate_unknown(self) -> bool:
        """The provider reported no rate for the run's pod (a ``rate-unknown`` row)."""
        return self._last("rate-unknown") is not None


def charges(rows: Iterable[LedgerRow]) -> list[Charge]:
    """One charge per run id, in the order runs first appear."""
    out: dict[str, list[LedgerRow]] = {}
    for row in rows:
        out.setdefault(row.run_id, []).append(row)
    return [Charge(tuple(rs)) for rs in out.values()]


@dataclass(frozen=True)
class Totals:
    """Sums of :func:`charges`, in USD (exact Decimals).

    Attributes:
        total: every run.
        by_experiment: experiment id -> its runs' sum (runs with no experiment are only in ``total``).
        unsettled: run ids counted at their worst case.
        overruns: run ids with an overrun row.
        differences: run id -> provider's bill minus the kit's figure, for reconciled runs that differ.
    """

    total: Decimal
    by_experiment: dict[str, Decimal] = field(default_factory=dict)
    unsettled: tuple[str, ...] = ()
    overruns: tuple[str, ...] = ()
    differences: dict[str, Decimal] = field(default_factory=dict)

    def experiment(self, exp_id: str) -> Decimal:
        return self.by_experiment.get(exp_id, Decimal(0))


def totals(rows: Iterable[LedgerRow], run_prefix: str | None = None) -> Totals:
    """Totals over the ledger's charges; with ``run_prefix``, only runs whose id starts with it
    (a session's runs are ``<session id>-<n>``)."""
    total = Decimal(0)
    by_exp: dict[str, Decimal] = {}
    unsettled: list[str] = []
    overruns: list[str] = []
    diffs: dict[str, Decimal] = {}
    for ch in charges(rows):
        if run_prefix is not None and not ch.run_id.startswith(run_prefix):
            continue
        total += ch.usd
        exp = ch.rows[0].experiment
        if exp:
            by_exp[exp] = by_exp.get(exp, Decimal(0)) + ch.usd
        if not ch.settled:
            unsettled.append(ch.run_id)
        if ch.overran:
            overruns.append(ch.run_id)
        if ch.difference is not None and not ch.confirmed:
            diffs[ch.run_id] = ch.difference
    return Totals(total, by_exp, tuple(unsettled), tuple(overruns), diffs)


def confirmation(rows: Iterable[LedgerRow]) -> str:
    """For the DoD table's confirmed/self-reported column: "confirmed by the provider" when every paid
    run with a pod has a reconciled row matching what the kit measured; "self-reported" when some run
    is not reconciled or its bill differs; "no run settled yet" when the only runs are open (reserved, counted at
    their worst case); "nothing spent" for a ledger without runs."""
    every = list(charges(rows))
    runs = [ch for ch in every if ch.pod_row.has_pod and ch.pod_row.recomputed_cost > 0]
    if not runs:
        return NOTHING_SETTLED if any(not ch.settled for ch in every) else NOTHING_SPENT
    return PROVIDER_CONFIRMED if all(ch.confirmed for ch in runs) else SELF_REPORTED


def provider_confirmed(rows: Iterable[LedgerRow], run_id: str) -> bool | None:
    """For the DoD table: True when the provider's bill confirms the run's ledger rows (a reconciled
    row matching the kit's settled figure), False when the run is only self-reported (not reconciled,
    or the provider's bill differs), None when the ledger has no such run."""
    for ch in charges(rows):
        if ch.run_id == run_id:
            return ch.confirmed
    return None
