"""Re-grade every logged attempt against the bank; the DoD check trusts no stored score.

Only a graded, complete attempt on a seed not seen earlier in the log counts: practice
attempts chose their seed (``--seed``), so their draw could be previewed; abandoned ones are partial;
a seed that appears twice was seen before it was graded. An attempt whose answers took less than
:data:`MIN_SECONDS_PER_ITEM` per item on average is noted as fast for a grader (counted, and said so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import at_line
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import grade
from pytest_distcheck.quiz.log import bad_line, read_attempts

# Reading a question and typing an answer takes longer than this; the numeric items need arithmetic.
# A flag for a person to look at, not a verdict (a fast expert exists; a pasted key also looks like this).
MIN_SECONDS_PER_ITEM = 5.0

ATTEMPT_HEAD = N_("attempt {number} (line {line})")
NOT_SEED_ITEM = N_("{head}: item {given!r} differs from seed {seed}'s draw ({drawn!r})")
NOT_SEED_PARAMS = N_("{head}: item {item!r} params {given} differ from seed {seed}'s draw {drawn}")
OTHER_BANK = N_("attempt is for bank {given!r}, expected {bank!r} ({path})")
UNKNOWN_ITEM = N_("unknown item {item!r}: not in {path}")
ITEM_TWICE = N_("item {item!r} appears twice in one attempt")
CHOICE_PARAMS = N_("choice items take no params")
ITEM_PROBLEM = N_("item {item!r}: {problem}")
# Why an attempt does not count (AttemptScore.not_counted).
WHY_PRACTICE = N_("practice (--seed chosen by the learner)")
WHY_ABANDONED = N_("abandoned after {n} of {total} items")
WHY_SEED_SEEN = N_("seed {seed} already appears on line {line}")


@dataclass(frozen=True)
class AttemptScore:
    """One logged attempt, re-graded.

    Attributes:
        line, seed, finished: the log line number, the draw's seed, the finish time (ISO 8601).
        correct, total: right answers; items per attempt (an abandoned attempt's missing items are wrong).
        not_counted: why it does not count for the DoD ("" when it counts): practice, abandoned, seed seen.
        seconds: total answer time in seconds (sum of the logged per-item times).
    """

    line: int
    seed: int
    finished: str
    correct: int
    total: int
    not_counted: str = ""
    seconds: float = field(default=0.0)

    @property
    def counted(self) -> bool:
        """Whether this attempt may count for the DoD (graded, complete, on a fresh seed)."""
        return not self.not_counted

    @property
    def too_fast(self) -> bool:
        """Whether it was answered in under :data:`MIN_SECONDS_PER_ITEM` per item on average."""
        return self.seconds < MIN_SECONDS_PER_ITEM * self.total

    @property
    def score(self) -> float:
        """correct / total, in [0, 1]."""
        return self.correct / self.total


def answer_count(n: int, total: int, complete: bool) -> str:
    """What is wrong with an attempt of ``n`` answers when a complete one has ``total`` (an abandoned one at
    most ``total``)."""
    if complete:
        return ngettext("{n} answer, an attempt has {total}", "{n} answers, an attempt has {total}", n).format(
            n=n, total=total)
    return ngettext("{n} answer, an abandoned attempt has at most {total}",
                    "{n} answers, an abandoned attempt has at most {total}", n).format(n=n, total=total)


def _check_replay(bank: Bank, log_path: Path, number: int, line: int, rec: dict[str, Any], n_items: int) -> None:
    """Raise when attempt ``number`` (log ``line``) logs items or parameters its seed does not draw.

    The draw is a pure function of bank and seed (:func:`draw_attempt`), so a logged attempt that differs
    was edited, or was drawn from another version of the bank. An abandoned attempt is a prefix of the
    full draw (``random.sample`` draws differently for another count, so the full draw is replayed).
    """
    seed, answers = rec["seed"], rec["answers"]
    head = _(ATTEMPT_HEAD).format(number=number, line=line)
    for i, (ans, d) in enumerate(zip(answers, draw_attempt(bank, seed, n_items)[:len(answers)], strict=True)):
        if ans["item"] != d.item.id:
            raise bad_line(log_path, at_line(line, f"answers[{i}].item"), _(NOT_SEED_ITEM).format(
                head=head, given=ans["item"], seed=seed, drawn=d.item.id))
        if ans["params"] != d.params:
            raise bad_line(log_path, at_line(line, f"answers[{i}].params"), _(NOT_SEED_PARAMS).format(
                head=head, item=d.item.id, given=ans["params"], seed=seed, drawn=d.params))


def regrade_log(bank: Bank, log_path: Path, items_per_attempt: int) -> list[AttemptScore]:
    """Re-grade each attempt of the log at ``log_path`` with ``bank``; [] when the log is absent or empty.

    Raises:
        ConfigError: naming the log, ``line N`` and the field, when a line is malformed (see
            :func:`pytest_distcheck.quiz.log.read_attempts`), is for another bank, has a number of
            answers other than ``items_per_attempt``, repeats an item, names an item the bank does not
            have, gives parameters the item could not have drawn, or logs items or parameters other than
            those its seed draws (the attempt is replayed with :func:`draw_attempt`); the message says
            to fix or remove the line by hand. A complete attempt has ``items_per_attempt`` answers, an
            abandoned one 1 to that many.
    """
    scores = []
    first_line: dict[int, int] = {}  # seed -> the first log line that used it
    for number, (line, rec) in enumerate(read_attempts(log_path), start=1):
        if rec["bank"] != bank.id:
            raise bad_line(log_path, at_line(line, "bank"),
                           _(OTHER_BANK).format(given=rec["bank"], bank=bank.id, path=bank.path))
        answers = rec["answers"]
        complete = rec["status"] == "complete"
        if len(answers) != items_per_attempt if complete else len(answers) > items_per_attempt:
            raise bad_line(log_path, at_line(line, "answers"), answer_count(len(answers), items_per_attempt, complete))
        correct, seen = 0, set()
        for i, ans in enumerate(answers):
            item_id = ans["item"]
            if not bank.has(item_id):
                raise bad_line(log_path, at_line(line, f"answers[{i}].item"),
                               _(UNKNOWN_ITEM).format(item=item_id, path=bank.path))
            if item_id in seen:
                raise bad_line(log_path, at_line(line, f"answers[{i}].item"), _(ITEM_TWICE).format(item=item_id))
            seen.add(item_id)
            item = bank.item(item_id)
            problem = (_(CHOICE_PARAMS) if ans["params"] else None) if isinstance(
                item, ChoiceItem) else item.allows(ans["params"])
            if problem:
                raise bad_line(log_path, at_line(line, f"answers[{i}].params"),
                               _(ITEM_PROBLEM).format(item=item_id, problem=problem))
        _check_replay(bank, log_path, number, line, rec, items_per_attempt)
        for ans in answers:
            item = bank.item(ans["item"])
            correct += grade(DrawnItem(item, dict(ans["params"])), ans["given"]).correct
        seed = rec["seed"]
        if rec["mode"] != "graded":
            why = _(WHY_PRACTICE)
        elif not complete:
            why = _(WHY_ABANDONED).format(n=len(answers), total=items_per_attempt)
        elif seed in first_line:
            why = _(WHY_SEED_SEEN).format(seed=seed, line=first_line[seed])
        else:
            why = ""
        first_line.setdefault(seed, line)
        scores.append(AttemptScore(line, seed, rec["finished"], correct, items_per_attempt, why,
                                   sum(a["seconds"] for a in answers)))
    return scores
