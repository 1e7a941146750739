"""The Phase 35 bank is valid and complete; bad banks are rejected naming file and field; draws replay;
grading uses the calculators with the stated tolerance."""

import json
import math

import pytest
from quiz_support import BANK

from pytest_distcheck.calc import memory, pipeline
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import ChoiceItem, NumericItem, load_bank
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import grade, passes, within


@pytest.fixture(scope="module")
def bank():
    return load_bank(BANK)


def test_bank_has_30_items_over_the_topics(bank):
    assert bank.id == "35"
    assert len(bank.items) >= 30
    topics = {it.topic for it in bank.items}
    assert {"DDP", "ZeRO", "FSDP", "TP", "PP", "collectives", "inference"} <= topics
    kinds = [it.kind for it in bank.items]
    assert kinds.count("choice") >= 15 and kinds.count("numeric") >= 10


def test_choice_answers_are_spread_over_the_letters(bank):
    letters = [it.answer for it in bank.items if isinstance(it, ChoiceItem)]
    assert max(letters.count(x) for x in set(letters)) <= len(letters) // 2


def test_option_lengths_do_not_give_the_answer_away(bank):
    # A learner who always picks the longest (or shortest) option must not pass: with 4 options, chance is 25%.
    items = [it for it in bank.items if isinstance(it, ChoiceItem)]

    def strictly(it, better):
        right = it.choices["ABCDEF".index(it.answer)]
        return all(better(len(right), len(c)) for c in it.choices if c is not right)

    longest = [it.id for it in items if strictly(it, int.__gt__)]
    shortest = [it.id for it in items if strictly(it, int.__lt__)]
    assert len(longest) <= 0.3 * len(items), f"the right option is the longest in {longest}"
    assert len(shortest) <= 0.3 * len(items), f"the right option is the shortest in {shortest}"


def test_every_numeric_item_computes_for_many_draws(bank):
    for seed in range(60):
        for d in draw_attempt(bank, seed, len(bank.items)):
            if isinstance(d.item, NumericItem):
                value = d.expected()
                assert math.isfinite(value) and value > 0, (d.item.id, d.params)
                # the right answer, typed with 6 significant digits, is graded right
                assert grade(d, f"{value:.6g}").correct, (d.item.id, d.params)
                assert d.item.question.format(**d.params)


def test_draws_replay_from_the_seed(bank):
    a = draw_attempt(bank, 1234, 10)
    b = draw_attempt(bank, 1234, 10)
    c = draw_attempt(bank, 1235, 10)
    assert [(d.item.id, d.params) for d in a] == [(d.item.id, d.params) for d in b]
    assert [(d.item.id, d.params) for d in a] != [(d.item.id, d.params) for d in c]
    assert len({d.item.id for d in a}) == 10
    n = len(bank.items)
    with pytest.raises(ValueError, match=f"needs 1..{n}"):
        draw_attempt(bank, 1, n + 1)


def test_numeric_items_are_graded_by_the_calculators(bank):
    ratio = DrawnItem(bank.item("bubble-ratio-over-ideal"), {"p": 4, "m": 8})
    assert ratio.expected() == pipeline.bubble_ratio_over_ideal(4, 8) == 0.375
    for typed in ("0.375", "37.5%", "3/8", ".3751"):
        assert grade(ratio, typed).correct, typed
    g = grade(ratio, "0.3")
    assert not g.correct and g.expected == "0.375"
    assert "(4-1)/8 = 0.375" in g.explanation
    total = DrawnItem(bank.item("bubble-fraction-of-total"), {"p": 4, "m": 8})
    assert grade(total, "3/11").correct and not grade(total, "3/8").correct
    # ZeRO Fig. 1 numbers through the quiz: 7.5B on 64 GPUs
    z1 = DrawnItem(bank.item("zero1-memory"), {"params_b": 7.5, "dp": 64})
    assert z1.expected() == pytest.approx(memory.zero_model_state_bytes(7.5e9, "zero1", 64) / 1e9)
    assert grade(z1, "31.4 GB").correct
    assert not grade(z1, "120").correct


def test_tolerance_is_stated_and_applied(bank):
    z3 = DrawnItem(bank.item("zero3-memory"), {"params_b": 7.5, "dp": 64})
    assert "within 2%" in z3.prompt()
    assert grade(z3, "1.9").correct      # 1.875 -> 1.33% off
    assert not grade(z3, "1.92").correct  # 2.4% off
    assert within(1.0, 1.01, ("abs", 0.01)) and not within(1.0, 1.02, ("abs", 0.01))


def test_choice_grading_and_unreadable_answers(bank):
    item = next(it for it in bank.items if isinstance(it, ChoiceItem))
    d = DrawnItem(item)
    assert grade(d, item.answer.lower()).correct
    wrong = "A" if item.answer != "A" else "B"
    g = grade(d, wrong)
    assert not g.correct and g.expected.startswith(f"{item.answer}) ")
    assert not grade(d, "").correct
    assert grade(d, "zzz").problem


def test_pass_mark_boundary():
    assert passes(7, 10, 0.7) and not passes(6, 10, 0.7) and not passes(0, 0, 0.7)


def _bank(tmp_path, items, **top):
    path = tmp_path / "bank.json"
    path.write_text(json.dumps({"id": "t", "title": "t", "items": items, **top}))
    return path


CHOICE = {"id": "c1", "kind": "choice", "topic": "DDP", "question": "q?", "choices": ["x", "y"],
          "answer": "A", "explanation": "because"}
NUMERIC = {"id": "n1", "kind": "numeric", "topic": "PP", "question": "p={p} m={m}?",
           "calculator": "pipeline.bubble_ratio_over_ideal",
           "params": {"p": {"choices": [2, 4]}, "m": {"min": 4, "max": 16, "step": 4}},
           "explanation": "{answer:.3g}"}


@pytest.mark.parametrize(
    ("items", "where", "problem"),
    [
        ([CHOICE, CHOICE], "items[1].id", "duplicate item id 'c1'"),
        ([{**CHOICE, "answer": "C"}], "items[0].answer", "answer C but only 2 choices"),
        ([{**CHOICE, "answer": "c"}], "items[0].answer", "does not match"),
        ([{**CHOICE, "choices": ["only one"]}], "items[0].choices", "too short"),
        ([{**NUMERIC, "calculator": "os.system"}], "items[0].calculator", "MODULE one of"),
        ([{**NUMERIC, "calculator": "pipeline._check"}], "items[0].calculator", "no public function '_check'"),
        ([{**NUMERIC, "calculator": "pipeline.nope"}], "items[0].calculator", "no public function 'nope'"),
        ([{**NUMERIC, "params": {**NUMERIC["params"], "stages": {"choices": [8]}}}],
         "items[0].calculator", "unexpected keyword argument 'stages'"),
        ([{**NUMERIC, "question": "p={p} q={q}"}], "items[0].question", "does not format"),
        ([{**NUMERIC, "params": {"p": {"choices": [2]}, "m": {"min": 9, "max": 4}}}],
         "items[0].params.m", "min 9 is greater than max 4"),
    ],
)
def test_bad_banks_name_file_and_field(tmp_path, items, where, problem):
    path = _bank(tmp_path, items)
    with pytest.raises(ConfigError) as info:
        load_bank(path)
    assert info.value.path == path
    assert info.value.where.startswith(where), info.value
    assert problem in info.value.problem


def test_bank_that_is_not_json_names_the_line(tmp_path):
    path = tmp_path / "bank.json"
    path.write_text('{"id": "t",\n "title": \n}')
    with pytest.raises(ConfigError, match=r"bank.json, line 3: not valid JSON"):
        load_bank(path)


def test_a_minimal_valid_bank(tmp_path):
    bank = load_bank(_bank(tmp_path, [CHOICE, NUMERIC]))
    d = draw_attempt(bank, 3, 2)
    numeric = next(x for x in d if x.item.id == "n1")
    assert numeric.params["p"] in (2, 4) and numeric.params["m"] in (4, 8, 12, 16)
    assert bank.item("n1").allows({"p": 2, "m": 12}) is None
    assert "not one this item draws" in bank.item("n1").allows({"p": 2, "m": 10})
    assert "do not match" in bank.item("n1").allows({"p": 2})


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"p": {"choices": [2], "min": 1}, "m": {"choices": [4]}}, "give either choices, or min and max"),
        ({"p": {"min": 1}, "m": {"choices": [4]}}, "give either choices, or min and max"),
        ({"p": {"scale": 2}, "m": {"choices": [4]}}, "give either choices, or min and max"),
    ],
)
def test_bad_param_specs(tmp_path, params, problem):
    with pytest.raises(ConfigError, match=r"items\[0\]\.params\.p: " + problem):
        load_bank(_bank(tmp_path, [{**NUMERIC, "params": params}]))


def test_unknown_kind_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"items\[0\]\.kind: 'essay' is not one of"):
        load_bank(_bank(tmp_path, [{**CHOICE, "kind": "essay"}]))


def test_the_parameter_count_item_grades_every_magnitude_right(bank):
    d = draw_attempt(bank, 0, len(bank.items))
    gpt = next(x for x in d if x.item.id == "gpt-params")
    billions = gpt.expected()
    for given in (f"{billions:.4f}", f"{billions * 1e9:.6e}", f"{round(billions * 1e9)}", f"{billions:.4f}B",
                  f"{billions:.4f} billion"):
        assert grade(gpt, given).correct, given
    assert not grade(gpt, f"{billions * 2:.4f}B").correct
