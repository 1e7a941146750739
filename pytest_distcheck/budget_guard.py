"""The budget guard: every paid action is priced before launch, refused past a ceiling, cut when it
reaches its reservation, and recorded in an append-only ledger.

This module is the public entry point; the parts live in :mod:`pytest_distcheck.budget`
(``ledger``: the Markdown ledger; ``pricing``: shipped and live prices; ``guard``: ceilings and
cross-process reservations; ``watchdog``: the cut; ``plugin``: ``--max-usd``, markers, fixtures).

API for code that rents machines (the pods providers)::

    from pytest_distcheck.budget_guard import BudgetGuard, BudgetRefused, BudgetExceeded

    guard = BudgetGuard.from_workspace(ws, session_ceiling_usd=3.0)      # or the `budget_guard` fixture
    res = guard.reserve(                      # raises BudgetRefused("... would cost up to $A; $B left of $C ...");
                                              # appends the run's "open" row and reads it back first
        provider="runpod", gpu_type="RTX 4090", gpu_count=2,
        max_seconds=1800,                     # worst case: the run's time limit incl. boot/teardown slack
        purpose="tests/test_tp.py::test_speedup", experiment="tp-inference",  # declared in [budget]
        cloud="secure",                       # price tier; "secure" | "community"
        cap_usd=None,                         # @pytest.mark.budget(usd=X): reserve min(worst case, X)
        usd_per_gpu_hour=None,                # a known rate (e.g. the local provider's); else the price table
    )
    res.run_id        # "<session>-<hex>", unique per reservation; name pods f"distcheck-{res.run_id}-..."
    res.usd           # USD reserved (the watchdog's limit)
    res.max_seconds   # seconds that fit in res.usd at the reserved rate (use for server-side TTLs)
    try:
        pod = create(...)                                    # after reserve(), never before
        res.record_pod(pod.id, usd_per_hour=cost_per_hr,     # appends a "started" row at once;
                       started_at=t_create)                  # usd_per_hour: the whole pod (costPerHr), never
                                                             # trusted below the priced rate (0/None/lower: the
                                                             # priced rate is metered); started_at:
                                                             # time.monotonic() of the create call
        with res.watchdog(terminate=lambda: provider.terminate(pod.id)):
            ...  # wait, put, run, get; the watchdog calls terminate() within 1 s before the accrued
                 # cost (rate x seconds since started_at, billing granularity) reaches res.limit_usd
                 # (the open row's worst case, <= res.usd), on KeyboardInterrupt, SIGTERM, any exception
                 # leaving the block, and interpreter exit; after a cut by cost the block raises
                 # BudgetExceeded naming the limit and the ceiling. Pass teardown_s=S to cut S seconds
                 # earlier, so that termination itself stays within the reservation.
    finally:
        provider.terminate_and_confirm(pod.id)
        res.settle(actual_seconds)            # create call -> confirmed termination; appends a "settled"
                                              # row (and an "overrun" row for seconds past the reservation:
                                              # never refused). Call it on failure too; with no pod recorded
                                              # it settles at 0 s. Idempotent.

    # or use the reservation as a context manager: leaving it settles at 0 s when no pod was recorded
    # (a recorded, unsettled run keeps counting its started row's worst case until settled).

Pytest side (``pytest_distcheck.budget.plugin``): ``--max-usd`` (env ``DISTCHECK_MAX_USD``, ini
``distcheck_max_usd``) is the session ceiling; tests marked ``gpu`` are skipped without it. The
``budget`` fixture gives a test ``budget.reserve(provider, gpu_type, gpu_count, max_seconds=None, *,
experiment=None, cloud="secure", usd_per_gpu_hour=None)``: purpose = the test id, cap = its
``@pytest.mark.budget(usd=X)``, max_seconds defaults to its ``@pytest.mark.timeout``. The session
fixture ``budget_guard`` is the :class:`BudgetGuard` itself.

Ceilings and what is left (all USD): remaining = min(session ceiling (--max-usd) - spent this session,
phase ceiling - ledger total, experiment ceiling - experiment total), where a run not yet settled
counts its worst case. ``guard.status()`` returns these figures (:class:`BudgetStatus`), the runs in
progress (their process is alive: pid and start time) and the abandoned ones (process gone).

Ledger rows, without rewriting anything (see :mod:`pytest_distcheck.budget.ledger`): ``open``
(reserve, before anything exists), ``started`` (the pod and its metered rate), ``settled``,
``overrun`` (seconds past the reservation), ``reconciled`` (the provider's bill). A crash leaves the
worst case counted, never forgotten, until ``distcheck budget --reconcile`` (the provider's bill) or
``distcheck budget --settle RUN_ID --seconds S`` appends the rest.
One lock (``.distcheck/budget.lock``, filelock) covers read-sum-reserve and every
append.
"""

from pytest_distcheck.budget.accounting import Charge, Totals, charges, totals
from pytest_distcheck.budget.config import BudgetConfig, budget_config
from pytest_distcheck.budget.errors import BudgetExceeded, BudgetRefused, PriceUnknown
from pytest_distcheck.budget.guard import BudgetGuard, BudgetStatus, Estimate, Limit, Reservation
from pytest_distcheck.budget.ledger import Ledger, LedgerError, LedgerRow
from pytest_distcheck.budget.pricing import Billing, Price, PriceBook
from pytest_distcheck.budget.watchdog import Watchdog

__all__ = [
    "Billing", "BudgetConfig", "BudgetExceeded", "BudgetGuard", "BudgetRefused", "BudgetStatus", "Charge",
    "Estimate", "Ledger", "LedgerError", "LedgerRow", "Limit", "Price", "PriceBook", "PriceUnknown",
    "Reservation", "Totals", "Watchdog", "budget_config", "charges", "totals",
]
