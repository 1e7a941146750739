"""The budget guard: every paid action is priced before launch, refused past a ceiling, cut when it
reaches its reservation, and recorded in an append-only ledger.

This module is the public entry point; the parts live in :mod:`pytest_distcheck.budget`
(``ledger``: the Markdown ledger; ``pricing``: shipped and live prices; ``guard``: ceilings and
cross-process reservations; ``watchdog``: the cut; ``plugin``: ``--max-usd``, markers, fixtures).

API for code that rents machines (the pods providers)::

    from pytest_distcheck.budget_guard import BudgetGuard, BudgetRefused, BudgetExceeded

    guard = BudgetGuard.from_workspace(ws, session_ceiling_usd=3.0)      # or the `budget_guard` fixture
    res = guard.reserve(                      # raises BudgetRefused("... would cost up to $A; $B left of $C ...")
        provider="runpod", gpu_type="RTX 4090", gpu_count=2,
        max_seconds=1800,                     # worst case: the run's time limit incl. boot/teardown slack
        purpose="tests/test_tp.py::test_speedup", experiment="tp-inference",
        cloud="secure",                       # price tier; "secure" | "community"
        cap_usd=None,                         # @pytest.mark.budget(usd=X): reserve min(worst case, X)
        usd_per_gpu_hour=None,                # a known rate (e.g. the local provider's); else the price table
    )
    res.run_id        # "<session>-<hex>", unique per reservation; name pods f"distcheck-{res.run_id}-..."
    res.usd           # USD reserved (the watchdog's limit)
    res.max_seconds   # seconds that fit in res.usd at the reserved rate (use for server-side TTLs)
    try:
        pod = create(...)                                    # after reserve(), never before
        res.record_pod(pod.id, usd_per_hour=cost_per_hr,     # appends an "open" ledger row at once;
                       started_at=t_create)                  # usd_per_hour: the whole pod (costPerHr);
                                                             # started_at: time.monotonic() of the create call
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
                                              # row and releases the reservation. Call it on failure too;
                                              # with no pod recorded it only releases. Idempotent.

    # or use the reservation as a context manager: leaving it releases the reservation when no pod was
    # recorded (a recorded, unsettled run keeps counting its open row's worst case until settled).

Pytest side (``pytest_distcheck.budget.plugin``): ``--max-usd`` (env ``DISTCHECK_MAX_USD``, ini
``distcheck_max_usd``) is the session ceiling; tests marked ``gpu`` are skipped without it. The
``budget`` fixture gives a test ``budget.reserve(provider, gpu_type, gpu_count, max_seconds=None, *,
experiment=None, cloud="secure", usd_per_gpu_hour=None)``: purpose = the test id, cap = its
``@pytest.mark.budget(usd=X)``, max_seconds defaults to its ``@pytest.mark.timeout``. The session
fixture ``budget_guard`` is the :class:`BudgetGuard` itself.

Ceilings and what is left (all USD): remaining = min(session ceiling (--max-usd) - spent this session,
phase ceiling - ledger total, experiment ceiling - experiment total), each minus the reservations held
against it by every process (xdist workers, other pytest runs) that have not yet become ledger rows.
``guard.status()`` returns these figures (:class:`BudgetStatus`).

Ledger rows and settlement, without rewriting anything: a reservation lives only in
``.distcheck/budget-reservations.json`` (gitignored, lock-protected, expires at reserve time +
max_seconds + slack). ``record_pod`` appends an ``open`` row (cost = the worst case at the pod's
rate); ``settle`` appends a ``settled`` row for the same run id with the actual billed seconds. A run
counts its settled cost, or its open row's worst case while it has none (a crash leaves it counted,
never forgotten, until ``guard.settle_open_run(run_id, billed_s)`` -- ``distcheck budget --settle RUN_ID
--seconds S`` -- appends its settled row from the provider's billed seconds).
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
