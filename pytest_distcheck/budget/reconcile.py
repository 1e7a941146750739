"""Reconciliation: the ledger against what the provider billed for each of its pods.

For every run with a pod, the provider's bill for that pod (USD and billed seconds) becomes a
``reconciled`` row, appended unless the run's latest reconciled row already says the same; the row's
``rate_per_hour`` is USD x 3600 / billed_s to 8 places, so the ledger's rule gives the bill back. Every
difference from what the kit measured is reported (:class:`Finding`), never hidden
(docs/design/budget.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.ledger import LedgerRow, make_row
from pytest_distcheck.errors import at_line
from pytest_distcheck.i18n import N_, _

RATE_PLACES = Decimal("0.00000001")
# Finding.line: one run's reconciliation, for a person.
NO_BILL_YET = N_("{run} (pod {pod}): no bill from the provider yet; run --reconcile again later")
CONFIRMED = N_("{run} (pod {pod}): confirmed by the provider, {bill}{where}")
DIFFERENCE = N_("{run} (pod {pod}): DIFFERENCE: the provider billed {bill}, the kit recorded {kit} ({delta}){where}; "
                "the provider's bill counts")

# pod ids -> {pod id: (USD, billed seconds)}; pods the provider has not billed are left out.
BillFetch = Callable[[list[str]], "dict[str, tuple[Decimal, float]]"]


@dataclass(frozen=True)
class Finding:
    """One run's reconciliation: ``state`` is "confirmed", "difference" or "no bill yet".

    Attributes:
        run_id, pod_id; kit_usd: what the kit measured (settled + overrun) or its worst case;
        provider_usd: the provider's bill (None without one); row: the reconciled row appended, if any.
    """

    run_id: str
    pod_id: str
    state: str
    kit_usd: Decimal
    provider_usd: Decimal | None
    row: LedgerRow | None = None

    def line(self) -> str:
        from pytest_distcheck.budget.errors import usd

        if self.provider_usd is None:
            return _(NO_BILL_YET).format(run=self.run_id, pod=self.pod_id)
        where = f" ({at_line(self.row.line)})" if self.row is not None and self.row.line else ""
        if self.state == "confirmed":
            return _(CONFIRMED).format(run=self.run_id, pod=self.pod_id, bill=usd(self.provider_usd), where=where)
        return _(DIFFERENCE).format(run=self.run_id, pod=self.pod_id, bill=usd(self.provider_usd),
                                    kit=usd(self.kit_usd), delta=usd(self.provider_usd - self.kit_usd), where=where)


def reconciled_row(pod_row: LedgerRow, bill_usd: Decimal, bill_s: float) -> LedgerRow:
    """The ``reconciled`` row for a run whose pod the provider billed ``bill_usd`` for ``bill_s`` seconds."""
    seconds = max(int(math.ceil(bill_s - 1e-9)), 1 if bill_usd > 0 else 0)
    rate = (bill_usd * 3600 / seconds).quantize(RATE_PLACES, rounding=ROUND_HALF_UP) if seconds else Decimal(0)
    return make_row(run_id=pod_row.run_id, status="reconciled", provider=pod_row.provider, gpu_type=pod_row.gpu_type,
                    gpu_count=pod_row.gpu_count, billed_s=seconds, rate_per_hour=rate, experiment=pod_row.experiment,
                    purpose=pod_row.purpose, resource_id=pod_row.resource_id)


def plan(rows: Iterable[LedgerRow], bills: dict[str, tuple[Decimal, float]], provider: str = "runpod"
         ) -> list[tuple[Finding, LedgerRow | None]]:
    """(finding, row to append or None) for every run of ``provider`` that has a pod."""
    out = []
    for ch in accounting.charges(rows):
        pod = ch.pod_row
        if pod.provider != provider or not pod.has_pod:
            continue
        kit = ch.self_reported if ch.self_reported is not None else pod.recomputed_cost
        bill = bills.get(pod.resource_id)
        if bill is None:
            out.append((Finding(ch.run_id, pod.resource_id, "no bill yet", kit, None), None))
            continue
        new = reconciled_row(pod, *bill)
        last = ch.reconciled
        same = last is not None and (last.billed_s, last.rate_per_hour) == (new.billed_s, new.rate_per_hour)
        state = "confirmed" if accounting.Charge((*ch.rows, new)).confirmed else "difference"
        out.append((Finding(ch.run_id, pod.resource_id, state, kit, new.recomputed_cost, last if same else new),
                    None if same else new))
    return out
