"""A quiz bank's text in another language: ``<bank>.<lang>.json`` beside the bank (``checks/quiz/35.es.json``,
schema ``quiz-translation.schema.json``) overlays each item's question, choices and explanation (and its source,
where the bank's is prose), the title, the goals' titles and the topics' names, and nothing else.

Ids, kinds, keys, calculators, parameters, units and tolerances exist only in the bank, so a translated item
draws and grades exactly as the original; the DoD check re-grades with the bank alone and never reads a
translation. ``taught_in`` in a translation is metadata for the kit's tests, as in the bank.
"""

from __future__ import annotations

import dataclasses
import string
from pathlib import Path

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.quiz.bank import Bank, ChoiceItem, Item
from pytest_distcheck.schemas import load_json

CHOICES_REQUIRED = N_("item {item!r} is a {kind} item: choices required")
CHOICES_NOT_ALLOWED = N_("item {item!r} is a {kind} item: choices not allowed")
OTHER_PLACEHOLDERS = N_("placeholders {given} differ from the bank's {bank}")
OTHER_CHOICE_COUNT = N_("{n} choices, the bank's item {item!r} has {bank} (same number, same order: the key is a "
                        "letter)")
NOT_THIS_BANK = N_("{given!r}, expected {expected!r} (it translates {bank})")
OTHER_GOALS = N_("goal ids {given} differ from the bank's {bank}")
UNKNOWN_ITEM = N_("unknown item {item!r}: not in {path}")
TRANSLATED_TWICE = N_("item {item!r} is translated twice")
UNTRANSLATED = N_("{n} item(s) of {bank} untranslated: {items}")


def translation_path(bank: Bank, lang: str) -> Path:
    """Where the ``lang`` text of ``bank`` lives: ``35.json`` -> ``35.es.json`` in the same folder."""
    return bank.path.with_name(f"{bank.path.stem}.{lang}.json")


def placeholders(template: str) -> set[tuple[str, str]]:
    """The ``(name, format spec)`` of each ``{...}`` field of a ``str.format`` template."""
    return {(name, spec or "") for _text, name, spec, _conv in string.Formatter().parse(template) if name is not None}


def _overlay(item: Item, raw: dict, topics: dict[str, str], path: Path, where: str) -> Item:
    if isinstance(item, ChoiceItem) != ("choices" in raw):
        said = CHOICES_REQUIRED if isinstance(item, ChoiceItem) else CHOICES_NOT_ALLOWED
        raise ConfigError(path, where, _(said).format(item=item.id, kind=item.kind))
    for key in ("question", "explanation"):
        if placeholders(raw[key]) != placeholders(getattr(item, key)):
            raise ConfigError(path, f"{where}.{key}", _(OTHER_PLACEHOLDERS).format(
                given=sorted(placeholders(raw[key])), bank=sorted(placeholders(getattr(item, key)))))
    text = {"question": raw["question"], "explanation": raw["explanation"], "topic": topics.get(item.topic, item.topic),
            "source": raw.get("source", item.source)}
    if isinstance(item, ChoiceItem):
        if len(raw["choices"]) != len(item.choices):
            raise ConfigError(path, f"{where}.choices", _(OTHER_CHOICE_COUNT).format(
                n=len(raw["choices"]), item=item.id, bank=len(item.choices)))
        text["choices"] = tuple(raw["choices"])
    return dataclasses.replace(item, **text)


def translate(bank: Bank, lang: str) -> Bank | None:
    """``bank`` with its text in ``lang``; ``bank`` itself when ``lang`` is its own; None when it has no
    ``lang`` translation file.

    Raises:
        ConfigError: naming the translation file and field: bad JSON or schema, another bank or language, an
            item id the bank lacks, given twice or missing, choices on a numeric item (or none on a choice
            item) or another number of them, a placeholder set other than the bank's, goals other than the
            bank's.
    """
    if lang == bank.lang:
        return bank
    path = translation_path(bank, lang)
    if not path.is_file():
        return None
    raw = load_json(path, "quiz-translation.schema.json")
    for key, expected in (("bank", bank.id), ("lang", lang)):
        if raw[key] != expected:
            raise ConfigError(path, key, _(NOT_THIS_BANK).format(given=raw[key], expected=expected,
                                                                 bank=bank.path.name))
    goals = raw.get("goals", {})
    if set(goals) != set(bank.goals):
        raise ConfigError(path, "goals", _(OTHER_GOALS).format(given=sorted(goals), bank=sorted(bank.goals)))
    given: dict[str, tuple[int, dict]] = {}
    for n, it in enumerate(raw["items"]):
        if not bank.has(it["id"]):
            raise ConfigError(path, f"items[{n}].id", _(UNKNOWN_ITEM).format(item=it["id"], path=bank.path))
        if it["id"] in given:
            raise ConfigError(path, f"items[{n}].id", _(TRANSLATED_TWICE).format(item=it["id"]))
        given[it["id"]] = (n, it)
    missing = [it.id for it in bank.items if it.id not in given]
    if missing:
        raise ConfigError(path, "items", _(UNTRANSLATED).format(
            n=len(missing), bank=bank.path.name, items=", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")))
    topics = raw.get("topics", {})
    items = tuple(_overlay(it, given[it.id][1], topics, path, f"items[{given[it.id][0]}]") for it in bank.items)
    return dataclasses.replace(bank, title=raw["title"], items=items, _by_id={it.id: it for it in items},
                               goals={g: goals[g] for g in bank.goals}, lang=lang)
