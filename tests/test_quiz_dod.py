"""The quiz-passed DoD check through pytester: pending before an attempt, done after a passing one,
pending below the pass mark (whatever score the log claims), broken for a malformed log or unknown item."""

import json

import pytest
from dod_support import git_commit_all
from quiz_support import BANK, LOG_REL, attempt_record, make_workspace, write_log

from pytest_distcheck.quiz.bank import load_bank


@pytest.fixture
def quiz_ws(pytester):
    make_workspace(pytester.path, with_check=True)

    def run():
        return pytester.runpytest("-p", "no:cacheprovider", "-m", "local", "checks")

    return run


def test_pending_before_any_attempt(quiz_ws):
    result = quiz_ws()
    result.stdout.fnmatch_lines([
        f"PENDING*quiz-passed*no graded attempt in {LOG_REL} yet (expected one scoring at least the pass mark 70%)",
        "*-> distcheck quiz 35",
    ])
    assert result.ret == 0


def test_done_after_a_passing_attempt_once_the_log_is_committed(quiz_ws, pytester):
    log = write_log(pytester.path, attempt_record(11, wrong=5), attempt_record(12, wrong=3))  # 50%, then 70%
    result = quiz_ws()
    result.stdout.fnmatch_lines([f"PENDING*quiz-passed*{pytester.path} is not in a git repository",
                                 f"*-> git init && git add {LOG_REL} && git commit -m \"DoD evidence\" -- {LOG_REL}"])
    git_commit_all(pytester.path)
    result = quiz_ws()
    result.stdout.fnmatch_lines(["DONE*quiz-passed*evidence checked, self-reported: line 2 re-grades to 7/10 (70%)"])
    # `distcheck quiz` appends the newest attempt: pending until committed, and every line is kept.
    with log.open("a") as fh:
        fh.write(json.dumps(attempt_record(14)) + "\n")
    result = quiz_ws()
    result.stdout.fnmatch_lines([f"PENDING*quiz-passed*{LOG_REL} has uncommitted changes",
                                 f"*-> git add {LOG_REL} && git commit -m \"DoD evidence\" -- {LOG_REL}"])
    assert len(log.read_text().splitlines()) == 3


def test_pending_below_the_pass_mark_even_if_the_log_claims_more(quiz_ws, pytester):
    forged = attempt_record(13, wrong=4)
    forged["reported_score"] = 1.0
    write_log(pytester.path, forged)
    result = quiz_ws()
    result.stdout.fnmatch_lines([
        f"PENDING*quiz-passed*1 graded attempt in {LOG_REL}; the best, line 1 (seed 13), re-grades to 6/10 (60%),"
        " below the pass mark 70%",
        "*-> distcheck quiz 35",
    ])


def test_broken_for_a_malformed_line(quiz_ws, pytester):
    write_log(pytester.path, attempt_record(14), "{oops")
    result = quiz_ws()
    result.stdout.fnmatch_lines([f"BROKEN*quiz-passed*{LOG_REL}, line 2: not valid JSON*"])


def test_broken_for_an_unknown_item(quiz_ws, pytester):
    rec = attempt_record(15)
    rec["answers"][4]["item"] = "quantum-parallelism"
    write_log(pytester.path, json.dumps(rec))
    result = quiz_ws()
    result.stdout.fnmatch_lines([
        f"BROKEN*quiz-passed*{LOG_REL}, line 1, answers[[]4[]].item: unknown item 'quantum-parallelism'*"
    ])


def test_broken_without_a_quiz_section(quiz_ws, pytester):
    toml = pytester.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().split("[quiz]")[0])
    result = quiz_ws()
    result.stdout.fnmatch_lines(["BROKEN*quiz-passed*distcheck.toml, quiz: no [[]quiz[]] section*"])


def test_broken_reason_says_to_fix_the_line_by_hand(quiz_ws, pytester):
    write_log(pytester.path, attempt_record(14), attempt_record(16), "not json")
    result = quiz_ws()
    result.stdout.fnmatch_lines([f"BROKEN*quiz-passed*{LOG_REL}, line 3: not valid JSON*; fix or remove that line"
                                 " by hand*"])


def test_broken_for_params_the_seed_does_not_draw(quiz_ws, pytester):
    rec = attempt_record(17)
    i, ans = next((i, a) for i, a in enumerate(rec["answers"]) if a["params"])
    # another value the item can draw, so only the replay of the seed can tell
    item = load_bank(BANK).item(ans["item"])
    name, value = next((p.name, v) for p in item.params for v in (p.choices or range(p.low, p.high + 1, p.step))
                       if v != ans["params"][p.name])
    ans["params"][name] = value
    write_log(pytester.path, attempt_record(16), rec)
    result = quiz_ws()
    result.stdout.fnmatch_lines([
        f"BROKEN*quiz-passed*{LOG_REL}, line 2, answers[[]{i}[]].params: attempt 2 (line 2): item "
        f"'{ans['item']}' params * differ from seed 17's draw *; fix or remove that line by hand*"
    ])


def test_an_attempt_dated_in_the_future_is_broken(quiz_ws, pytester):
    """Red-team A14: a passing attempt typed with a 2031 finish time."""
    rec = attempt_record(12)
    rec["started"], rec["finished"] = "2031-05-01T00:00:00+00:00", "2031-05-01T00:05:00+00:00"
    write_log(pytester.path, rec)
    git_commit_all(pytester.path)
    quiz_ws().stdout.fnmatch_lines([f"BROKEN*quiz-passed*{LOG_REL} line 1: dated in the future "
                                    "(finished 2031-05-01T00:05:00+00:00)*"])
