"""The phase quiz in Spanish (issue 31.3): checks/quiz/35.es.json is the twin of the bank, item by item, and a
translated item draws and grades exactly as the English one."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter

import pytest
from markdown_it import MarkdownIt
from quiz_support import BANK, REPO, attempt_record, missing_sections, right_answer, write_log

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import ChoiceItem, load_bank
from pytest_distcheck.quiz.draw import draw_attempt
from pytest_distcheck.quiz.grade import grade
from pytest_distcheck.quiz.regrade import regrade_log
from pytest_distcheck.quiz.translation import placeholders, translate, translation_path

ENGLISH = load_bank(BANK)
SPANISH = translate(ENGLISH, "es")
RAW_ES = {it["id"]: it for it in json.loads(translation_path(ENGLISH, "es").read_text())["items"]}
RAW_EN = {it["id"]: it for it in json.loads(BANK.read_text())["items"]}
NUMBER = re.compile(r"\d+(?:\.\d+)*")
TEXT = ("question", "choices", "explanation", "topic", "source")


def _numbers(text: str) -> Counter[str]:
    """The numbers a text states, placeholders left out (they are filled in alike in both languages)."""
    return Counter(NUMBER.findall(re.sub(r"\{[^{}]*\}", "", text)))


def _headings(page) -> list[str]:
    tokens = MarkdownIt("commonmark").parse(page.read_text())
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def test_the_bank_has_a_spanish_twin_in_spanish():
    assert SPANISH is not None and SPANISH.lang == "es" and SPANISH.id == ENGLISH.id
    assert SPANISH.title != ENGLISH.title and list(SPANISH.goals) == list(ENGLISH.goals)


@pytest.mark.parametrize("item_id", [it.id for it in ENGLISH.items])
def test_a_spanish_item_differs_from_its_english_one_only_in_its_text(item_id):
    """Same id, kind, number of choices, key, calculator, parameters, unit, tolerance and goal: with
    the English text put back, the Spanish item *is* the English one; and the same placeholders."""
    en, es = ENGLISH.item(item_id), SPANISH.item(item_id)
    assert dataclasses.replace(es, **{k: getattr(en, k) for k in TEXT if hasattr(en, k)}) == en
    assert es.question != en.question  # an explanation may be a formula alone, the same in both
    if isinstance(en, ChoiceItem):
        assert len(es.choices) == len(en.choices) and es.answer == en.answer
    for key in ("question", "explanation"):
        assert placeholders(getattr(es, key)) == placeholders(getattr(en, key)), key


@pytest.mark.parametrize("item_id", [it.id for it in ENGLISH.items])
def test_a_spanish_item_states_the_numbers_of_its_english_text_field_by_field(item_id):
    """Each question, choice and explanation gives the same numbers in both languages (choice by choice, so
    a translated choice sits under the letter of its English one)."""
    en, es = ENGLISH.item(item_id), SPANISH.item(item_id)
    fields = [("question", en.question, es.question), ("explanation", en.explanation, es.explanation),
              ("source", en.source, es.source)]
    if isinstance(en, ChoiceItem):
        fields += [(f"choices[{i}]", a, b) for i, (a, b) in enumerate(zip(en.choices, es.choices, strict=True))]
    for name, a, b in fields:
        assert _numbers(a) == _numbers(b), f"{item_id} {name}: {_numbers(a)} != {_numbers(b)}"


@pytest.mark.parametrize("item_id", [it.id for it in ENGLISH.items])
def test_a_spanish_item_is_taught_in_the_twin_section_of_its_english_page(item_id):
    """The twin page is docs/es/<the English page's path under docs/>, its section the heading at the same
    position (the page parity tests keep the headings in step), and that section says what the item asks.
    An item whose page has no Spanish twin yet names none, and it must once the twin is written."""
    en_where, es_where = RAW_EN[item_id]["taught_in"], RAW_ES[item_id].get("taught_in")
    twin = REPO / "docs" / "es" / en_where["page"].removeprefix("docs/")
    if not twin.is_file():
        assert es_where is None, f"{item_id}: {twin.relative_to(REPO)} does not exist"
        return
    assert es_where is not None, f"{item_id}: {twin.relative_to(REPO)} exists: give the Spanish taught_in"
    assert es_where["page"] == str(twin.relative_to(REPO))
    position = _headings(REPO / en_where["page"]).index(en_where["section"])
    assert _headings(twin)[position] == es_where["section"]
    assert es_where.get("says") and not missing_sections([RAW_ES[item_id]], REPO)


@pytest.mark.parametrize("seed", [0, 1, 7, 35, 2026, 99991])
def test_the_same_answers_get_the_same_grades_in_both_languages(seed):
    """A seed draws the same items and parameters in both; right, wrong, skipped and unreadable answers
    grade alike."""
    en, es = draw_attempt(ENGLISH, seed, 10), draw_attempt(SPANISH, seed, 10)
    assert [(d.item.id, d.params) for d in en] == [(d.item.id, d.params) for d in es]
    for i, (a, b) in enumerate(zip(en, es, strict=True)):
        for given in (right_answer(a), "A", "B", "0.5", "3/8", "", "no idea", f"{i}e9"):
            ga, gb = grade(a, given), grade(b, given)
            assert (ga.correct, ga.given) == (gb.correct, gb.given), (a.item.id, given)


def test_a_logged_attempt_scores_the_same_with_its_language_or_without(tmp_path):
    """Records written before the language was logged have no ``lang``; the DoD check grades both alike."""
    plain = attempt_record(5, wrong=2)
    log = write_log(tmp_path, plain, {**attempt_record(6, wrong=2), "lang": "es"},
                    {**attempt_record(7, wrong=2), "lang": "en"})
    scores = regrade_log(ENGLISH, log, 10)
    assert [(s.correct, s.counted) for s in scores] == [(8, True)] * 3


def test_a_logged_language_outside_the_kit_s_is_a_bad_line(tmp_path):
    log = write_log(tmp_path, {**attempt_record(5), "lang": "fr"})
    with pytest.raises(ConfigError) as excinfo:
        regrade_log(ENGLISH, log, 10)
    assert excinfo.value.where.startswith("line 1") and "lang" in excinfo.value.where


def _copy(tmp_path, mutate=None):
    shutil.copy(BANK, tmp_path / "35.json")
    raw = json.loads(translation_path(ENGLISH, "es").read_text())
    if mutate:
        mutate(raw)
    (tmp_path / "35.es.json").write_text(json.dumps(raw, ensure_ascii=False))
    return load_bank(tmp_path / "35.json")


def test_a_bank_without_a_translation_has_none(tmp_path):
    shutil.copy(BANK, tmp_path / "35.json")
    bank = load_bank(tmp_path / "35.json")
    assert translate(bank, "es") is None and translate(bank, "en") is bank


def _item(raw, item_id):
    return next(it for it in raw["items"] if it["id"] == item_id)


@pytest.mark.parametrize(("mutate", "where", "words"), [
    (lambda r: r["items"].pop(3), "items", "untranslated: ddp-broadcast-init"),
    (lambda r: r["items"].append(dict(r["items"][0])), "items[64].id", "translated twice"),
    (lambda r: r["items"][0].update(id="nope"), "items[0].id", "unknown item 'nope'"),
    (lambda r: _item(r, "ddp-no-sync")["choices"].pop(), "items[2].choices", "3 choices, the bank's item"),
    (lambda r: _item(r, "zero1-memory").update(question="{dp} GPU"), "items[28].question", "placeholders"),
    (lambda r: _item(r, "zero1-memory").update(choices=["a", "b"]), "items[28]", "choices not allowed"),
    (lambda r: r.update(bank="36"), "bank", "'36', expected '35'"),
    (lambda r: r["goals"].pop("spend"), "goals", "differ from the bank's"),
])
def test_a_translation_that_could_grade_differently_is_refused_naming_the_field(tmp_path, mutate, where, words):
    bank = _copy(tmp_path, mutate)
    with pytest.raises(ConfigError) as excinfo:
        translate(bank, "es")
    assert excinfo.value.path.name == "35.es.json" and excinfo.value.where == where
    assert words in excinfo.value.problem


def test_a_prose_source_reads_in_spanish_and_a_citation_stays_as_the_bank_gives_it():
    """An init-workspace learner saw `fuente: billing rule as stated (...)` in the Spanish quiz."""
    assert SPANISH.item("run-cost").source.startswith("regla de facturación tal como se enuncia")
    assert SPANISH.item("ddp-when-allreduce").source == ENGLISH.item("ddp-when-allreduce").source
