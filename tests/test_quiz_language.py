"""`distcheck quiz 35 --lang es` (issue 31.3): a whole attempt in Spanish, logged with its language and graded
as the same answers in English; a decimal comma is read where it cannot group thousands."""

from __future__ import annotations

import builtins
import json
import shutil

import pytest
from quiz_support import BANK, LOG_REL, make_workspace, right_answer

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands import quiz as command
from pytest_distcheck.i18n import _
from pytest_distcheck.quiz import session
from pytest_distcheck.quiz.answers import comma_is_ambiguous, parse_number
from pytest_distcheck.quiz.bank import NumericItem, load_bank
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.regrade import regrade_log
from pytest_distcheck.quiz.translation import translate, translation_path

SEED = 35


@pytest.fixture(autouse=True)
def _english_after():
    yield
    i18n.use(i18n.DEFAULT)


def _spanish_way(drawn: DrawnItem) -> str:
    """The right answer as a reader of Spanish types it: a decimal comma where it is unambiguous."""
    answer = right_answer(drawn)
    comma = answer.replace(".", ",")
    return comma if isinstance(drawn.item, NumericItem) and not comma_is_ambiguous(comma) else answer.lower()


def _take(tmp_path, monkeypatch, capsys, answers, *flags):
    """Run `distcheck quiz 35 --seed SEED FLAGS` typing ``answers``; returns (stdout, the log's records)."""
    typed = iter(answers)
    monkeypatch.setattr(builtins, "input", lambda prompt: next(typed))
    config = str(tmp_path / "checks" / "distcheck.toml")
    assert main(["quiz", "35", "--seed", str(SEED), "--config", config, *flags]) == 0
    log = tmp_path / LOG_REL
    return capsys.readouterr().out, [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def workspace(tmp_path):
    make_workspace(tmp_path)
    shutil.copy(translation_path(load_bank(BANK), "es"), tmp_path / "checks" / "quiz")
    return tmp_path


def test_an_attempt_with_lang_es_is_asked_and_answered_in_spanish_and_logged_as_spanish(workspace, monkeypatch,
                                                                                        capsys):
    spanish = translate(load_bank(BANK), "es")
    drawn = draw_attempt(spanish, SEED, 10)
    answers = ["ni idea", *[_spanish_way(d) for d in drawn[:9]], _(session.SKIP)]
    out, (record,) = _take(workspace, monkeypatch, capsys, answers, "--lang", "es")
    assert i18n.language() == "es"
    first = drawn[0]
    assert f"[1/10] ({first.item.topic}) {first.prompt()}" in out and spanish.title in out
    assert _(session.INSTRUCTIONS).format(skip="saltar") in out
    assert _(session.TRY_AGAIN).split("{")[0] in out  # "ni idea" is asked again, in Spanish
    assert _(command.APPENDED).format(log=LOG_REL, line=1) in out
    assert out.count(_(session.CORRECT)) == 9 and _(session.WRONG_SKIPPED).split(":")[0] in out
    assert _(session.SCORE).format(right=9, total=10, percent=90, verdict=_(session.PASSED), mark=70) in out
    assert record["lang"] == "es" and record["answers"][9]["given"] == ""
    assert regrade_log(load_bank(BANK), workspace / LOG_REL, 10)[0].correct == 9


def test_the_same_answers_score_the_same_in_english_and_in_spanish(workspace, monkeypatch, capsys):
    """Same seed, same typed text: the same items, params and answers logged and the same re-graded score;
    only ``lang`` differs."""
    drawn = draw_attempt(load_bank(BANK), SEED, 10)
    answers = [right_answer(d) if i % 3 else "1" if isinstance(d.item, NumericItem) else "A"
               for i, d in enumerate(drawn)]
    _take(workspace, monkeypatch, capsys, answers, "--lang", "en")
    _out, (en, es) = _take(workspace, monkeypatch, capsys, answers, "--lang", "es")
    assert (en["lang"], es["lang"]) == ("en", "es")
    assert [(a["item"], a["params"], a["given"]) for a in en["answers"]] == \
           [(a["item"], a["params"], a["given"]) for a in es["answers"]]
    first, second = regrade_log(load_bank(BANK), workspace / LOG_REL, 10)
    assert first.correct == second.correct and en["reported_score"] == es["reported_score"]


def test_distcheck_lang_in_the_environment_speaks_spanish_without_the_flag(workspace, monkeypatch, capsys):
    monkeypatch.setenv(i18n.ENV, "es")
    drawn = draw_attempt(load_bank(BANK), SEED, 10)
    out, (record,) = _take(workspace, monkeypatch, capsys, [right_answer(d) for d in drawn])
    assert record["lang"] == "es" and _(session.PASSED) in out and i18n.language() == "es"


def test_a_bank_without_a_spanish_twin_is_asked_in_english_and_says_so(workspace, monkeypatch, capsys):
    (workspace / "checks" / "quiz" / "35.es.json").unlink()
    drawn = draw_attempt(load_bank(BANK), SEED, 10)
    out, (record,) = _take(workspace, monkeypatch, capsys, [right_answer(d) for d in drawn], "--lang", "es")
    assert record["lang"] == "en" and drawn[0].prompt() in out
    assert _(command.NOT_TRANSLATED).split("{path}")[1] in out


def _numeric(bank):
    return next(d for seed in range(200) for d in draw_attempt(bank, seed, 10)
                if isinstance(d.item, NumericItem) and d.item.unit == "GB")


@pytest.mark.parametrize(("lang", "asked_again"), [("es", True), ("en", False)])
def test_a_comma_before_three_digits_is_asked_again_in_spanish_and_read_as_thousands_in_english(lang, asked_again):
    i18n.use(lang)
    bank = load_bank(BANK)
    drawn = _numeric(bank)
    said: list[str] = []
    typed = iter(["1,024", "0,5"])
    given = session._ask_one(drawn, lambda prompt: next(typed), said.append)
    problem = comma_is_ambiguous("1,024")
    assert (given, said) == (("0,5", [_(session.TRY_AGAIN).format(problem=problem, skip=_(session.SKIP))])
                             if asked_again else ("1,024", []))


def test_the_spanish_intro_s_numbers_read_as_it_says():
    """A point is always decimal (1.024 is a little over one, never 1024), thousands take no separator, a decimal
    comma works but in a number like 1,024, which is asked again: each example the intro gives reads so."""
    i18n.use("es")
    intro = _(session.INSTRUCTIONS)
    assert all(n in intro for n in ("1.024", "(1024)", "0,375", "1,5", "1,024"))
    assert [parse_number(t) for t in ("1.024", "1024", "0,375", "1,5")] == [1.024, 1024.0, 0.375, 1.5]
    assert [comma_is_ambiguous(t) is None for t in ("1.024", "1024", "0,375", "1,5", "1,024")] == [True] * 4 + [False]


def test_skip_skips_in_both_languages_and_so_does_its_spanish_word():
    i18n.use("es")
    drawn = _numeric(load_bank(BANK))
    for word in ("skip", "saltar", "SALTAR"):
        assert session._ask_one(drawn, lambda prompt, w=word: w, print) == ""
