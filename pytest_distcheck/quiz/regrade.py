"""Re-grade every logged attempt against the bank; the DoD check trusts no stored score.

Only a graded, complete attempt on a seed not seen earlier in the log counts: practice
attempts chose their seed (``--seed``), so their draw could be previewed; abandoned ones are partial;
a seed that appears twice was seen before it was graded. An attempt whose answers took less than
:data:`MIN_SECONDS_PER_ITEM` per item on average is flagged as implausibly fast (counted, but said so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import grade
from pytest_distcheck.quiz.log import bad_line, read_attempts

# Reading a question and typing an answer takes longer than this; the numeric items need arithmetic.
# A flag for a person to look at, not a verdict (a fast expert exists; a pasted key also looks like this).
MIN_SECONDS_PER_ITEM = 5.0


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


def _check_replay(bank: Bank, log_path: Path, number: int, line: int, rec: dict[str, Any], n_items: int) -> None:
    """Raise when attempt ``number`` (log ``line``) logs items or parameters its seed does not draw.

    The draw is a pure function of bank and seed (:func:`draw_attempt`), so a logged attempt that differs
    was edited, or was drawn from another version of the bank. An abandoned attempt is a prefix of the
    full draw (``random.sample`` draws differently for another count, so the full draw is replayed).
    """
    seed, answers = rec["seed"], rec["answers"]
    head = f"attempt {number} (line {line})"
    for i, (ans, d) in enumerate(zip(answers, draw_attempt(bank, seed, n_items)[:len(answers)], strict=True)):
        where = f"line {line}, answers[{i}]"
        if ans["item"] != d.item.id:
            raise bad_line(log_path, f"{where}.item",
                           f"{head}: item {ans['item']!r} differs from seed {seed}'s draw ({d.item.id!r})")
        if ans["params"] != d.params:
            raise bad_line(log_path, f"{where}.params",
                           f"{head}: item {d.item.id!r} params {ans['params']} differ from seed {seed}'s "
                           f"draw {d.params}")


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
            raise bad_line(log_path, f"line {line}, bank",
                           f"attempt is for bank {rec['bank']!r}, expected {bank.id!r} ({bank.path})")
        answers = rec["answers"]
        complete = rec["status"] == "complete"
        if len(answers) != items_per_attempt if complete else len(answers) > items_per_attempt:
            raise bad_line(log_path, f"line {line}, answers",
                           f"{len(answers)} answers, {'an' if complete else 'an abandoned'} attempt has "
                           f"{'' if complete else 'at most '}{items_per_attempt}")
        correct, seen = 0, set()
        for i, ans in enumerate(answers):
            where = f"line {line}, answers[{i}]"
            item_id = ans["item"]
            if not bank.has(item_id):
                raise bad_line(log_path, f"{where}.item", f"unknown item {item_id!r}: not in {bank.path}")
            if item_id in seen:
                raise bad_line(log_path, f"{where}.item", f"item {item_id!r} appears twice in one attempt")
            seen.add(item_id)
            item = bank.item(item_id)
            problem = ("choice items take no params" if ans["params"] else None) if isinstance(
                item, ChoiceItem) else item.allows(ans["params"])
            if problem:
                raise bad_line(log_path, f"{where}.params", f"item {item_id!r}: {problem}")
        _check_replay(bank, log_path, number, line, rec, items_per_attempt)
        for ans in answers:
            item = bank.item(ans["item"])
            correct += grade(DrawnItem(item, dict(ans["params"])), ans["given"]).correct
        seed = rec["seed"]
        if rec["mode"] != "graded":
            why = "practice (--seed chosen by the learner)"
        elif not complete:
            why = f"abandoned after {len(answers)} of {items_per_attempt} items"
        elif seed in first_line:
            why = f"seed {seed} already appears on line {first_line[seed]}"
        else:
            why = ""
        first_line.setdefault(seed, line)
        scores.append(AttemptScore(line, seed, rec["finished"], correct, items_per_attempt, why,
                                   sum(a["seconds"] for a in answers)))
    return scores
