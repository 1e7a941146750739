"""Ceilings and reservations: a paid launch is priced, checked against what is left and reserved,
under one lock shared by every process that uses the same ledger (xdist workers, other pytest runs).

Left = the least of
    session ceiling (--max-usd) - this session's charges - this session's held reservations,
    phase ceiling - the ledger's charges - every held reservation,
    experiment ceiling - the experiment's charges - its held reservations (when it has a ceiling).
A reservation is *held* from ``reserve`` until ``record_pod`` turns it into an open ledger row (which
then counts instead), and is dropped at ``settle``/``release`` or when it expires (reserve time +
max_seconds + slack): by then the watchdog and the pod's own kill paths have ended the run.
Reservations live in ``<root>/.distcheck/budget-reservations.json`` (scratch state, gitignored).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.config import BudgetConfig, budget_config
from pytest_distcheck.budget.errors import BudgetRefused, SettleRefused, usd
from pytest_distcheck.budget.ledger import Ledger, LedgerRow, make_row
from pytest_distcheck.budget.pricing import Billing, Price, PriceBook
from pytest_distcheck.calc.cost import billed_seconds, max_runtime_s
from pytest_distcheck.errors import ConfigError, DistcheckError

RESERVATIONS_FILE = "budget-reservations.json"
DEFAULT_SLACK_S = 600.0  # boot and teardown beyond max_seconds before a reservation expires
EPS = Decimal("0.000001")


def session_id_from_env() -> str:
    """The id all processes of one pytest run share: xdist's test-run uid (its first 8 hex digits),
    else a fresh random one."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    uid = "".join(ch for ch in uid.lower() if ch in "0123456789abcdef")
    return uid[:8] if len(uid) >= 8 else secrets.token_hex(4)


@dataclass(frozen=True)
class Estimate:
    """The price of a run before it starts.

    Attributes:
        price: the USD per GPU-hour used and its source.
        billing: the provider's billing rule.
        gpu_count: GPUs; ``seconds``: the asked run time; ``billed_s``: after billing granularity.
        usd: price * gpu_count * billed_s / 3600.
    """

    price: Price
    billing: Billing
    gpu_count: int
    seconds: float
    billed_s: float
    usd: Decimal


@dataclass(frozen=True)
class Limit:
    """One ceiling and what is left under it (USD)."""

    name: str
    ceiling: Decimal
    spent: Decimal
    held: Decimal

    @property
    def left(self) -> Decimal:
        return self.ceiling - self.spent - self.held


@dataclass(frozen=True)
class BudgetStatus:
    """Where the budget stands (USD, Decimals; see the module docstring for the formula).

    Attributes:
        totals: the ledger's totals (:mod:`accounting`); ``rows``: the parsed rows.
        limits: the phase ceiling, the session ceiling when set, and each experiment ceiling.
        held: active reservations (run id -> its entry), those not yet in the ledger and those recorded.
    """

    rows: list[LedgerRow]
    totals: accounting.Totals
    limits: dict[str, Limit]
    held: dict[str, dict[str, Any]]

    def binding(self, experiment: str | None = None) -> Limit:
        """The limit with the least left that applies to a run of this experiment."""
        keys = ["phase"] + (["session"] if "session" in self.limits else [])
        if experiment and f"experiment {experiment}" in self.limits:
            keys.append(f"experiment {experiment}")
        return min((self.limits[k] for k in keys), key=lambda lim: lim.left)


class BudgetGuard:
    """Prices, reserves and records paid runs against the ceilings.

    Args:
        ledger: the ledger (its lock also guards the reservations).
        phase_ceiling_usd: the most all runs in the ledger may cost.
        experiment_ceilings_usd: experiment id -> the most its runs may cost.
        session_ceiling_usd: the most this session may spend (``--max-usd``); None = no session limit.
        session_id: shared by the processes of one session; run ids are ``<session_id>-<hex>``.
        prices: the price book (default: the shipped table, live RunPod prices when a key is set).
        state_dir: where the reservations file lives (default: the lock file's folder).
        clock: wall clock in seconds (reservation expiry); injectable for tests.
        slack_s: seconds a reservation outlives its max_seconds.
        config_source: the file the ceilings come from, for messages.
    """

    def __init__(self, ledger: Ledger, *, phase_ceiling_usd: float | Decimal,
                 experiment_ceilings_usd: dict[str, float | Decimal] | None = None,
                 session_ceiling_usd: float | Decimal | None = None, session_id: str | None = None,
                 prices: PriceBook | None = None, state_dir: Path | str | None = None,
                 clock: Callable[[], float] = time.time, slack_s: float = DEFAULT_SLACK_S,
                 config_source: str = "the workspace file") -> None:
        self.ledger = ledger
        self.phase_ceiling = Decimal(str(phase_ceiling_usd))
        self.experiment_ceilings = {k: Decimal(str(v)) for k, v in (experiment_ceilings_usd or {}).items()}
        self.session_ceiling = None if session_ceiling_usd is None else Decimal(str(session_ceiling_usd))
        self.session_id = session_id or session_id_from_env()
        self.prices = prices or PriceBook.shipped()
        self.state_path = Path(state_dir or ledger.lock_path.parent) / RESERVATIONS_FILE
        self.clock = clock
        self.slack_s = slack_s
        self.config_source = config_source

    @classmethod
    def from_config(cls, cfg: BudgetConfig, **kwargs: Any) -> BudgetGuard:
        ledger = cfg.open_ledger()
        return cls(ledger, phase_ceiling_usd=cfg.phase_ceiling_usd,
                   experiment_ceilings_usd=cfg.experiment_ceilings_usd, state_dir=cfg.state_dir,
                   config_source=str(cfg.source), **kwargs)

    @classmethod
    def from_workspace(cls, ws, **kwargs: Any) -> BudgetGuard:
        """A guard from a workspace's ``[budget]`` section; keyword arguments as for the constructor.

        Raises:
            ConfigError: the workspace has no ``[budget]`` section, or it is malformed.
        """
        cfg = budget_config(ws)
        if cfg is None:
            raise ConfigError(ws.path, "budget", "no [budget] section: set ledger and phase_ceiling_usd")
        return cls.from_config(cfg, **kwargs)

    # -- reading ---------------------------------------------------------------------------------

    def _load_held(self) -> dict[str, dict[str, Any]]:
        if not self.state_path.exists():
            return {}
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            entries = {e["run_id"]: e for e in data["reservations"]}
            for e in entries.values():
                Decimal(e["usd"]), float(e["expires_at"]), e["session"], bool(e["recorded"])  # noqa: B018
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(self.state_path, "", f"reservations file is malformed ({exc}); delete it if no "
                              "paid run is in progress (the ledger keeps what was spent)") from None
        now = self.clock()
        return {k: e for k, e in entries.items() if float(e["expires_at"]) > now}

    def _save_held(self, held: dict[str, dict[str, Any]]) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": 1, "reservations": list(held.values())}, indent=1), encoding="utf-8")
        os.replace(tmp, self.state_path)  # readers never see a half-written file

    def _status(self) -> BudgetStatus:
        rows = self.ledger.read()
        held = self._load_held()
        totals = accounting.totals(rows)

        def held_sum(pred: Callable[[dict[str, Any]], bool]) -> Decimal:
            return sum((Decimal(e["usd"]) for e in held.values() if not e["recorded"] and pred(e)), Decimal(0))

        limits = {"phase": Limit(f"phase ceiling {usd(self.phase_ceiling)} in {self.config_source}",
                                 self.phase_ceiling, totals.total, held_sum(lambda e: True))}
        if self.session_ceiling is not None:
            mine = accounting.totals(rows, run_prefix=f"{self.session_id}-")
            limits["session"] = Limit(f"session ceiling --max-usd {self.session_ceiling:g}", self.session_ceiling,
                                      mine.total, held_sum(lambda e: e["session"] == self.session_id))
        for exp, ceiling in self.experiment_ceilings.items():
            limits[f"experiment {exp}"] = Limit(
                f"experiment {exp} ceiling {usd(ceiling)} in {self.config_source}", ceiling,
                totals.experiment(exp), held_sum(lambda e, exp=exp: e.get("experiment") == exp))
        return BudgetStatus(rows, totals, limits, held)

    def status(self) -> BudgetStatus:
        """Where the budget stands now. Raises LedgerError for a malformed ledger."""
        with self.ledger.locked():
            return self._status()

    def estimate(self, provider: str, gpu_type: str, gpu_count: int, seconds: float,
                 cloud: str = "secure", usd_per_gpu_hour: float | None = None) -> Estimate:
        """The price of running ``gpu_count`` GPUs for ``seconds``. Raises PriceUnknown."""
        price = self._price(provider, gpu_type, cloud, gpu_count, usd_per_gpu_hour)
        billing = self.prices.billing(provider)
        billed = billed_seconds(seconds, billing.granularity_s, billing.minimum_s)
        cost = price.usd_per_gpu_hour * gpu_count * Decimal(str(billed)) / 3600
        return Estimate(price, billing, gpu_count, seconds, billed, cost)

    def _price(self, provider: str, gpu_type: str, cloud: str, gpu_count: int,
               usd_per_gpu_hour: float | None) -> Price:
        if usd_per_gpu_hour is not None:
            if usd_per_gpu_hour < 0:
                raise BudgetRefused(f"usd_per_gpu_hour must be >= 0, got {usd_per_gpu_hour!r}")
            self.prices.billing(provider)
            today = datetime.now(UTC).strftime("%Y-%m-%d")
            return Price(provider, gpu_type, gpu_type, cloud, Decimal(str(usd_per_gpu_hour)),
                         "rate given by the caller", today, today)
        return self.prices.price(provider, gpu_type, cloud, gpu_count)

    # -- reserving -------------------------------------------------------------------------------

    def reserve(self, provider: str, gpu_type: str, gpu_count: int, max_seconds: float, purpose: str, *,
                experiment: str | None = None, cloud: str = "secure", cap_usd: float | None = None,
                usd_per_gpu_hour: float | None = None, run_id: str | None = None) -> Reservation:
        """Reserve the worst case of a paid run before launching it.

        Args:
            provider, gpu_type, gpu_count, cloud: what will be rented (priced by the price book).
            max_seconds: the longest the run may last (its time limit with boot and teardown slack).
            purpose: the test id or what it is for (goes into the ledger).
            experiment: the experiment whose ceiling also applies (e.g. "tp-inference").
            cap_usd: a per-test cap (``@pytest.mark.budget(usd=X)``): the reservation is the smaller of
                the worst case and X, and max_seconds shrinks to what X buys.
            usd_per_gpu_hour: a known rate instead of the price book's (e.g. a configured local rate).
            run_id: the run's id (default ``<session id>-<6 hex>``).

        Returns:
            a held :class:`Reservation`.

        Raises:
            BudgetRefused: the worst case does not fit under some ceiling ("would cost up to $A; $B left
                of $C"), the cap buys no billed time, or the arguments are bad.
            PriceUnknown: no price for this GPU type (a refusal, never a guess).
            LedgerError: the ledger is malformed (nothing is reserved).
        """
        if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or gpu_count < 1:
            raise BudgetRefused(f"gpu_count must be a whole number >= 1, got {gpu_count!r}")
        if not max_seconds > 0:
            raise BudgetRefused(f"max_seconds must be > 0, got {max_seconds!r}")
        est = self.estimate(provider, gpu_type, gpu_count, max_seconds, cloud, usd_per_gpu_hour)
        amount, seconds = est.usd, float(max_seconds)
        what = (f"{purpose}: {gpu_count} x {est.price.gpu} on {provider}"
                + (f" {cloud}" if provider == "runpod" else "")
                + f" at {usd(est.price.usd_per_gpu_hour)}/GPU-hour")
        if cap_usd is not None and amount > Decimal(str(cap_usd)):
            gran, minimum = est.billing.granularity_s, est.billing.minimum_s
            seconds = max_runtime_s(float(cap_usd), float(est.price.usd_per_gpu_hour), gpu_count, gran, minimum)
            if seconds <= 0:
                raise BudgetRefused(f"{what}: the test's cap {usd(cap_usd)} buys no billed time (minimum "
                                    f"{minimum} s)", would_cost=float(amount), left=float(cap_usd),
                                    ceiling=float(cap_usd), ceiling_name="the test's @pytest.mark.budget cap")
            amount = self.estimate(provider, gpu_type, gpu_count, seconds, cloud, usd_per_gpu_hour).usd
        run_id = run_id or f"{self.session_id}-{secrets.token_hex(3)}"
        amount = amount.quantize(Decimal("0.0001"), rounding=ROUND_CEILING)
        with self.ledger.locked():
            status = self._status()
            if run_id in status.held or any(r.run_id == run_id for r in status.rows):
                raise BudgetRefused(f"run id {run_id!r} is already in use")
            limit = status.binding(experiment)
            if amount > limit.left + EPS:
                raise BudgetRefused(
                    f"{what} for up to {seconds:g} s would cost up to {usd(amount)}; "
                    f"{usd(max(limit.left, Decimal(0)))} left of {usd(limit.ceiling)} ({limit.name}; "
                    f"{usd(limit.spent)} in the ledger, {usd(limit.held)} reserved by runs in progress)",
                    would_cost=float(amount), left=float(limit.left), ceiling=float(limit.ceiling),
                    ceiling_name=limit.name)
            entry = {"run_id": run_id, "session": self.session_id, "experiment": experiment, "usd": str(amount),
                     "expires_at": self.clock() + seconds + self.slack_s, "recorded": False, "pid": os.getpid(),
                     "purpose": purpose}
            held = dict(status.held)
            held[run_id] = entry
            self._save_held(held)
        return Reservation(self, run_id, est.price, est.billing, gpu_count, seconds, amount, purpose, experiment,
                           limit)

    def _update_held(self, run_id: str, recorded: bool | None = None, drop: bool = False) -> None:
        held = self._load_held()
        if run_id in held:
            if drop:
                del held[run_id]
            elif recorded is not None:
                held[run_id]["recorded"] = recorded
            self._save_held(held)

    # -- settling by hand --------------------------------------------------------------------------

    def settle_open_run(self, run_id: str, billed_s: int, now: datetime | None = None) -> LedgerRow:
        """Append the ``settled`` row of a run that has only its ``open`` row (its process died, the
        pod was ended by its dead-man switch or a sweep), from the billed seconds the provider reports.

        The row copies the open row's provider, resource, rate_per_hour, experiment, purpose and pod id;
        its cost is rate_per_hour x billed_s / 3600 (``ledger.make_row``). It is appended through
        :meth:`Ledger.append` (locked, whole ledger validated first, nothing rewritten), and any
        reservation still held for the run is dropped.

        Args:
            run_id: the run's id in the ledger.
            billed_s: seconds the provider billed for the pod, whole, 0 <= billed_s <= the open row's.

        Returns:
            the settled row, with its line number.

        Raises:
            SettleRefused: unknown run id, run already settled, seconds negative or above the open
                row's reserved seconds (nothing written).
            LedgerError: the ledger is malformed (nothing written).
        """
        with self.ledger.locked():
            rows = self.ledger.read()
            mine = {r.status: r for r in rows if r.run_id == run_id}
            where = f"in {self.ledger.path}"
            if "settled" in mine:
                done = mine["settled"]
                raise SettleRefused(f"run {run_id!r} is already settled {where} (line {done.line}: "
                                    f"{done.billed_s} s, {usd(done.recomputed_cost)}); nothing written")
            if "open" not in mine:
                unsettled = accounting.totals(rows).unsettled
                hint = f"unsettled runs: {', '.join(unsettled)}" if unsettled else "it has no unsettled runs"
                raise SettleRefused(f"unknown run id {run_id!r}: no open row {where} ({hint})")
            opened = mine["open"]
            if billed_s < 0:
                raise SettleRefused(f"--seconds {billed_s} is negative: give the billed seconds of pod "
                                    f"{opened.resource_id} (0 to {opened.billed_s}); nothing written")
            if billed_s > opened.billed_s:
                raise SettleRefused(
                    f"--seconds {billed_s} exceeds the {opened.billed_s} s reserved by the open row of run {run_id!r} "
                    f"(line {opened.line}, {usd(opened.recomputed_cost)}); check pod {opened.resource_id}'s "
                    "billed seconds on the provider's billing page; nothing written")
            row = make_row(run_id=run_id, status="settled", provider=opened.provider, gpu_type=opened.gpu_type,
                           gpu_count=opened.gpu_count, billed_s=billed_s, rate_per_hour=opened.rate_per_hour,
                           experiment=opened.experiment, purpose=opened.purpose, resource_id=opened.resource_id,
                           now=now)
            held = self._load_held()  # a malformed reservations file fails here, before anything is written
            (written,) = self.ledger.append(row)
            if held.pop(run_id, None) is not None:
                self._save_held(held)
        return written


class Reservation:
    """A held reservation (from :meth:`BudgetGuard.reserve`). See ``pytest_distcheck.budget_guard``.

    Attributes:
        run_id: unique per reservation; name the pod ``distcheck-<run_id>-...``.
        usd: USD reserved (Decimal); the watchdog cuts at it (or at the open row's worst case).
        max_seconds: the longest the run may last within ``usd`` at the reserved price.
        price, billing: the price and billing rule used; ``gpu_count``, ``purpose``, ``experiment``.
        limit: the ceiling that was binding when it was reserved.
        pod_id, usd_per_hour, open_row, settled_row: set by :meth:`record_pod` and :meth:`settle`.
    """

    def __init__(self, guard: BudgetGuard, run_id: str, price: Price, billing: Billing, gpu_count: int,
                 max_seconds: float, amount: Decimal, purpose: str, experiment: str | None, limit: Limit) -> None:
        self.guard = guard
        self.run_id = run_id
        self.price = price
        self.billing = billing
        self.gpu_count = gpu_count
        self.max_seconds = max_seconds
        self.usd = amount
        self.purpose = purpose
        self.experiment = experiment
        self.limit = limit
        self.pod_id: str | None = None
        self.usd_per_hour: Decimal = price.usd_per_gpu_hour * gpu_count
        self.started_at: float | None = None  # time.monotonic() of the create call
        self.open_row: LedgerRow | None = None
        self.settled_row: LedgerRow | None = None
        self.done = False

    @property
    def provider(self) -> str:
        return self.price.provider

    @property
    def gpu_type(self) -> str:
        return self.price.gpu

    @property
    def limit_usd(self) -> Decimal:
        """The cost at which the run is cut: the open row's worst case once recorded, else the reservation."""
        return self.open_row.cost if self.open_row is not None else self.usd

    def describe_limit(self) -> str:
        return f"its reservation {usd(self.limit_usd)} (run {self.run_id}; {self.limit.name})"

    def _row(self, status: str, seconds: float) -> LedgerRow:
        return make_row(run_id=self.run_id, status=status, provider=self.provider, gpu_type=self.gpu_type,
                        gpu_count=self.gpu_count, billed_s=int(seconds), rate_per_hour=self.usd_per_hour,
                        experiment=self.experiment, purpose=self.purpose, resource_id=self.pod_id or "-")

    def record_pod(self, pod_id: str, usd_per_hour: float | None = None, started_at: float | None = None) -> LedgerRow:
        """Append the run's ``open`` row now that the resource exists (before waiting on it).

        Args:
            pod_id: the provider's id of the resource.
            usd_per_hour: its rate for the whole resource (RunPod ``costPerHr``); default price x GPUs.
            started_at: ``time.monotonic()`` of the create call (billing starts there); default now.

        The open row's billed_s is the most the run may last within ``usd`` at this rate (shorter when
        the rate is above the reserved price), its cost that worst case. Returns the row.

        Raises:
            DistcheckError: the reservation is settled or already has another pod.
            LedgerError: the ledger is malformed (the reservation stays held; settle or release it).
        """
        if self.done:
            raise DistcheckError(f"reservation {self.run_id} is already settled")
        if self.pod_id is not None and self.pod_id != pod_id:
            raise DistcheckError(f"reservation {self.run_id} already has pod {self.pod_id}, not {pod_id}")
        if self.open_row is not None:
            return self.open_row
        self.pod_id = str(pod_id)
        if usd_per_hour is not None:
            if usd_per_hour < 0:
                raise DistcheckError(f"usd_per_hour must be >= 0, got {usd_per_hour!r}")
            self.usd_per_hour = Decimal(str(usd_per_hour))
        self.started_at = time.monotonic() if started_at is None else started_at
        gran, minimum = self.billing.granularity_s, self.billing.minimum_s
        fits = max_runtime_s(float(self.usd), float(self.usd_per_hour), 1, gran, minimum)
        worst = billed_seconds(min(self.max_seconds, fits), gran, minimum)
        self.max_seconds = min(self.max_seconds, worst)
        row = self._row("open", worst)
        with self.guard.ledger.locked():
            (self.open_row,) = self.guard.ledger.append(row)
            self.guard._update_held(self.run_id, recorded=True)
        return self.open_row

    def watchdog(self, terminate: Callable[[], object], *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep, interval_s: float = 0.25,
                 teardown_s: float = 0.0, install_handlers: bool = True):
        """A :class:`~pytest_distcheck.budget.watchdog.Watchdog` for this run, to use as a context manager:
        it accrues usd_per_hour x elapsed since ``started_at`` and calls ``terminate()`` at ``limit_usd``."""
        from pytest_distcheck.budget.watchdog import Watchdog

        start = self.started_at if self.started_at is not None else clock()
        return Watchdog(limit_usd=float(self.limit_usd), usd_per_hour=float(self.usd_per_hour),
                        terminate=terminate, describe=self.describe_limit(), clock=clock, sleep=sleep,
                        start=start, interval_s=interval_s, teardown_s=teardown_s,
                        granularity_s=self.billing.granularity_s, minimum_s=self.billing.minimum_s,
                        install_handlers=install_handlers)

    def settle(self, actual_seconds: float | None = None) -> LedgerRow | None:
        """Settle to the actual cost and release the reservation. Safe to call twice and on failure.

        Args:
            actual_seconds: from the create call to confirmed termination; default: since ``started_at``.

        Returns:
            the ``settled`` row, or None when no pod was recorded (then the reservation is only released).

        Raises:
            LedgerError: the ledger became malformed; the reservation is released and the open row keeps
                counting its worst case.
        """
        if self.done:
            return self.settled_row
        with self.guard.ledger.locked():
            try:
                if self.open_row is not None:
                    if actual_seconds is None:
                        actual_seconds = time.monotonic() - (self.started_at or time.monotonic())
                    billed = billed_seconds(max(float(actual_seconds), 0.0), self.billing.granularity_s,
                                            self.billing.minimum_s)
                    (self.settled_row,) = self.guard.ledger.append(self._row("settled", math.ceil(billed)))
            finally:
                self.done = True
                self.guard._update_held(self.run_id, drop=True)
        return self.settled_row

    def release(self) -> None:
        """Give the reservation back without a charge; only valid before a pod is recorded (after it,
        use :meth:`settle`)."""
        if self.open_row is not None and not self.done:
            raise DistcheckError(f"reservation {self.run_id} has pod {self.pod_id}: settle it with its seconds")
        self.settle()

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        # Without a pod: nothing was billed, give the money back. With one: its open row counts the
        # worst case until the pods code settles with the real seconds (the held entry counts $0 now).
        if not self.done and self.open_row is None:
            self.settle()
