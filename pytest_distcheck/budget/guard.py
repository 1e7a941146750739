"""Ceilings and reservations: a paid launch is priced, checked against what is left and written to the
ledger as an ``open`` row, read back, BEFORE anything is created, under one lock shared by every process
that uses the same ledger (xdist workers, other pytest runs).

Left (USD) = the least of the session, phase and experiment ceilings minus what each has spent, a run
not yet settled counting its worst case. An experiment must be declared in ``[budget]``. The runs in
progress are noted, with their process, in ``<root>/.distcheck/budget-reservations.json``. The contract
for code that rents machines and the formulas: docs/design/budget.md.
"""

from __future__ import annotations

import difflib
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
from pytest_distcheck.budget.config import DID_YOU_MEAN, BudgetConfig, budget_config
from pytest_distcheck.budget.errors import BudgetRefused, SettleRefused, usd
from pytest_distcheck.budget.ledger import LOCK_WAIT_AFTER_CREATE_S, Ledger, LedgerRow, make_row
from pytest_distcheck.budget.pricing import Billing, Price, PriceBook
from pytest_distcheck.calc.cost import billed_seconds, max_runtime_s
from pytest_distcheck.errors import ConfigError, DistcheckError
from pytest_distcheck.i18n import N_, _

RESERVATIONS_FILE = "budget-reservations.json"
EPS = Decimal("0.000001")
UNDECLARED_EXPERIMENT = N_("experiment {experiment!r} is not declared in [budget] of {source} (declared: {known})"
                           "{hint} Declare it under [budget.experiment_ceilings_usd] with a ceiling, or in "
                           "budget.uncapped_experiments; nothing was reserved or created")
PHASE_CEILING = N_("phase ceiling {usd} in {source}")
SESSION_CEILING = N_("session ceiling --max-usd {usd:g}")
EXPERIMENT_CEILING = N_("experiment {experiment} ceiling {usd} in {source}")
NO_LIVE_PRICE = N_("{purpose}: no live {provider} price for {count} x {gpu} ({cloud}): {warning}; the shipped "
                   "table's {rate}/GPU-hour may be below what is billed, so nothing was reserved or created")
LAUNCH = N_("{purpose}: {count} x {gpu} on {provider}{cloud} at {rate}/GPU-hour")
CAP_BUYS_NOTHING = N_("{launch}: the test's cap {cap} buys no billed time (minimum {minimum} s)")
REFUSED = N_("{launch} for up to {seconds:g} s would cost up to {cost}; {left} left of {ceiling} ({limit}; {spent} in "
             "the ledger, runs in progress at their worst case)")
ALREADY_SETTLED = N_("run {run!r} is already settled in {ledger} (line {line}: {seconds} s, {cost}); nothing written")
UNKNOWN_RUN = N_("unknown run id {run!r}: no open row in {ledger} ({hint})")
UNSETTLED_RUNS = N_("unsettled runs: {runs}")
NO_UNSETTLED_RUNS = N_("it has no unsettled runs")
NEGATIVE_SECONDS = N_("--seconds {seconds} is negative: give the billed seconds of pod {pod}; nothing written")
NO_BUDGET_SECTION = N_("no [budget] section: set ledger and phase_ceiling_usd")
RESERVATIONS_MALFORMED = N_("reservations file is malformed ({error}); delete it if no paid run is in progress (the "
                            "ledger keeps what was spent)")
BAD_RATE = N_("usd_per_gpu_hour must be a finite number >= 0, got {value!r}")
BAD_GPU_COUNT = N_("gpu_count must be a whole number >= 1, got {value!r}")
BAD_MAX_SECONDS = N_("max_seconds must be a finite number > 0, got {value!r}")
NOTHING_RESERVED = N_("nothing was reserved, created or billed")
RUN_ID_IN_USE = N_("run id {run!r} is already in use")
NO_OPEN_ROW = N_("unknown run id {run!r}: no open row in {ledger}")
ALREADY_HAS_POD = N_("run {run!r} already names pod {pod} or is settled (line {line}); nothing written")
RESERVATION_SETTLED = N_("reservation {run} is already settled")
RESERVATION_OTHER_POD = N_("reservation {run} already has pod {pod}, not {other}")
ITS_RESERVATION = N_("its reservation {usd} (run {run}; {limit})")
RESERVATION_HAS_POD = N_("reservation {run} has pod {pod}: settle it with its seconds")


def session_id_from_env() -> str:
    """The id all processes of one pytest run share: xdist's test-run uid (its first 8 hex digits),
    else a fresh random one."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    uid = "".join(ch for ch in uid.lower() if ch in "0123456789abcdef")
    return uid[:8] if len(uid) >= 8 else secrets.token_hex(4)


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (psutil's create_time, seconds), or None when there is none."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, ValueError):
        return None


def process_alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` still runs AND is the same process (same start time): a pid reused by
    another program after a crash does not keep a run "in progress"."""
    now = process_start(int(pid))
    return now is not None and (started is None or abs(now - float(started)) < 1.0)


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
    """One ceiling and what is left under it (USD). ``spent`` counts unsettled runs at their worst case."""

    name: str
    ceiling: Decimal
    spent: Decimal

    @property
    def left(self) -> Decimal:
        return self.ceiling - self.spent


@dataclass(frozen=True)
class BudgetStatus:
    """Where the budget stands (USD, Decimals; see the module docstring for the formula).

    Attributes:
        totals: the ledger's totals (:mod:`accounting`); ``rows``: the parsed rows.
        limits: the phase ceiling, the session ceiling when set, and each experiment ceiling.
        in_progress: runs whose process still runs (run id -> its entry in the reservations file).
        abandoned: unsettled runs whose process is gone (settle or reconcile them).
    """

    rows: list[LedgerRow]
    totals: accounting.Totals
    limits: dict[str, Limit]
    in_progress: dict[str, dict[str, Any]]
    abandoned: tuple[str, ...] = ()

    def binding(self, experiment: str | None = None) -> Limit:
        """The limit with the least left that applies to a run of this experiment."""
        keys = ["phase"] + (["session"] if "session" in self.limits else [])
        if experiment and f"experiment {experiment}" in self.limits:
            keys.append(f"experiment {experiment}")
        return min((self.limits[k] for k in keys), key=lambda lim: lim.left)


class BudgetGuard:
    """Prices, reserves and records paid runs against the ceilings.

    Args:
        ledger: the ledger (its lock also guards the reservations file).
        phase_ceiling_usd: the most all runs in the ledger may cost.
        experiment_ceilings_usd: experiment id -> the most its runs may cost.
        uncapped_experiments: experiment ids declared without a ceiling of their own.
        session_ceiling_usd: the most this session may spend (``--max-usd``); None = no session limit.
        session_id: shared by the processes of one session; run ids are ``<session_id>-<hex>``.
        prices: the price book (default: the shipped table, live RunPod prices when a key is set).
        state_dir: where the reservations file lives (default: the lock file's folder).
        config_source: the file the ceilings come from, for messages.
    """

    def __init__(self, ledger: Ledger, *, phase_ceiling_usd: float | Decimal,
                 experiment_ceilings_usd: dict[str, float | Decimal] | None = None,
                 uncapped_experiments: tuple[str, ...] | list[str] = (),
                 session_ceiling_usd: float | Decimal | None = None, session_id: str | None = None,
                 prices: PriceBook | None = None, state_dir: Path | str | None = None,
                 config_source: str = "the workspace file") -> None:
        self.ledger = ledger
        self.phase_ceiling = Decimal(str(phase_ceiling_usd))
        self.experiment_ceilings = {k: Decimal(str(v)) for k, v in (experiment_ceilings_usd or {}).items()}
        self.uncapped_experiments = tuple(uncapped_experiments)
        self.session_ceiling = None if session_ceiling_usd is None else Decimal(str(session_ceiling_usd))
        self.session_id = session_id or session_id_from_env()
        self.prices = prices or PriceBook.shipped()
        self.state_path = Path(state_dir or ledger.lock_path.parent) / RESERVATIONS_FILE
        self.config_source = config_source

    @classmethod
    def from_config(cls, cfg: BudgetConfig, **kwargs: Any) -> BudgetGuard:
        ledger = cfg.open_ledger()
        return cls(ledger, phase_ceiling_usd=cfg.phase_ceiling_usd,
                   experiment_ceilings_usd=cfg.experiment_ceilings_usd,
                   uncapped_experiments=cfg.uncapped_experiments, state_dir=cfg.state_dir,
                   config_source=str(cfg.source), **kwargs)

    @classmethod
    def from_workspace(cls, ws, **kwargs: Any) -> BudgetGuard:
        """A guard from a workspace's ``[budget]`` section; keyword arguments as for the constructor.

        Raises:
            ConfigError: the workspace has no ``[budget]`` section, or it is malformed.
        """
        cfg = budget_config(ws)
        if cfg is None:
            raise ConfigError(ws.path, "budget", _(NO_BUDGET_SECTION))
        return cls.from_config(cfg, **kwargs)

    @property
    def experiments(self) -> tuple[str, ...]:
        """Every declared experiment id (with a ceiling or uncapped)."""
        return (*self.experiment_ceilings, *self.uncapped_experiments)

    def check_experiment(self, experiment: str | None) -> None:
        """Refuse an experiment id the workspace does not declare (BudgetRefused, naming the close ones)."""
        if experiment is None or experiment in self.experiments:
            return
        close = difflib.get_close_matches(experiment, self.experiments, n=1, cutoff=0.6)
        hint = _(DID_YOU_MEAN).format(name=close[0]) if close else ""
        known = ", ".join(self.experiments) or "none"
        raise BudgetRefused(_(UNDECLARED_EXPERIMENT).format(experiment=experiment, source=self.config_source,
                                                            known=known, hint=hint))

    # -- reading ---------------------------------------------------------------------------------

    def _load_held(self) -> dict[str, dict[str, Any]]:
        if not self.state_path.exists():
            return {}
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            entries = {e["run_id"]: e for e in data["reservations"]}
            for e in entries.values():
                int(e["pid"]), e["session"]  # noqa: B018 - shape check
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(self.state_path, "", _(RESERVATIONS_MALFORMED).format(error=exc)) from None
        return entries

    def _save_held(self, held: dict[str, dict[str, Any]]) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": 2, "reservations": list(held.values())}, indent=1), encoding="utf-8")
        os.replace(tmp, self.state_path)  # readers never see a half-written file

    def _live_held(self) -> dict[str, dict[str, Any]]:
        """Entries whose process still runs; entries of dead processes are dropped from the file now."""
        held = self._load_held()
        live = {k: e for k, e in held.items() if process_alive(e["pid"], e.get("pid_start"))}
        if len(live) != len(held):
            self._save_held(live)
        return live

    def _status(self) -> BudgetStatus:
        rows = self.ledger.read()
        live = self._live_held()
        totals = accounting.totals(rows)
        limits = {"phase": Limit(_(PHASE_CEILING).format(usd=usd(self.phase_ceiling), source=self.config_source),
                                 self.phase_ceiling, totals.total)}
        if self.session_ceiling is not None:
            mine = accounting.totals(rows, run_prefix=f"{self.session_id}-")
            limits["session"] = Limit(_(SESSION_CEILING).format(usd=self.session_ceiling), self.session_ceiling,
                                      mine.total)
        for exp, ceiling in self.experiment_ceilings.items():
            limits[f"experiment {exp}"] = Limit(
                _(EXPERIMENT_CEILING).format(experiment=exp, usd=usd(ceiling), source=self.config_source), ceiling,
                totals.experiment(exp))
        abandoned = tuple(r for r in totals.unsettled if r not in live)
        return BudgetStatus(rows, totals, limits, {k: e for k, e in live.items() if k in totals.unsettled},
                            abandoned)

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
            if not usd_per_gpu_hour >= 0 or math.isinf(usd_per_gpu_hour):
                raise BudgetRefused(_(BAD_RATE).format(value=usd_per_gpu_hour))
            self.prices.billing(provider)
            today = datetime.now(UTC).strftime("%Y-%m-%d")
            return Price(provider, gpu_type, gpu_type, cloud, Decimal(str(usd_per_gpu_hour)),
                         "rate given by the caller", today, today)
        return self.prices.price(provider, gpu_type, cloud, gpu_count)

    # -- reserving -------------------------------------------------------------------------------

    def reserve(self, provider: str, gpu_type: str, gpu_count: int, max_seconds: float, purpose: str, *,
                experiment: str | None = None, cloud: str = "secure", cap_usd: float | None = None,
                usd_per_gpu_hour: float | None = None, run_id: str | None = None) -> Reservation:
        """Reserve the worst case of a paid run before launching it: its ``open`` row is appended to
        the ledger and read back before this returns.

        Args:
            provider, gpu_type, gpu_count, cloud: what will be rented (priced by the price book).
            max_seconds: the longest the run may last (its time limit with boot and teardown slack).
            purpose: the test id or what it is for (goes into the ledger).
            experiment: the experiment whose ceiling also applies (e.g. "tp-inference"); must be declared.
            cap_usd: a per-test cap (``@pytest.mark.budget(usd=X)``): the reservation is the smaller of
                the worst case and X, and max_seconds shrinks to what X buys.
            usd_per_gpu_hour: a known rate instead of the price book's (e.g. a configured local rate).
            run_id: the run's id (default ``<session id>-<6 hex>``).

        Returns:
            a :class:`Reservation` whose ``open_row`` is in the ledger.

        Raises:
            BudgetRefused: an undeclared experiment, the worst case does not fit under some ceiling
                ("would cost up to $A; $B left of $C"), the cap buys no billed time, or bad arguments.
            PriceUnknown: no price for this GPU type (a refusal, never a guess).
            LedgerError: the ledger is malformed (nothing is reserved).
        """
        if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or gpu_count < 1:
            raise BudgetRefused(_(BAD_GPU_COUNT).format(value=gpu_count))
        if not max_seconds > 0 or math.isinf(max_seconds):
            raise BudgetRefused(_(BAD_MAX_SECONDS).format(value=max_seconds))
        self.check_experiment(experiment)
        est = self.estimate(provider, gpu_type, gpu_count, max_seconds, cloud, usd_per_gpu_hour)
        if est.price.warning:  # a paid pod is priced at the provider's live rate, never a table's guess
            raise BudgetRefused(_(NO_LIVE_PRICE).format(purpose=purpose, provider=provider, count=gpu_count,
                                                        gpu=gpu_type, cloud=cloud, warning=est.price.warning,
                                                        rate=usd(est.price.usd_per_gpu_hour)))
        amount, seconds = est.usd, float(max_seconds)
        what = _(LAUNCH).format(purpose=purpose, count=gpu_count, gpu=est.price.gpu, provider=provider,
                                cloud=f" {cloud}" if provider == "runpod" else "", rate=usd(est.price.usd_per_gpu_hour))
        if cap_usd is not None and amount > Decimal(str(cap_usd)):
            gran, minimum = est.billing.granularity_s, est.billing.minimum_s
            seconds = max_runtime_s(float(cap_usd), float(est.price.usd_per_gpu_hour), gpu_count, gran, minimum)
            if seconds <= 0:
                raise BudgetRefused(_(CAP_BUYS_NOTHING).format(launch=what, cap=usd(cap_usd), minimum=minimum),
                                    would_cost=float(amount), left=float(cap_usd),
                                    ceiling=float(cap_usd), ceiling_name="the test's @pytest.mark.budget cap")
            amount = self.estimate(provider, gpu_type, gpu_count, seconds, cloud, usd_per_gpu_hour).usd
        run_id = run_id or f"{self.session_id}-{secrets.token_hex(3)}"
        amount = amount.quantize(Decimal("0.0001"), rounding=ROUND_CEILING)
        billed = int(math.ceil(billed_seconds(seconds, est.billing.granularity_s, est.billing.minimum_s)))
        rate = est.price.usd_per_gpu_hour * gpu_count
        with self.ledger.locked(kept=_(NOTHING_RESERVED)):
            status = self._status()
            if any(r.run_id == run_id for r in status.rows):
                raise BudgetRefused(_(RUN_ID_IN_USE).format(run=run_id))
            limit = status.binding(experiment)
            if amount > limit.left + EPS:
                raise BudgetRefused(
                    _(REFUSED).format(launch=what, seconds=seconds, cost=usd(amount),
                                      left=usd(max(limit.left, Decimal(0))), ceiling=usd(limit.ceiling),
                                      limit=limit.name, spent=usd(limit.spent)),
                    would_cost=float(amount), left=float(limit.left), ceiling=float(limit.ceiling),
                    ceiling_name=limit.name)
            row = make_row(run_id=run_id, status="open", provider=provider, gpu_type=est.price.gpu,
                           gpu_count=gpu_count, billed_s=billed, rate_per_hour=rate, experiment=experiment,
                           purpose=purpose, resource_id="-")
            (opened,) = self.ledger.append(row)  # written, fsynced and read back before anything is created
            held = self._load_held()
            held[run_id] = {"run_id": run_id, "session": self.session_id, "experiment": experiment,
                            "usd": str(amount), "pid": os.getpid(), "pid_start": process_start(os.getpid()),
                            "purpose": purpose}
            self._save_held(held)
        res = Reservation(self, run_id, est.price, est.billing, gpu_count, seconds, amount, purpose, experiment,
                          limit)
        res.open_row = opened
        return res

    def _drop_held(self, run_id: str) -> None:
        held = self._load_held()
        if held.pop(run_id, None) is not None:
            self._save_held(held)

    # -- settling ----------------------------------------------------------------------------------

    def settle_rows(self, run_id: str, billed_s: int, now: datetime | None = None,
                    wait_s: float | None = None) -> list[LedgerRow]:
        """Append the ``settled`` row of an unsettled run and, when ``billed_s`` is above its reserved
        worst case, an ``overrun`` row with the seconds beyond it. Never refuses the true seconds.

        The rows copy the run's pod row (its ``started`` row, else its ``open`` row): provider, resource,
        rate, experiment, purpose and pod id; cost = rate x seconds / 3600. Appended through
        :meth:`Ledger.append` (locked, whole ledger validated first, nothing rewritten); the run leaves
        the reservations file.

        Args:
            run_id: the run's id in the ledger.
            billed_s: every second the provider billed for the pod, whole, >= 0.
            wait_s: how long to wait for the ledger lock (default ``ledger.LOCK_WAIT_S``).

        Returns:
            the rows written (settled, then overrun if any), with their line numbers.

        Raises:
            SettleRefused: unknown run id, run already settled, negative seconds (nothing written).
            LedgerError: the ledger is malformed (nothing written).
        """
        with self.ledger.locked(wait_s):
            rows = self.ledger.read()
            mine = [r for r in rows if r.run_id == run_id]
            done = next((r for r in mine if r.status == "settled"), None)
            if done is not None:
                raise SettleRefused(_(ALREADY_SETTLED).format(run=run_id, ledger=self.ledger.path, line=done.line,
                                                              seconds=done.billed_s, cost=usd(done.recomputed_cost)))
            if not mine:
                unsettled = accounting.totals(rows).unsettled
                hint = _(UNSETTLED_RUNS).format(runs=", ".join(unsettled)) if unsettled else _(NO_UNSETTLED_RUNS)
                raise SettleRefused(_(UNKNOWN_RUN).format(run=run_id, ledger=self.ledger.path, hint=hint))
            pod_row = accounting.Charge(tuple(mine)).pod_row
            if billed_s < 0:
                raise SettleRefused(_(NEGATIVE_SECONDS).format(seconds=billed_s, pod=pod_row.resource_id))
            base = dict(run_id=run_id, provider=pod_row.provider, gpu_type=pod_row.gpu_type,
                        gpu_count=pod_row.gpu_count, rate_per_hour=pod_row.rate_per_hour,
                        experiment=pod_row.experiment, purpose=pod_row.purpose, resource_id=pod_row.resource_id,
                        now=now)
            new = [make_row(status="settled", billed_s=min(billed_s, pod_row.billed_s), **base)]
            if billed_s > pod_row.billed_s:
                new.append(make_row(status="overrun", billed_s=billed_s - pod_row.billed_s, **base))
            self._load_held()  # a malformed reservations file fails here, before anything is written
            written = self.ledger.append(*new)
            self._drop_held(run_id)
        return written

    def reconcile(self, fetch, provider: str = "runpod") -> list:
        """Ask the provider what it billed for the ledger's pods (``fetch``: pod ids -> {pod id: (USD,
        seconds)}, e.g. :func:`pytest_distcheck.pods.runpod_api.pod_bills`) and append a ``reconciled``
        row for each bill that is new (:mod:`pytest_distcheck.budget.reconcile`). The bills are fetched
        outside the ledger lock; the rows are planned and appended under it.

        Returns:
            the :class:`~pytest_distcheck.budget.reconcile.Finding` of every run with a pod.

        Raises:
            whatever ``fetch`` raises (nothing is written then); LedgerError for a malformed ledger.
        """
        from pytest_distcheck.budget.reconcile import Finding, plan

        pods = sorted({ch.pod_row.resource_id for ch in accounting.charges(self.ledger.read())
                       if ch.pod_row.provider == provider and ch.pod_row.has_pod})
        bills = fetch(pods) if pods else {}
        with self.ledger.locked():
            planned = plan(self.ledger.read(), bills, provider)
            new = [row for _, row in planned if row is not None]
            written = {(r.run_id, r.billed_s, r.rate_per_hour): r for r in (self.ledger.append(*new) if new else [])}
        out = []
        for finding, row in planned:
            if row is not None:
                finding = Finding(finding.run_id, finding.pod_id, finding.state, finding.kit_usd, finding.provider_usd,
                                  written[(row.run_id, row.billed_s, row.rate_per_hour)])
            out.append(finding)
        return out

    def _run_rows(self, run_id: str) -> list[LedgerRow]:
        mine = [r for r in self.ledger.read() if r.run_id == run_id]
        if not mine:
            raise SettleRefused(_(NO_OPEN_ROW).format(run=run_id, ledger=self.ledger.path))
        return mine

    def record_event(self, run_id: str, status: str) -> LedgerRow:
        """Append an event row (``rate-unknown``, ``terminate-failed``) for a run's pod: 0 s at the run's
        rate (at 0 for rate-unknown: what the provider reported). Raises SettleRefused for an unknown run,
        LedgerError as appending does."""
        with self.ledger.locked(LOCK_WAIT_AFTER_CREATE_S):
            pod = accounting.Charge(tuple(self._run_rows(run_id))).pod_row
            row = make_row(run_id=run_id, status=status, provider=pod.provider, gpu_type=pod.gpu_type,
                           gpu_count=pod.gpu_count, billed_s=0,
                           rate_per_hour=0 if status == "rate-unknown" else pod.rate_per_hour,
                           experiment=pod.experiment, purpose=pod.purpose, resource_id=pod.resource_id)
            return self.ledger.append(row, wait_s=LOCK_WAIT_AFTER_CREATE_S)[0]

    def adopt_pod(self, run_id: str, pod_id: str, usd_per_hour: float | None = None) -> list[LedgerRow]:
        """Append the ``started`` row of a run whose pod exists but was never recorded (its process died
        between creating it and writing the row; the pod was found by its name), and a ``rate-unknown``
        event when the provider reports no rate. The worst case stays that of the open row.

        Raises:
            SettleRefused: unknown run, or the run already names a pod or is settled (nothing written).
        """
        with self.ledger.locked(LOCK_WAIT_AFTER_CREATE_S):
            mine = self._run_rows(run_id)
            charge = accounting.Charge(tuple(mine))
            opened = mine[0]
            if charge.pod_row.has_pod or charge.settled:
                raise SettleRefused(_(ALREADY_HAS_POD).format(run=run_id, pod=charge.pod_row.resource_id,
                                                              line=charge.row.line))
            reported = _reported(usd_per_hour)
            rate = max(opened.rate_per_hour, reported or Decimal(0))
            billing = self.prices.billing(opened.provider)
            fits = max_runtime_s(float(opened.recomputed_cost), float(rate), 1, billing.granularity_s,
                                 billing.minimum_s)
            worst = int(billed_seconds(min(float(opened.billed_s), fits), billing.granularity_s, billing.minimum_s))
            base = dict(run_id=run_id, provider=opened.provider, gpu_type=opened.gpu_type,
                        gpu_count=opened.gpu_count, experiment=opened.experiment, purpose=opened.purpose,
                        resource_id=str(pod_id))
            rows = [make_row(status="started", billed_s=worst, rate_per_hour=rate, **base)]
            if reported is None and rate > 0:
                rows.append(make_row(status="rate-unknown", billed_s=0, rate_per_hour=0, **base))
            return self.ledger.append(*rows, wait_s=LOCK_WAIT_AFTER_CREATE_S)

    def settle_open_run(self, run_id: str, billed_s: int, now: datetime | None = None) -> LedgerRow:
        """:meth:`settle_rows` for a run left open by a crash; returns its settled row (an overrun row,
        if any, follows it)."""
        return self.settle_rows(run_id, billed_s, now)[0]


def _reported(usd_per_hour: float | Decimal | None) -> Decimal | None:
    """A provider's rate as a Decimal, or None when it reported none, 0, or nonsense (unknown)."""
    if usd_per_hour is None:
        return None
    try:
        value = Decimal(str(usd_per_hour))
    except ArithmeticError:
        return None
    return value if value.is_finite() and value > 0 else None


class Reservation:
    """A paid run from :meth:`BudgetGuard.reserve` on. Contract: docs/design/budget.md.

    Attributes:
        run_id: unique per reservation; name the pod ``distcheck-<run_id>-...``.
        usd: USD reserved (Decimal); the watchdog cuts at it (or at the started row's worst case).
        max_seconds: the longest the run may last within ``usd`` at the metered rate.
        price, billing: the price and billing rule used; ``gpu_count``, ``purpose``, ``experiment``.
        limit: the ceiling that was binding when it was reserved.
        open_row: its ``open`` row (written by ``reserve``); started_row, settled_row, overrun_row: set
            by :meth:`record_pod` and :meth:`settle`.
        usd_per_hour: the rate the run is metered at (whole resource).
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
        self.reported_usd_per_hour: Decimal | None = None  # None: the provider reported no rate (or 0)
        self.rate_unknown = False
        self.started_at: float | None = None  # time.monotonic() of the create call
        self.open_row: LedgerRow | None = None
        self.started_row: LedgerRow | None = None
        self.settled_row: LedgerRow | None = None
        self.overrun_row: LedgerRow | None = None
        self.done = False

    @property
    def provider(self) -> str:
        return self.price.provider

    @property
    def gpu_type(self) -> str:
        return self.price.gpu

    @property
    def limit_usd(self) -> Decimal:
        """The cost at which the run is cut: the started row's worst case once recorded, else the reservation."""
        return self.started_row.cost if self.started_row is not None else self.usd

    def describe_limit(self) -> str:
        return _(ITS_RESERVATION).format(usd=usd(self.limit_usd), run=self.run_id, limit=self.limit.name)

    def record_pod(self, pod_id: str, usd_per_hour: float | None = None, started_at: float | None = None) -> LedgerRow:
        """Append the run's ``started`` row now that the pod exists (before waiting on it).

        Args:
            pod_id: the provider's id of the resource.
            usd_per_hour: the rate the provider reports for the whole resource (RunPod ``costPerHr``);
                never trusted below the priced rate: a 0, a missing value (None) or a lower rate is
                metered at the priced rate (runpod-python issue 438: costPerHr 0 on running pods).
            started_at: ``time.monotonic()`` of the create call (billing starts there); default now.

        The row's billed_s is the most the run may last within ``usd`` at the metered rate (shorter when
        the rate is above the priced one), its cost that worst case. Returns the row.

        Raises:
            DistcheckError: the reservation is settled or already has another pod.
            LedgerError: the ledger is malformed.
        """
        if self.done:
            raise DistcheckError(_(RESERVATION_SETTLED).format(run=self.run_id))
        if self.pod_id is not None and self.pod_id != pod_id:
            raise DistcheckError(_(RESERVATION_OTHER_POD).format(run=self.run_id, pod=self.pod_id, other=pod_id))
        if self.started_row is not None:
            return self.started_row
        self.pod_id = str(pod_id)
        reported = _reported(usd_per_hour)
        self.reported_usd_per_hour = reported
        self.usd_per_hour = max(self.usd_per_hour, reported or Decimal(0))
        self.rate_unknown = reported is None and self.usd_per_hour > 0
        self.started_at = time.monotonic() if started_at is None else started_at
        gran, minimum = self.billing.granularity_s, self.billing.minimum_s
        fits = max_runtime_s(float(self.usd), float(self.usd_per_hour), 1, gran, minimum)
        worst = billed_seconds(min(self.max_seconds, fits), gran, minimum)
        self.max_seconds = min(self.max_seconds, worst)
        base = dict(run_id=self.run_id, provider=self.provider, gpu_type=self.gpu_type, gpu_count=self.gpu_count,
                    experiment=self.experiment, purpose=self.purpose, resource_id=self.pod_id)
        rows = [make_row(status="started", billed_s=int(worst), rate_per_hour=self.usd_per_hour, **base)]
        if self.rate_unknown:  # in the same write: the ledger never shows the pod without the flag
            rows.append(make_row(status="rate-unknown", billed_s=0, rate_per_hour=0, **base))
        with self.guard.ledger.locked(LOCK_WAIT_AFTER_CREATE_S):  # the pod exists: never give its row up early
            self.started_row = self.guard.ledger.append(*rows, wait_s=LOCK_WAIT_AFTER_CREATE_S)[0]
        return self.started_row

    def record_terminate_failed(self) -> LedgerRow | None:
        """Append a ``terminate-failed`` event: termination of the run's pod was not confirmed, it may
        still be billing (the next session retries it first). None when no pod was recorded."""
        if self.started_row is None:
            return None
        return self.guard.record_event(self.run_id, "terminate-failed")

    def watchdog(self, terminate: Callable[[], object], *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep, interval_s: float = 0.25,
                 teardown_s: float = 0.0, install_handlers: bool = True, start: float | None = None):
        """A :class:`~pytest_distcheck.budget.watchdog.Watchdog` for this run, to use as a context manager:
        it accrues the larger figure (usd_per_hour, or what the provider says) x elapsed since ``start``
        (default ``started_at``) and calls ``terminate()`` at ``limit_usd``."""
        from pytest_distcheck.budget.watchdog import Watchdog

        if start is None:
            start = self.started_at if self.started_at is not None else clock()
        return Watchdog(limit_usd=float(self.limit_usd), usd_per_hour=float(self.usd_per_hour),
                        terminate=terminate, describe=self.describe_limit(), clock=clock, sleep=sleep,
                        start=start, interval_s=interval_s, teardown_s=teardown_s,
                        granularity_s=self.billing.granularity_s, minimum_s=self.billing.minimum_s,
                        install_handlers=install_handlers)

    def settle(self, actual_seconds: float | None = None) -> LedgerRow | None:
        """Settle to the actual cost. Safe to call twice and on failure.

        Args:
            actual_seconds: from the create call to confirmed termination; default: since ``started_at``
                (0 when no pod was recorded: nothing was created).

        Returns:
            the ``settled`` row (an ``overrun`` row follows it in the ledger, and in ``overrun_row``,
            when the seconds pass the reserved worst case).

        Raises:
            LedgerError: the ledger became malformed; the open/started row keeps counting the worst case.
            LedgerWriteError: the disk is full (the ledger is as it was; the worst case keeps counting).
        """
        if self.done:
            return self.settled_row
        try:
            if actual_seconds is None:
                actual_seconds = 0.0 if self.started_at is None else time.monotonic() - self.started_at
            billed = 0.0
            if self.pod_id is not None:  # a pod existed, even when its started row could not be written
                if self.started_row is None:
                    self.record_pod(self.pod_id, self.reported_usd_per_hour, self.started_at)  # once more
                billed = billed_seconds(max(float(actual_seconds), 0.0), self.billing.granularity_s,
                                        self.billing.minimum_s)
            written = self.guard.settle_rows(self.run_id, int(math.ceil(billed)), wait_s=LOCK_WAIT_AFTER_CREATE_S)
            self.settled_row = written[0]
            self.overrun_row = written[1] if len(written) > 1 else None
        finally:
            self.done = True
            with self.guard.ledger.locked(LOCK_WAIT_AFTER_CREATE_S):
                self.guard._drop_held(self.run_id)
        return self.settled_row

    def release(self) -> None:
        """Close the run at 0 s: only valid before a pod is recorded (after it, use :meth:`settle`)."""
        if self.started_row is not None and not self.done:
            raise DistcheckError(_(RESERVATION_HAS_POD).format(run=self.run_id, pod=self.pod_id))
        self.settle(0)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        # Without a pod: nothing was billed, close the run at 0 s. With one: its started row counts the
        # worst case until the pods code settles with the real seconds.
        if not self.done and self.started_row is None:
            self.settle(0)
