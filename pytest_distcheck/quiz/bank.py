"""Load and validate a quiz bank (JSON, schema ``quiz-bank.schema.json``), then check what a schema cannot.

Item kinds:
    choice: a question, 2-6 choices shown as A), B) ..., the right letter, and an explanation.
    numeric: a question template over parameters drawn at random, a calculator
        (``MODULE.FUNCTION`` in ``pytest_distcheck.calc``) that computes the answer from them, the unit
        and tolerance of the answer, and an explanation template that may use ``{answer}``.

A bank may list the ``goals`` it covers; then each item names the one it exercises (``goal``) and each
attempt draws at least one item per goal (:func:`pytest_distcheck.quiz.draw.draw_attempt`).
"""

from __future__ import annotations

import math
import random
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.quiz import calculators
from pytest_distcheck.schemas import load_json

DEFAULT_TOLERANCE = ("rel", 0.01)
LETTERS = string.ascii_uppercase[:6]
WITHIN_SHARE = N_("within {percent}%")
WITHIN_ABS = N_("within +-{value}")
# Units that are words, as the learner reads them (a Spanish billón is 1e12: "billion" is shown as its meaning).
UNIT_WORDS = {"billion": N_("billion")}
PARAMS_DIFFER = N_("params {given} do not match the item's {names}")
PARAM_NOT_DRAWN = N_("param {name}={value!r} is not one this item draws")
CHOICES_OR_RANGE = N_("give either choices, or min and max (and step); found {keys}")
MIN_ABOVE_MAX = N_("min {low} is greater than max {high}")
TEMPLATE_FORMAT = N_("template does not format with {names}: {error}")
DUPLICATE_GOAL = N_("duplicate goal id {id!r}")
DUPLICATE_ITEM = N_("duplicate item id {id!r}")
ANSWER_PAST_CHOICES = N_("answer {answer} but only {n} choices")
NOT_A_GOAL = N_("expected one of the bank's goals ({goals}), found {goal!r}")
NO_GOAL = N_("expected one of the bank's goals ({goals}), found 'none'")
GOAL_WITHOUT_GOALS = N_("goal {goal!r}, but the bank lists no goals")
GOAL_UNUSED = N_("no item exercises goal {goal!r}: every attempt must draw one")


def unit_label(unit: str) -> str:
    """``unit`` as shown to the learner: a unit that is a word in the language in use, a symbol as it is."""
    return _(UNIT_WORDS[unit]) if unit in UNIT_WORDS else unit

Number = int | float


@dataclass(frozen=True)
class Param:
    """A parameter of a numeric item, drawn from ``choices`` or uniformly from min..max (step ``step``).

    Attributes:
        name: placeholder in the question template and key in the log.
        arg: the calculator's keyword it feeds.
        scale: the calculator receives value * scale (e.g. 1e9 to turn "7.5" billion into parameters).
    """

    name: str
    arg: str
    scale: float
    choices: tuple[Number, ...] | None = None
    low: int = 0
    high: int = 0
    step: int = 1

    def draw(self, rng: random.Random) -> Number:
        """One value, from ``rng`` (the attempt's seeded generator)."""
        if self.choices is not None:
            return rng.choice(self.choices)
        return rng.randrange(self.low, self.high + 1, self.step)

    def allows(self, value: object) -> bool:
        """Whether ``value`` is one this parameter can draw (used to check a logged attempt)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.choices is not None:
            return any(math.isclose(value, c, rel_tol=1e-12, abs_tol=1e-15) for c in self.choices)
        return float(value).is_integer() and self.low <= value <= self.high and (value - self.low) % self.step == 0

    def argument(self, value: Number) -> Number:
        """The value the calculator receives: ``value`` itself when scale is 1, else value * scale."""
        return value if self.scale == 1 else value * self.scale


@dataclass(frozen=True)
class ChoiceItem:
    """A multiple-choice item. ``answer`` is a letter A-F indexing ``choices``."""

    id: str
    topic: str
    question: str
    choices: tuple[str, ...]
    answer: str
    explanation: str
    source: str = ""
    kind: str = "choice"
    goal: str = ""


@dataclass(frozen=True)
class NumericItem:
    """A numeric item; :meth:`expected` is the calculator's result for drawn params / answer_divisor."""

    id: str
    topic: str
    question: str
    calculator: str
    params: tuple[Param, ...]
    fixed: dict[str, Any]
    answer_divisor: float
    unit: str
    tolerance: tuple[str, float]
    explanation: str
    source: str = ""
    kind: str = "numeric"
    goal: str = ""

    def kwargs(self, values: dict[str, Number]) -> dict[str, Any]:
        """Calculator keyword arguments for drawn ``values`` (name -> value)."""
        out = dict(self.fixed)
        for p in self.params:
            out[p.arg] = p.argument(values[p.name])
        return out

    def expected(self, values: dict[str, Number]) -> float:
        """The right answer, in the item's unit. Raises ValueError from the calculator."""
        return calculators.compute(self.calculator, self.kwargs(values)) / self.answer_divisor

    def tolerance_text(self) -> str:
        """The tolerance in words, as the prompt states it (``within 1%``, ``within +-0.01``)."""
        kind, value = self.tolerance
        return (_(WITHIN_SHARE).format(percent=f"{value * 100:g}") if kind == "rel"
                else _(WITHIN_ABS).format(value=f"{value:g}"))

    def allows(self, values: dict[str, object]) -> str | None:
        """None when ``values`` could have been drawn for this item, else what is wrong."""
        names = {p.name for p in self.params}
        if set(values) != names:
            return _(PARAMS_DIFFER).format(given=sorted(values), names=sorted(names))
        for p in self.params:
            if not p.allows(values[p.name]):
                return _(PARAM_NOT_DRAWN).format(name=p.name, value=values[p.name])
        return None


Item = ChoiceItem | NumericItem


@dataclass(frozen=True)
class Bank:
    """A loaded quiz bank: ``id`` (as in ``distcheck quiz ID``), ``title``, ``items`` in file order, the
    ``goals`` it covers (goal id -> title, in file order; empty when the bank names none), and the ``lang`` its
    text is in (a bank file is English; :func:`pytest_distcheck.quiz.translation.translate` gives others)."""

    path: Path
    id: str
    title: str
    items: tuple[Item, ...]
    _by_id: dict[str, Item] = field(default_factory=dict, repr=False, compare=False)
    goals: dict[str, str] = field(default_factory=dict)
    lang: str = "en"

    def item(self, item_id: str) -> Item:
        """The item with this id; raises KeyError."""
        return self._by_id[item_id]

    def has(self, item_id: str) -> bool:
        """Whether the bank has an item with this id."""
        return item_id in self._by_id


def _param(name: str, spec: dict[str, Any], path: Path, where: str) -> Param:
    has_range = "min" in spec or "max" in spec or "step" in spec
    if ("choices" in spec) == has_range or (has_range and not ("min" in spec and "max" in spec)):
        raise ConfigError(path, where, _(CHOICES_OR_RANGE).format(keys=sorted(spec)))
    if "choices" in spec:
        return Param(name, spec.get("arg", name), float(spec.get("scale", 1)), choices=tuple(spec["choices"]))
    if spec["min"] > spec["max"]:
        raise ConfigError(path, where, _(MIN_ABOVE_MAX).format(low=spec["min"], high=spec["max"]))
    return Param(name, spec.get("arg", name), float(spec.get("scale", 1)), low=spec["min"],
                 high=spec["max"], step=spec.get("step", 1))


def _format_check(template: str, values: dict[str, Any], path: Path, where: str) -> None:
    try:
        template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(path, where, _(TEMPLATE_FORMAT).format(names=sorted(values), error=repr(exc))) from None


def _numeric(raw: dict[str, Any], path: Path, where: str) -> NumericItem:
    params = tuple(_param(n, s, path, f"{where}.params.{n}") for n, s in raw["params"].items())
    tol = raw.get("tolerance")
    item = NumericItem(
        id=raw["id"], topic=raw["topic"], question=raw["question"], calculator=raw["calculator"],
        params=params, fixed=dict(raw.get("fixed", {})), answer_divisor=float(raw.get("answer_divisor", 1)),
        unit=raw.get("unit", ""), tolerance=next(iter(tol.items())) if tol else DEFAULT_TOLERANCE,
        explanation=raw["explanation"], source=raw.get("source", ""), goal=raw.get("goal", ""),
    )
    sample = {p.name: (p.choices[0] if p.choices is not None else p.low) for p in params}
    try:
        calculators.check_arguments(item.calculator, item.kwargs(sample))
    except ValueError as exc:
        raise ConfigError(path, f"{where}.calculator", str(exc)) from None
    _format_check(item.question, sample, path, f"{where}.question")
    _format_check(item.explanation, {**sample, "answer": 1.0}, path, f"{where}.explanation")
    return item


def load_bank(path: Path | str) -> Bank:
    """Read a quiz bank and validate it.

    Raises:
        ConfigError: naming the file and field -- missing file, bad JSON (with the line), a schema
            violation, a duplicate item id, an answer letter past the choices, an unknown calculator or
            arguments it does not take, min > max, a template placeholder that is not a parameter, or an item
            goal the bank does not list (or a listed goal that no item exercises).
    """
    path = Path(path)
    raw = load_json(path, "quiz-bank.schema.json")
    items: list[Item] = []
    by_id: dict[str, Item] = {}
    goals: dict[str, str] = {}
    for n, g in enumerate(raw.get("goals", [])):
        if g["id"] in goals:
            raise ConfigError(path, f"goals[{n}].id", _(DUPLICATE_GOAL).format(id=g["id"]))
        goals[g["id"]] = g["title"]
    for n, it in enumerate(raw["items"]):
        where = f"items[{n}]"
        if it["id"] in by_id:
            raise ConfigError(path, f"{where}.id", _(DUPLICATE_ITEM).format(id=it["id"]))
        if it["kind"] == "choice":
            if LETTERS.index(it["answer"]) >= len(it["choices"]):
                raise ConfigError(path, f"{where}.answer",
                                  _(ANSWER_PAST_CHOICES).format(answer=it["answer"], n=len(it["choices"])))
            item: Item = ChoiceItem(it["id"], it["topic"], it["question"], tuple(it["choices"]), it["answer"],
                                    it["explanation"], it.get("source", ""), goal=it.get("goal", ""))
        else:
            item = _numeric(it, path, where)
        if goals and item.goal not in goals:
            raise ConfigError(path, f"{where}.goal", _(NOT_A_GOAL if item.goal else NO_GOAL).format(
                goals=", ".join(goals), goal=item.goal))
        if item.goal and not goals:
            raise ConfigError(path, f"{where}.goal", _(GOAL_WITHOUT_GOALS).format(goal=item.goal))
        items.append(item)
        by_id[item.id] = item
    empty = [g for g in goals if not any(it.goal == g for it in items)]
    if empty:
        raise ConfigError(path, "goals", _(GOAL_UNUSED).format(goal=empty[0]))
    return Bank(path=path, id=raw["id"], title=raw["title"], items=tuple(items), _by_id=by_id, goals=goals)
