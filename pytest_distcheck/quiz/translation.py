"""A quiz bank's text in another language: ``<bank>.<lang>.json`` beside the bank (``checks/quiz/35.es.json``,
schema ``quiz-translation.schema.json``) overlays each item's question, choices and explanation, the title,
the goals' titles and the topics' names, and nothing else.

Ids, kinds, keys, calculators, parameters, units and tolerances exist only in the bank, so a translated item
draws and grades exactly as the original; the DoD check re-grades with the bank alone and never reads a
translation. ``taught_in`` in a translation is metadata for the kit's tests, as in the bank.
"""

from __future__ import annotations

import dataclasses
import string
from pathlib import Path

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import Bank, ChoiceItem, Item
from pytest_distcheck.schemas import load_json


def translation_path(bank: Bank, lang: str) -> Path:
    """Where the ``lang`` text of ``bank`` lives: ``35.json`` -> ``35.es.json`` in the same folder."""
    return bank.path.with_name(f"{bank.path.stem}.{lang}.json")


def placeholders(template: str) -> set[tuple[str, str]]:
    """The ``(name, format spec)`` of each ``{...}`` field of a ``str.format`` template."""
    return {(name, spec or "") for _, name, spec, _ in string.Formatter().parse(template) if name is not None}


def _overlay(item: Item, raw: dict, topics: dict[str, str], path: Path, where: str) -> Item:
    if isinstance(item, ChoiceItem) != ("choices" in raw):
        raise ConfigError(path, where, f"item {item.id!r} is a {item.kind} item: choices "
                          f"{'required' if isinstance(item, ChoiceItem) else 'not allowed'}")
    for key in ("question", "explanation"):
        if placeholders(raw[key]) != placeholders(getattr(item, key)):
            raise ConfigError(path, f"{where}.{key}", f"placeholders {sorted(placeholders(raw[key]))} differ from "
                              f"the bank's {sorted(placeholders(getattr(item, key)))}")
    text = {"question": raw["question"], "explanation": raw["explanation"], "topic": topics.get(item.topic, item.topic)}
    if isinstance(item, ChoiceItem):
        if len(raw["choices"]) != len(item.choices):
            raise ConfigError(path, f"{where}.choices", f"{len(raw['choices'])} choices, the bank's item "
                              f"{item.id!r} has {len(item.choices)} (same number, same order: the key is a letter)")
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
            raise ConfigError(path, key, f"{raw[key]!r}, expected {expected!r} (it translates {bank.path.name})")
    goals = raw.get("goals", {})
    if set(goals) != set(bank.goals):
        raise ConfigError(path, "goals", f"goal ids {sorted(goals)} differ from the bank's {sorted(bank.goals)}")
    given: dict[str, tuple[int, dict]] = {}
    for n, it in enumerate(raw["items"]):
        if not bank.has(it["id"]):
            raise ConfigError(path, f"items[{n}].id", f"unknown item {it['id']!r}: not in {bank.path}")
        if it["id"] in given:
            raise ConfigError(path, f"items[{n}].id", f"item {it['id']!r} is translated twice")
        given[it["id"]] = (n, it)
    missing = [it.id for it in bank.items if it.id not in given]
    if missing:
        raise ConfigError(path, "items", f"{len(missing)} item(s) of {bank.path.name} untranslated: "
                          f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}")
    topics = raw.get("topics", {})
    items = tuple(_overlay(it, given[it.id][1], topics, path, f"items[{given[it.id][0]}]") for it in bank.items)
    return dataclasses.replace(bank, title=raw["title"], items=items, _by_id={it.id: it for it in items},
                               goals={g: goals[g] for g in bank.goals}, lang=lang)
