"""`distcheck quiz 35` driven through a pseudo-terminal as a learner would (pexpect)."""

import json

import pytest
from quiz_support import LOG_REL, attempt_record, make_workspace, right_answer, spawn, write_log

from pytest_distcheck.quiz.bank import load_bank
from pytest_distcheck.quiz.draw import draw_attempt
from pytest_distcheck.quiz.regrade import regrade_log

pexpect = pytest.importorskip("pexpect")

def forgiving(drawn, i: int) -> str:
    """The right answer in the formats a learner might type: lower-case letters, %, with the unit."""
    answer = right_answer(drawn)
    if isinstance(drawn.expected(), str):
        return answer.lower() if i % 2 else answer
    value = drawn.expected()
    if drawn.item.unit == "" and value < 1 and i % 2:
        return f"{value * 100:.6g}%"
    return f"{answer} {drawn.item.unit}".strip()


def test_a_full_passing_attempt_through_a_terminal(tmp_path):
    make_workspace(tmp_path)
    child = spawn(tmp_path, "35")
    child.expect(r"10 items, graded attempt \(seed (\d+), drawn by the kit\)")
    seed = int(child.match.group(1))
    drawn = draw_attempt(load_bank(tmp_path / "checks/quiz/35.json"), seed, 10)
    for i, d in enumerate(drawn):
        child.expect(rf"\[{i + 1}/10\] \({d.item.topic}\)")
        child.expect("answer> ")
        if i == 0:  # an unreadable answer is asked again, not graded
            child.sendline("no idea")
            child.expect(r"try again \('skip' to leave it unanswered\)")
            child.expect("answer> ")
        child.sendline(forgiving(d, i) if i < 9 else "skip")
    child.expect(rf"attempt appended to {LOG_REL} \(line 1\)")
    for i, d in enumerate(drawn):  # feedback only now, after the log line
        child.expect(rf"\[{i + 1}/10\] {d.item.id}\r\n  (correct\.|wrong)")
        assert child.match.group(1) == ("correct." if i < 9 else "wrong"), (d.item.id, d.params, forgiving(d, i))
        child.expect("why: ")
    child.expect(r"score 9/10 \(90%\): passed \(pass mark 70%\)")
    # tmp_path is in no repository: git init first (pytest_distcheck.committed.commit_command)
    child.expect(rf"passed: commit the log so the CI gate sees it: git init && git add {LOG_REL} && git commit "
                 rf'-m "quiz 35: passing attempt" -- {LOG_REL}')
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    log = tmp_path / LOG_REL
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["seed"] == seed and [a["item"] for a in record["answers"]] == [d.item.id for d in drawn]
    assert record["answers"][9]["given"] == ""
    bank = load_bank(tmp_path / "checks/quiz/35.json")
    assert regrade_log(bank, log, 10)[0].correct == 9


def test_ctrl_c_before_the_first_answer_leaves_the_log_unchanged(tmp_path):
    make_workspace(tmp_path)
    log = write_log(tmp_path, attempt_record(3, wrong=6))
    before = log.read_bytes()
    child = spawn(tmp_path, "35", "--seed", "99")
    child.expect("answer> ")
    child.sendintr()
    child.expect(rf"interrupted; nothing written to {LOG_REL}")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert log.read_bytes() == before


def test_end_of_input_leaves_no_log(tmp_path):
    make_workspace(tmp_path)
    child = spawn(tmp_path, "35", "--seed", "5")
    child.expect("answer> ")
    child.sendeof()
    child.expect(rf"input ended; nothing written to {LOG_REL}")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert not (tmp_path / LOG_REL).exists()


def test_an_unknown_quiz_id_is_one_line_error(tmp_path):
    make_workspace(tmp_path)
    child = spawn(tmp_path, "36")
    child.expect(r"distcheck quiz: no quiz '36': checks/distcheck.toml \[quiz\] has bank '35'")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2


@pytest.mark.parametrize(("bad", "line", "problem"), [
    ("not json\n", 2, "not valid JSON"),
    (json.dumps(attempt_record(4)), 2, "last line is incomplete (no newline)"),  # valid, but no newline
])
def test_a_bad_log_line_is_refused_before_any_question(tmp_path, bad, line, problem):
    make_workspace(tmp_path)
    log = write_log(tmp_path, attempt_record(3, wrong=6))
    log.write_text(log.read_text() + bad)
    before = log.read_bytes()
    child = spawn(tmp_path, "35", "--seed", "5")
    child.expect(pexpect.EOF)
    child.close()
    out = child.before.strip()
    assert "answer> " not in out and len(out.splitlines()) == 1, out
    assert out.startswith("distcheck quiz: ") and f"{LOG_REL}, line {line}: {problem}" in out, out
    assert out.endswith("fix or remove that line by hand (the quiz only appends to its log, it never rewrites it)")
    assert child.exitstatus == 2
    assert log.read_bytes() == before


def test_a_failed_attempt_is_logged_without_the_commit_hint(tmp_path):
    make_workspace(tmp_path)
    child = spawn(tmp_path, "35", "--seed", "6")
    for _ in range(10):
        child.expect("answer> ")
        child.sendline("skip")
    child.expect(r"score 0/10 \(0%\): not passed")
    child.expect(pexpect.EOF)
    child.close()
    assert "commit" not in child.before
    assert child.exitstatus == 0 and (tmp_path / LOG_REL).is_file()
