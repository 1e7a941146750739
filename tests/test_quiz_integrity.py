"""Quiz integrity: keyed answers only after the attempt is logged; `--seed` is practice and never counts;
abandoned attempts are logged as abandoned; answer times are recorded and a too-fast attempt is flagged.

The rehearsal of issue 13 (preview `--seed 1` by skipping every item and ending the input, then
`--seed 1` again with the answers seen) drives the real `distcheck quiz` through a terminal.
"""

import io
import json

import pytest
from dod_support import git_commit_all
from quiz_support import BANK, LOG_REL, attempt_record, make_workspace, right_answer, spawn, write_log

from pytest_distcheck.phase35.messages import TOO_FAST
from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.draw import draw_attempt
from pytest_distcheck.quiz.regrade import regrade_log

pexpect = pytest.importorskip("pexpect")


def _spawn(root, *args):
    """The quiz in a terminal, with everything it printed kept in ``child.seen``."""
    child = spawn(root, *args)
    child.seen = io.StringIO()
    child.logfile_read = child.seen
    return child


def _keyed_lines(text) -> list[str]:
    text = text.getvalue() if isinstance(text, io.StringIO) else text
    return [line for line in text.splitlines() if "the answer is" in line or line.lstrip().startswith("why:")]


def test_a_rehearsed_quiz_does_not_count(tmp_path):
    make_workspace(tmp_path)
    drawn = draw_attempt(load_bank(tmp_path / "checks/quiz/35.json"), 1, 10)
    log = tmp_path / LOG_REL
    # 1. preview: skip every item, then end the input
    child = _spawn(tmp_path, "35", "--seed", "1")
    for _ in range(9):
        child.expect("answer> ")
        child.sendline("skip")
    child.expect("answer> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert _keyed_lines(child.seen) == [], child.seen.getvalue()  # no keyed answer or explanation printed
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(r["mode"], r["status"], len(r["answers"])) for r in lines] == [("practice", "abandoned", 9)]
    # 2. the same seed again, every answer right: scored, explained after logging, and never counted
    child = _spawn(tmp_path, "35", "--seed", "1")
    for d in drawn:
        child.expect("answer> ")
        child.sendline(right_answer(d))
    child.expect(r"score 10/10 \(100%\)")
    child.expect(pexpect.EOF)
    child.close()
    assert "practice" in child.seen.getvalue() and "commit" not in child.seen.getvalue()
    record = json.loads(log.read_text().splitlines()[1])
    assert (record["mode"], record["status"]) == ("practice", "complete")
    assert all(a["seconds"] >= 0 for a in record["answers"])
    (first, second) = regrade_log(load_bank(BANK), log, 10)
    assert second.correct == 10 and not second.counted and "practice" in second.not_counted


def test_answers_are_shown_only_after_the_attempt_is_logged(tmp_path):
    make_workspace(tmp_path)
    child = _spawn(tmp_path, "35")
    child.expect(r"10 items, graded attempt")
    for _ in range(10):
        child.expect("answer> ")
        child.sendline("skip")
    child.expect(pexpect.EOF)
    child.close()
    before, logged, after = child.seen.getvalue().partition(f"attempt appended to {LOG_REL} (line 1)")
    assert logged and _keyed_lines(before) == [], before
    assert len(_keyed_lines(after)) >= 10  # feedback after the log line
    (record,) = [json.loads(x) for x in (tmp_path / LOG_REL).read_text().splitlines()]
    assert (record["mode"], record["status"]) == ("graded", "complete")


def test_ctrl_c_after_an_answer_logs_the_attempt_as_abandoned(tmp_path):
    make_workspace(tmp_path)
    child = _spawn(tmp_path, "35")
    child.expect("answer> ")
    child.sendline("skip")  # accepted for any item (the graded draw is random)
    child.expect("answer> ")
    child.sendintr()
    child.expect(rf"interrupted; attempt logged as abandoned in {LOG_REL} \(line 1\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and _keyed_lines(child.seen) == []
    (record,) = [json.loads(x) for x in (tmp_path / LOG_REL).read_text().splitlines()]
    assert (record["mode"], record["status"], len(record["answers"])) == ("graded", "abandoned", 1)


def _graded(seed, wrong=0, seconds=30.0, **changes):
    rec = attempt_record(seed, wrong=wrong, seconds=seconds)
    rec.update(changes)
    return rec


def test_only_kit_seeded_complete_attempts_count(tmp_path):
    bank = load_bank(BANK)
    practice = _graded(21, mode="practice")
    abandoned = _graded(22, status="abandoned")
    abandoned["answers"] = abandoned["answers"][:4]
    reused = _graded(21)  # a graded attempt on a seed already seen in the log (here: practised)
    good = _graded(23, wrong=2)
    scores = regrade_log(bank, write_log(tmp_path, practice, abandoned, reused, good), 10)
    assert [(s.line, s.correct, s.counted) for s in scores] == [(1, 10, False), (2, 4, False), (3, 10, False),
                                                                (4, 8, True)]
    assert "practice" in scores[0].not_counted
    assert "abandoned" in scores[1].not_counted
    assert "seed 21 already appears on line 1" in scores[2].not_counted


def test_an_implausibly_fast_attempt_is_flagged(tmp_path):
    scores = regrade_log(load_bank(BANK), write_log(tmp_path, _graded(31, seconds=1.0), _graded(32)), 10)
    assert [s.too_fast for s in scores] == [True, False]


def test_a_passing_practice_attempt_leaves_the_item_pending(pytester):
    make_workspace(pytester.path, with_check=True)
    write_log(pytester.path, _graded(41, mode="practice"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "local", "checks")
    result.stdout.fnmatch_lines(["PENDING*quiz-passed*no graded attempt in*1 not counted (line 1: practice*"])


def test_a_fast_passing_attempt_is_done_and_said_fast_in_the_table(pytester):
    make_workspace(pytester.path, with_check=True)
    write_log(pytester.path, _graded(42, seconds=1.0))
    git_commit_all(pytester.path)
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "local", "checks", "--dod-json", "dod.json")
    result.stdout.fnmatch_lines(["DONE*quiz-passed*self-reported*" + TOO_FAST.partition("(")[0] + "*"])
    item = next(it for it in json.loads((pytester.path / "dod.json").read_text())["items"] if it["id"] == "quiz-passed")
    assert item["flags"] == ["self-reported", "fast-quiz"]  # R7: in the report, for a grader; not a failure
    assert [e["path"] for e in item["evidence"]] == ["experiments/quiz/35-attempts.jsonl"]
