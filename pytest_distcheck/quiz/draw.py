"""Draw an attempt: which items, and each numeric item's parameters, from one seed (so it replays)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.quiz.bank import LETTERS, Bank, ChoiceItem, Item, Number, NumericItem, unit_label

A_NUMBER = N_("(a number, {tolerance})")
A_NUMBER_IN = N_("(a number in {unit}, {tolerance})")
ATTEMPT_SIZE = N_("an attempt of {n} items needs 1..{total} (the bank {path} has {total})")


@dataclass(frozen=True)
class DrawnItem:
    """An item as asked in one attempt: the bank item and its drawn parameters (empty for choice items)."""

    item: Item
    params: dict[str, Number] = field(default_factory=dict)

    def prompt(self) -> str:
        """The question as shown: the template filled in, then the choices or the unit and tolerance."""
        item = self.item
        if isinstance(item, ChoiceItem):
            lines = [item.question] + [f"  {LETTERS[i]}) {c}" for i, c in enumerate(item.choices)]
            return "\n".join(lines)
        hint = (_(A_NUMBER_IN).format(unit=unit_label(item.unit), tolerance=item.tolerance_text()) if item.unit
                else _(A_NUMBER).format(tolerance=item.tolerance_text()))
        return f"{item.question.format(**self.params)}\n  {hint}"

    def expected(self) -> float | str:
        """The right answer: a letter, or a number in the item's unit."""
        if isinstance(self.item, ChoiceItem):
            return self.item.answer
        return self.item.expected(self.params)


def draw_params(item: NumericItem, rng: random.Random) -> dict[str, Number]:
    """Parameters for ``item``, in the order the bank lists them."""
    return {p.name: p.draw(rng) for p in item.params}


def draw_attempt(bank: Bank, seed: int, n_items: int) -> list[DrawnItem]:
    """``n_items`` distinct items of ``bank`` in random order, with their parameters, from ``seed``: one item of
    each of the bank's goals first (of as many goals as ``n_items`` allows, chosen at random when fewer), then
    the rest at random from the remaining items.

    The same bank file and seed give the same attempt.

    Raises:
        ValueError: n_items < 1 or more than the bank holds.
    """
    if not 1 <= n_items <= len(bank.items):
        raise ValueError(_(ATTEMPT_SIZE).format(n=n_items, total=len(bank.items), path=bank.path))
    rng = random.Random(seed)
    goals = list(bank.goals)
    rng.shuffle(goals)
    chosen = [rng.choice([it for it in bank.items if it.goal == goal]) for goal in goals[:n_items]]
    taken = {it.id for it in chosen}
    chosen += rng.sample([it for it in bank.items if it.id not in taken], n_items - len(chosen))
    if goals:  # the goals' items first would give their places away
        rng.shuffle(chosen)
    return [DrawnItem(it, draw_params(it, rng) if isinstance(it, NumericItem) else {}) for it in chosen]
