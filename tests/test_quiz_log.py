"""The append-only quiz log and the re-grading the DoD check relies on (never a stored score)."""

import json

import pytest
from quiz_support import BANK, attempt_record, write_log

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.log import CUT_SHORT, append_attempt, read_attempts
from pytest_distcheck.quiz.regrade import regrade_log


@pytest.fixture(scope="module")
def bank():
    return load_bank(BANK)


def test_append_only_one_line_per_attempt(tmp_path):
    path = tmp_path / "sub" / "log.jsonl"
    assert read_attempts(path) == []
    assert append_attempt(path, attempt_record(1)) == 1
    first = path.read_bytes()
    assert append_attempt(path, attempt_record(2, wrong=5)) == 2
    assert path.read_bytes().startswith(first)  # earlier lines untouched
    lines = read_attempts(path)
    assert [n for n, _ in lines] == [1, 2]
    assert [r["seed"] for _, r in lines] == [1, 2]


def test_append_refuses_an_incomplete_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"bank": "35"')
    with pytest.raises(ConfigError, match=r"log.jsonl, line 1: last line is incomplete"):
        append_attempt(path, attempt_record(1))
    assert path.read_text() == '{"bank": "35"'


def test_a_byte_order_mark_before_the_first_attempt_is_skipped(tmp_path, bank):
    path = write_log(tmp_path, attempt_record(5), attempt_record(6, wrong=4))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # saved again by an editor that adds a BOM
    assert [(n, r["seed"]) for n, r in read_attempts(path)] == [(1, 5), (2, 6)]
    assert [s.correct for s in regrade_log(bank, path, 10)] == [10, 6]


@pytest.mark.parametrize("cut", [300, 40, 1])
def test_a_line_cut_short_is_said_to_be(tmp_path, cut):
    whole = json.dumps(attempt_record(3))
    path = write_log(tmp_path, attempt_record(2), whole[:cut], attempt_record(4))
    with pytest.raises(ConfigError) as info:
        read_attempts(path)
    assert info.value.where == "line 2" and info.value.problem.startswith(CUT_SHORT.split("{")[0]), info.value


def test_regrade_scores_each_attempt(tmp_path, bank):
    path = write_log(tmp_path, attempt_record(5), attempt_record(6, wrong=4), "")
    scores = regrade_log(bank, path, 10)
    assert [(s.line, s.seed, s.correct, s.total) for s in scores] == [(1, 5, 10, 10), (2, 6, 6, 10)]
    assert scores[1].score == pytest.approx(0.6)


def test_a_stored_score_is_not_trusted(tmp_path, bank):
    forged = attempt_record(7, wrong=10)
    forged["reported_score"] = 1.0
    assert regrade_log(bank, write_log(tmp_path, forged), 10)[0].correct == 0


def test_a_wrong_given_answer_is_regraded_wrong(tmp_path, bank):
    rec = attempt_record(8)
    rec["answers"][0]["given"] = "not an answer"
    rec["answers"][1]["given"] = "Z"
    assert regrade_log(bank, write_log(tmp_path, rec), 10)[0].correct == 8


def _with(rec, index, **changes):
    rec["answers"][index] = {**rec["answers"][index], **changes}
    return rec


def _numeric_index(rec):
    return next(i for i, a in enumerate(rec["answers"]) if a["params"])


@pytest.mark.parametrize(
    ("make", "where", "problem"),
    [
        (lambda: "{not json", "line 2", "not valid JSON"),
        (lambda: {**attempt_record(1), "seed": "one"}, "line 2, seed", "is not of type 'integer'"),
        (lambda: {k: v for k, v in attempt_record(1).items() if k != "answers"}, "line 2",
         "'answers' is a required property"),
        (lambda: _with(attempt_record(1), 3, item="no-such-item"), "line 2, answers[3].item",
         "unknown item 'no-such-item'"),
        (lambda: _with(attempt_record(1), 3, item=attempt_record(1)["answers"][0]["item"]),
         "line 2, answers[3].item", "appears twice"),
        (lambda: {**attempt_record(1), "bank": "36"}, "line 2, bank", "attempt is for bank '36'"),
        (lambda: {**attempt_record(1), "answers": attempt_record(1)["answers"][:3]}, "line 2, answers",
         "3 answers, an attempt has 10"),
        (lambda: (lambda r: _with(r, _numeric_index(r), params={"bogus": 1}))(attempt_record(1)),
         "line 2, answers[", "do not match"),
        (lambda: (lambda r: _with(r, _numeric_index(r),
                                  params={k: 12345 for k in r["answers"][_numeric_index(r)]["params"]}))(
            attempt_record(1)), "line 2, answers[", "is not one this item draws"),
        (lambda: {**attempt_record(1), "seed": 2}, "line 2, answers[0].item",
         "attempt 2 (line 2): item "),
        (lambda: (lambda r: {**r, "answers": r["answers"][1:] + r["answers"][:1]})(attempt_record(1)),
         "line 2, answers[0].item", "differs from seed 1's draw"),
    ],
)
def test_malformed_logs_name_file_line_and_field(tmp_path, bank, make, where, problem):
    bad = make()
    path = write_log(tmp_path, attempt_record(9), bad if isinstance(bad, str) else json.dumps(bad))
    with pytest.raises(ConfigError) as info:
        regrade_log(bank, path, 10)
    assert info.value.path == path
    assert info.value.where.startswith(where), info.value
    assert problem in info.value.problem, info.value
    assert info.value.problem.endswith("fix or remove that line by hand (the quiz only appends to its log, it never "
                                       "rewrites it)")
