"""Prices: the shipped table validates and says where each number comes from; live prices win when a
key is set; unknown GPUs are refused; the key never shows in what the kit says."""

from __future__ import annotations

import json
from decimal import Decimal
from importlib import resources

import pytest

from pytest_distcheck.budget.errors import PriceUnknown
from pytest_distcheck.budget.pricing import (
    API_KEY_ENV,
    LIVE_HINT,
    LIVE_LOOKUP_FAILED,
    LIVE_SOURCE,
    NO_PRICE,
    NOT_OFFERED,
    SHIPPED_SOURCES,
    UNKNOWN_TO_RUNPOD,
    PriceBook,
)
from pytest_distcheck.errors import ConfigError

SECRET = "rpa_TESTSECRET0123456789"


def shipped_table() -> dict:
    return json.loads(resources.files("pytest_distcheck.data").joinpath("prices.json").read_text())


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)


def test_shipped_table_has_runpod_secure_and_community_with_source_and_date():
    book = PriceBook.shipped()
    entries = book.table["prices"]
    assert {(e["provider"], e["cloud"]) for e in entries} >= {("runpod", "secure"), ("runpod", "community")}
    for e in entries:
        assert e["source"] and (e["source_date"] == "undated" or e["source_date"][:2] == "20") and e["recorded"]
    p = book.price("runpod", "rtx 4090", "secure")
    assert (p.usd_per_gpu_hour, p.provider_gpu_id, p.live) == (Decimal("0.59"), "NVIDIA GeForce RTX 4090", False)
    assert "skypilot-catalog" in p.source
    assert book.price("runpod", "NVIDIA H100 PCIe", "community").confidence == "low"
    assert book.billing("runpod").granularity_s == 1


def test_the_shipped_tables_sources_are_the_catalogs():
    """Each source the shipped table gives (prices and billing) is a catalog message, so a command speaks it in
    the learner's language; a source added to prices.json must be added to SHIPPED_SOURCES (and translated)."""
    table = shipped_table()
    given = {e["source"] for e in table["prices"]} | {b["source"] for b in table["billing"].values()}
    assert given == set(SHIPPED_SOURCES)


def test_a_live_price_keeps_its_source_in_english_under_es(monkeypatch: pytest.MonkeyPatch):
    from pytest_distcheck import i18n

    monkeypatch.setenv(API_KEY_ENV, SECRET)
    i18n.use("es")
    try:
        p = PriceBook.shipped(live_fetch=lambda gpu_id, cloud, count: Decimal("0.69")).price("runpod", "RTX 4090")
        assert p.source == LIVE_SOURCE.format(cloud="secure") == "RunPod API gpuTypes.securePrice (live)"
        assert i18n._(LIVE_SOURCE).format(cloud="secure") == "API de RunPod, gpuTypes.securePrice (en vivo)"
    finally:
        i18n.use(i18n.DEFAULT)


def test_unknown_gpu_lists_what_is_priced():
    book = PriceBook.shipped()
    with pytest.raises(PriceUnknown) as exc:
        book.price("runpod", "A40", "community")
    known = ", ".join(book.known("runpod", "community"))
    assert "RTX 4090" in known
    assert str(exc.value) == NO_PRICE.format(cloud="community", gpu="A40", provider="runpod", path=book.path,
                                             known=known, hint=LIVE_HINT.format(env=API_KEY_ENV))


@pytest.mark.parametrize("mutate, where", [
    (lambda t: t["prices"][0].pop("source"), "prices[0]"),
    (lambda t: t["prices"][1].__setitem__("usd_per_gpu_hour", -1), "prices[1].usd_per_gpu_hour"),
    (lambda t: t.__setitem__("currency", "EUR"), "currency"),
    (lambda t: t["prices"][2].__setitem__("source_date", "last year"), "prices[2].source_date"),
    (lambda t: t["prices"].append(dict(t["prices"][0])), "prices[10]"),
    (lambda t: t["billing"].pop("runpod"), "prices[0].provider"),
])
def test_a_bad_price_table_names_the_field(tmp_path, mutate, where):
    table = shipped_table()
    mutate(table)
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    with pytest.raises(ConfigError) as exc:
        PriceBook.load(path)
    assert exc.value.where == where and str(path) in str(exc.value)


def test_live_price_takes_precedence_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch):
    calls = []

    def fetch(gpu_id, cloud, count):
        calls.append((gpu_id, cloud, count))
        return Decimal("0.69")

    book = PriceBook.shipped(live_fetch=fetch)
    assert book.price("runpod", "RTX 4090").live is False  # no key: the table, no call
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    p = book.price("runpod", "RTX 4090", "secure", 2)
    assert (p.usd_per_gpu_hour, p.live, p.source) == (Decimal("0.69"), True, "RunPod API gpuTypes.securePrice (live)")
    book.price("runpod", "RTX 4090", "secure", 2)
    assert calls == [("NVIDIA GeForce RTX 4090", "secure", 2)]  # cached per process


def test_live_answer_without_a_price_or_for_an_unknown_gpu_is_a_refusal(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    with pytest.raises(PriceUnknown) as exc:
        PriceBook.shipped(live_fetch=lambda *a: None).price("runpod", "A40", "community")
    assert str(exc.value) == NOT_OFFERED.format(cloud="community", gpu="A40")

    def unknown(*a):
        raise ValueError("No GPU found with the specified ID")

    with pytest.raises(PriceUnknown) as exc:
        PriceBook.shipped(live_fetch=unknown).price("runpod", "B300")
    assert str(exc.value) == UNKNOWN_TO_RUNPOD.format(gpu="B300")


def test_failed_live_lookup_falls_back_to_the_table_with_a_redacted_warning(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(API_KEY_ENV, SECRET)

    def broken(*a):
        raise RuntimeError(f"502 Bad Gateway <html>...</html> Authorization: Bearer {SECRET}")

    p = PriceBook.shipped(live_fetch=broken).price("runpod", "A40")
    assert p.usd_per_gpu_hour == Decimal("0.40") and not p.live
    assert p.warning == LIVE_LOOKUP_FAILED.format(error="RuntimeError",
                                                  detail="502 Bad Gateway <html>...</html> Authorization: Bearer ***")


def test_runpod_sdk_lookup_against_an_unreachable_api_falls_back(monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("runpod")
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", "http://127.0.0.1:9")  # nothing listens: connection refused
    p = PriceBook.shipped().price("runpod", "L4", "secure")
    assert p.usd_per_gpu_hour == Decimal("0.39") and p.warning and SECRET not in p.warning
