"""Re-grade every logged attempt against the bank; the DoD check trusts no stored score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem
from pytest_distcheck.quiz.grade import grade
from pytest_distcheck.quiz.log import read_attempts


@dataclass(frozen=True)
class AttemptScore:
    """One logged attempt, re-graded: the log line, seed, finish time, right answers and item count."""

    line: int
    seed: int
    finished: str
    correct: int
    total: int

    @property
    def score(self) -> float:
        """correct / total, in [0, 1]."""
        return self.correct / self.total


def regrade_log(bank: Bank, log_path: Path, items_per_attempt: int) -> list[AttemptScore]:
    """Re-grade each attempt of the log at ``log_path`` with ``bank``; [] when the log is absent or empty.

    Raises:
        ConfigError: naming the log, ``line N`` and the field, when a line is malformed (see
            :func:`pytest_distcheck.quiz.log.read_attempts`), is for another bank, has a number of
            answers other than ``items_per_attempt``, repeats an item, names an item the bank does not
            have, or gives parameters the item could not have drawn.
    """
    scores = []
    for line, rec in read_attempts(log_path):
        if rec["bank"] != bank.id:
            raise ConfigError(log_path, f"line {line}, bank",
                              f"attempt is for bank {rec['bank']!r}, expected {bank.id!r} ({bank.path})")
        answers = rec["answers"]
        if len(answers) != items_per_attempt:
            raise ConfigError(log_path, f"line {line}, answers",
                              f"{len(answers)} answers, an attempt has {items_per_attempt}")
        correct, seen = 0, set()
        for i, ans in enumerate(answers):
            where = f"line {line}, answers[{i}]"
            item_id = ans["item"]
            if not bank.has(item_id):
                raise ConfigError(log_path, f"{where}.item", f"unknown item {item_id!r}: not in {bank.path}")
            if item_id in seen:
                raise ConfigError(log_path, f"{where}.item", f"item {item_id!r} appears twice in one attempt")
            seen.add(item_id)
            item = bank.item(item_id)
            problem = ("choice items take no params" if ans["params"] else None) if isinstance(
                item, ChoiceItem) else item.allows(ans["params"])
            if problem:
                raise ConfigError(log_path, f"{where}.params", f"item {item_id!r}: {problem}")
            correct += grade(DrawnItem(item, dict(ans["params"])), ans["given"]).correct
        scores.append(AttemptScore(line, rec["seed"], rec["finished"], correct, len(answers)))
    return scores
