"""Re-grade every logged attempt against the bank; the DoD check trusts no stored score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_distcheck.quiz.bank import Bank, ChoiceItem
from pytest_distcheck.quiz.draw import DrawnItem, draw_attempt
from pytest_distcheck.quiz.grade import grade
from pytest_distcheck.quiz.log import bad_line, read_attempts


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


def _check_replay(bank: Bank, log_path: Path, number: int, line: int, rec: dict[str, Any]) -> None:
    """Raise when attempt ``number`` (log ``line``) logs items or parameters its seed does not draw.

    The draw is a pure function of bank and seed (:func:`draw_attempt`), so a logged attempt that differs
    was edited, or was drawn from another version of the bank.
    """
    seed, answers = rec["seed"], rec["answers"]
    head = f"attempt {number} (line {line})"
    for i, (ans, d) in enumerate(zip(answers, draw_attempt(bank, seed, len(answers)), strict=True)):
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
            to fix or remove the line by hand.
    """
    scores = []
    for number, (line, rec) in enumerate(read_attempts(log_path), start=1):
        if rec["bank"] != bank.id:
            raise bad_line(log_path, f"line {line}, bank",
                           f"attempt is for bank {rec['bank']!r}, expected {bank.id!r} ({bank.path})")
        answers = rec["answers"]
        if len(answers) != items_per_attempt:
            raise bad_line(log_path, f"line {line}, answers",
                           f"{len(answers)} answers, an attempt has {items_per_attempt}")
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
        _check_replay(bank, log_path, number, line, rec)
        for ans in answers:
            item = bank.item(ans["item"])
            correct += grade(DrawnItem(item, dict(ans["params"])), ans["given"]).correct
        scores.append(AttemptScore(line, rec["seed"], rec["finished"], correct, len(answers)))
    return scores
