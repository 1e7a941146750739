"""Errors of the budget guard (a refused launch, with its figures, and a cut run) and its words for amounts and
counts."""

from __future__ import annotations

from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import ngettext


def usd(value: float) -> str:
    """A USD amount for people: ``$0.59``, or 4 places below a cent (``$0.0042``)."""
    value = float(value)
    return f"${value:.2f}" if value == 0 or abs(value) >= 0.01 else f"${value:.4f}"


def rows(n: int) -> str:
    """``1 row`` / ``3 rows`` of the spend ledger."""
    return ngettext("{n} row", "{n} rows", n).format(n=n)


def runs(n: int) -> str:
    """``1 run`` / ``3 runs``: paid runs, by run id."""
    return ngettext("{n} run", "{n} runs", n).format(n=n)


def paid_runs(n: int) -> str:
    """``1 paid run`` / ``2 paid runs``."""
    return ngettext("{n} paid run", "{n} paid runs", n).format(n=n)


class BudgetRefused(DistcheckError):
    """A paid launch was refused before anything started; nothing was reserved or billed.

    Attributes (None for refusals that are not about money left, e.g. an unknown price):
        would_cost: the worst case of the launch, USD.
        left: what is left under the binding ceiling, USD.
        ceiling: that ceiling, USD; ``ceiling_name`` says which one it is.
    """

    def __init__(self, message: str, *, would_cost: float | None = None, left: float | None = None,
                 ceiling: float | None = None, ceiling_name: str | None = None) -> None:
        super().__init__(message)
        self.would_cost = would_cost
        self.left = left
        self.ceiling = ceiling
        self.ceiling_name = ceiling_name


class PriceUnknown(BudgetRefused):
    """No price for this provider, GPU type and cloud: a refusal, never a guess."""


class BudgetExceeded(DistcheckError):
    """A paid run was cut: the watchdog terminated it when its accrued cost reached the limit, or
    because the run was interrupted. The message names the limit and the ceiling it came from."""


class SettleRefused(DistcheckError):
    """A by-hand settlement (``distcheck budget --settle``) was refused; nothing was written."""
