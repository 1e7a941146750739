"""The budget guard: every paid action is priced before launch, refused past a ceiling, cut when it reaches
its reservation, and recorded in an append-only ledger (contract and ledger rows: docs/design/budget.md).

The public names below import from here (``from pytest_distcheck.budget import BudgetGuard, BudgetRefused``),
loaded on first use so that the pytest wiring (``plugin``) stays light. The parts: ``ledger`` (the Markdown
ledger file), ``accounting`` (totals from its rows), ``pricing`` (price table and live prices), ``config``
(the workspace's ``[budget]`` section), ``guard`` (ceilings and reservations), ``watchdog`` (the cut),
``reconcile`` (the provider's bill), ``plugin`` (pytest wiring).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_distcheck.budget.accounting import Charge, Totals, charges, totals
    from pytest_distcheck.budget.config import BudgetConfig, budget_config
    from pytest_distcheck.budget.errors import BudgetExceeded, BudgetRefused, PriceUnknown
    from pytest_distcheck.budget.guard import BudgetGuard, BudgetStatus, Estimate, Limit, Reservation
    from pytest_distcheck.budget.ledger import Ledger, LedgerError, LedgerRow
    from pytest_distcheck.budget.pricing import Billing, Price, PriceBook
    from pytest_distcheck.budget.watchdog import Watchdog

_HOMES = {
    "accounting": ("Charge", "Totals", "charges", "totals"),
    "config": ("BudgetConfig", "budget_config"),
    "errors": ("BudgetExceeded", "BudgetRefused", "PriceUnknown"),
    "guard": ("BudgetGuard", "BudgetStatus", "Estimate", "Limit", "Reservation"),
    "ledger": ("Ledger", "LedgerError", "LedgerRow"),
    "pricing": ("Billing", "Price", "PriceBook"),
    "watchdog": ("Watchdog",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
__all__ = [
    "Billing", "BudgetConfig", "BudgetExceeded", "BudgetGuard", "BudgetRefused", "BudgetStatus", "Charge",
    "Estimate", "Ledger", "LedgerError", "LedgerRow", "Limit", "Price", "PriceBook", "PriceUnknown",
    "Reservation", "Totals", "Watchdog", "budget_config", "charges", "totals",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
