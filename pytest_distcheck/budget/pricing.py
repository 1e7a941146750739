"""Prices of GPU-hours: the shipped table (``pytest_distcheck/data/prices.json``, schema-validated) and,
when ``RUNPOD_API_KEY`` is set, live prices from RunPod through its SDK, which take precedence.

An unknown GPU type, provider or cloud, or a price the provider does not give, raises
:class:`PriceUnknown`: a refusal, never a guess. The API key is read from the environment only and
never appears in a price's source, a warning or an exception text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_distcheck.budget.errors import PriceUnknown
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.gpu_types import CLOUDS, GPU_TYPE, NOT_A_GPU_TYPE, check_gpu_type
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.schemas import load_json, validate

API_KEY_ENV = "RUNPOD_API_KEY"
NO_BILLING_RULE = N_("no billing rule for provider {provider!r} in {path} (known: {known})")
UNKNOWN_CLOUD = N_("unknown RunPod cloud {cloud!r}: use one of {clouds} (never ALL: the pod could land in the dearer "
                   "one)")
NOTHING_SENT = N_("; nothing was sent to RunPod")
UNKNOWN_TO_RUNPOD = N_("RunPod does not know the GPU type {gpu!r} (its ids read like 'NVIDIA GeForce RTX 4090')")
LIVE_LOOKUP_FAILED = N_("live RunPod price lookup failed ({error}: {detail})")
NOT_OFFERED = N_("RunPod gives no {cloud} cloud price for {gpu!r} now (not offered there); try the other cloud or "
                 "another GPU type")
NO_PRICE = N_("no {cloud} price for GPU type {gpu!r} on {provider} in {path} (priced: {known}); {hint}, or add it to "
              "the table")
LIVE_HINT = N_("set {env} for live prices")
PRICED_TWICE = N_("{name!r} on {provider} {cloud} is already priced by {first}")
NO_RULE = N_("no billing rule for {provider!r}")  # a price whose provider's billing is not in the table
# A live price's source; the Price keeps it in English (ledgers record it), a command speaks it as _(LIVE_SOURCE).
LIVE_SOURCE = N_("RunPod API gpuTypes.{cloud}Price (live)")
# The shipped table's sources (data/prices.json, prices and billing), here so the catalog has them: a command
# speaks a source as _(source); a table of the user's own passes through as written. tests/test_budget_pricing.py
# keeps this list equal to the file's.
SHIPPED_SOURCES = (
    N_("skypilot-org/skypilot-catalog catalogs/v8/runpod/vms.csv @46062acb (generated from the RunPod API's "
       "securePrice)"),
    N_("deploybase.ai RunPod price listing (third party; the column is labelled 'spot', so this may not be the "
       "on-demand community price)"),
    N_("spheron.network comparison of RunPod prices (third party; gives community 1.80-2.40, this is the upper end "
       "so a reservation is not too small)"),
    N_("RunPod docs, pods/pricing.mdx and accounts-billing/billing.mdx: pods are billed per second (balance debited "
       "every 5 minutes)"),
    N_("this machine's own GPUs: no provider bill; a rate given by the user accrues per second"),
)
SCHEMA = "prices.schema.json"


@dataclass(frozen=True)
class Price:
    """USD per GPU-hour for one provider, GPU type and cloud.

    Attributes:
        provider, gpu, cloud: what is priced (``gpu`` is the table's name for it).
        provider_gpu_id: the provider's id for the GPU type (RunPod ``gpuTypeId``).
        usd_per_gpu_hour: the on-demand price of one GPU for one hour, USD.
        source: where the number comes from; ``date``: its date (``undated`` when the source has none),
            ``recorded``: when it was copied into the table (``live`` prices: the time of the call).
        live: whether it came from the provider's API in this process.
        warning: set when a live lookup failed and the table's number is used instead.
    """

    provider: str
    gpu: str
    provider_gpu_id: str
    cloud: str
    usd_per_gpu_hour: Decimal
    source: str
    date: str
    recorded: str
    live: bool = False
    confidence: str = "medium"
    warning: str | None = None


@dataclass(frozen=True)
class Billing:
    """A provider's billing rule: billed_s = max(minimum_s, ceil(runtime / granularity_s) * granularity_s)
    (:func:`pytest_distcheck.calc.cost.billed_seconds`)."""

    provider: str
    granularity_s: int
    minimum_s: int
    source: str


def _redact(text: str) -> str:
    key = os.environ.get(API_KEY_ENV)
    return text.replace(key, "***") if key else text


def runpod_live_price(provider_gpu_id: str, cloud: str, gpu_count: int) -> Decimal | None:
    """The per-GPU price RunPod's API gives now (``gpuTypes{securePrice communityPrice}`` through
    ``runpod.get_gpu``), or None when it gives none for that cloud.

    Raises whatever the SDK raises (``ValueError`` for an unknown GPU id, ``runpod.error.QueryError``,
    ``requests`` errors); :meth:`PriceBook.price` turns those into a refusal or a warning.
    """
    check_gpu_type(provider_gpu_id, "GPU type")  # the SDK pastes it into GraphQL unescaped
    import runpod  # heavy; only when a key is set and a price is asked for

    runpod.api_key = os.environ[API_KEY_ENV]  # the SDK does not read the environment itself
    info = runpod.get_gpu(provider_gpu_id, gpu_count)
    value = info.get("securePrice" if cloud == "secure" else "communityPrice")
    if value in (None, 0, 0.0):
        return None
    return Decimal(str(value))


LiveFetch = Callable[[str, str, int], "Decimal | None"]


class PriceBook:
    """The price table, with live prices on top.

    Args:
        table: the parsed JSON (see ``schemas/prices.schema.json``); use :meth:`load` / :meth:`shipped`.
        path: where it came from, for error messages.
        live_fetch: ``(provider_gpu_id, cloud, gpu_count) -> Decimal | None`` for RunPod; default
            :func:`runpod_live_price`, used only while ``RUNPOD_API_KEY`` is set.
    """

    def __init__(self, table: dict[str, Any], path: Path | str = "prices.json",
                 live_fetch: LiveFetch | None = None) -> None:
        self.table = table
        self.path = Path(path)
        self.live_fetch = live_fetch or runpod_live_price
        self._live_cache: dict[tuple[str, str, int], Price] = {}

    @classmethod
    def load(cls, path: Path | str, live_fetch: LiveFetch | None = None) -> PriceBook:
        """Read and validate a price table. Raises ConfigError naming the file and the line or field."""
        return cls.from_table(load_json(path, SCHEMA), path, live_fetch)

    @classmethod
    def from_table(cls, table: Any, path: Path | str, live_fetch: LiveFetch | None = None) -> PriceBook:
        """A price book of ``table`` (read from ``path``). Raises ConfigError naming the file and the field:
        the table breaks ``schemas/prices.schema.json``, a GPU name is priced twice for one provider and cloud,
        or a provider has no billing rule."""
        validate(table, SCHEMA, path)
        seen: dict[tuple[str, str, str], int] = {}
        for n, entry in enumerate(table["prices"]):
            for name in {n.casefold() for n in (entry["gpu"], entry["provider_gpu_id"], *entry.get("aliases", []))}:
                key = (entry["provider"], entry["cloud"], name)
                if key in seen:
                    raise ConfigError(path, f"prices[{n}]", _(PRICED_TWICE).format(
                        name=name, provider=entry["provider"], cloud=entry["cloud"], first=f"prices[{seen[key]}]"))
                seen[key] = n
            if entry["provider"] not in table["billing"]:
                raise ConfigError(path, f"prices[{n}].provider", _(NO_RULE).format(provider=entry["provider"]))
        return cls(table, path, live_fetch)

    @classmethod
    def shipped(cls, live_fetch: LiveFetch | None = None) -> PriceBook:
        """The table shipped with the kit (``pytest_distcheck/data/prices.json``)."""
        res = resources.files("pytest_distcheck.data").joinpath("prices.json")
        return cls.from_table(json.loads(res.read_text(encoding="utf-8")), "pytest_distcheck/data/prices.json",
                              live_fetch)

    def billing(self, provider: str) -> Billing:
        """The provider's billing rule. Raises PriceUnknown for a provider the table does not know."""
        rule = self.table["billing"].get(provider)
        if rule is None:
            raise PriceUnknown(_(NO_BILLING_RULE).format(provider=provider, path=self.path,
                                                         known=", ".join(sorted(self.table["billing"]))))
        return Billing(provider, rule["granularity_s"], rule["minimum_s"], rule["source"])

    def _entry(self, provider: str, gpu: str, cloud: str) -> dict[str, Any] | None:
        want = gpu.strip().casefold()
        for entry in self.table["prices"]:
            names = (entry["gpu"], entry["provider_gpu_id"], *entry.get("aliases", []))
            if entry["provider"] == provider and entry["cloud"] == cloud and want in (n.casefold() for n in names):
                return entry
        return None

    def known(self, provider: str, cloud: str | None = None) -> list[str]:
        """The table's GPU names for a provider (and cloud)."""
        return sorted({e["gpu"] for e in self.table["prices"]
                       if e["provider"] == provider and (cloud is None or e["cloud"] == cloud)})

    def price(self, provider: str, gpu: str, cloud: str = "secure", gpu_count: int = 1) -> Price:
        """The price of one GPU-hour.

        Live first (RunPod, while ``RUNPOD_API_KEY`` is set): a live price wins; a live answer of "no
        price in that cloud" or "unknown GPU" is a refusal; a failed call (network, HTTP 5xx, bad JSON)
        falls back to the table with ``warning`` set.

        Raises:
            PriceUnknown: no billing rule for the provider, unknown cloud, or no price for the GPU.
        """
        self.billing(provider)
        if provider == "runpod" and cloud not in CLOUDS:
            raise PriceUnknown(_(UNKNOWN_CLOUD).format(cloud=cloud, clouds=", ".join(CLOUDS)))
        entry = self._entry(provider, gpu, cloud)
        warning = None
        if provider == "runpod" and os.environ.get(API_KEY_ENV):
            gpu_id = entry["provider_gpu_id"] if entry else gpu
            key = (gpu_id, cloud, gpu_count)
            if key in self._live_cache:
                return self._live_cache[key]
            if not GPU_TYPE.match(gpu_id):
                raise PriceUnknown(_(NOT_A_GPU_TYPE).format(where="GPU type", value=gpu_id) + _(NOTHING_SENT))
            try:
                value = self.live_fetch(gpu_id, cloud, gpu_count)
            except Exception as exc:  # noqa: BLE001 - sorted below
                # The SDK raises ValueError for a GPU id RunPod does not know; a 502 HTML page arrives as
                # requests' JSONDecodeError, also a ValueError, but it says nothing about the GPU.
                if isinstance(exc, ValueError) and type(exc).__name__ != "JSONDecodeError":
                    raise PriceUnknown(_(UNKNOWN_TO_RUNPOD).format(gpu=gpu_id)) from None
                warning = _redact(_(LIVE_LOOKUP_FAILED).format(error=type(exc).__name__, detail=exc)[:300])
            else:
                if value is None:
                    raise PriceUnknown(_(NOT_OFFERED).format(cloud=cloud, gpu=gpu_id))
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                live = Price(provider, entry["gpu"] if entry else gpu, gpu_id, cloud, value,
                             LIVE_SOURCE.format(cloud=cloud), now, now, live=True, confidence="high")
                self._live_cache[key] = live
                return live
        if entry is None:
            known = ", ".join(self.known(provider, cloud)) or "none"
            hint = warning if warning else _(LIVE_HINT).format(env=API_KEY_ENV)
            raise PriceUnknown(_(NO_PRICE).format(cloud=cloud, gpu=gpu, provider=provider, path=self.path,
                                                  known=known, hint=hint))
        return Price(provider, entry["gpu"], entry["provider_gpu_id"], cloud,
                     Decimal(str(entry["usd_per_gpu_hour"])), entry["source"], entry["source_date"],
                     entry["recorded"], confidence=entry["confidence"], warning=warning)
