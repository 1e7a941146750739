"""The phase quiz covers the phase's goals (issue 27, point 3): every item exercises a goal, every draw takes one item
per goal, the bank holds the items the issue asks for, the source items' citations resolve in the installed
megatron-core and torch, and the scenario items' answers are what `distcheck strategy` chooses."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from quiz_support import BANK

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.quiz.bank import LETTERS, load_bank
from pytest_distcheck.quiz.draw import draw_attempt

GOALS = {"tp-sketch", "bubble", "choose-plan", "read-sources", "spend"}


@pytest.fixture(scope="module")
def bank():
    return load_bank(BANK)


def _right(item) -> str:
    return item.choices[LETTERS.index(item.answer)]


def test_every_item_exercises_one_of_the_five_goals(bank):
    assert set(bank.goals) == GOALS
    assert {it.goal for it in bank.items} == GOALS


def test_every_draw_covers_the_five_goals_the_rest_at_random(bank):
    seen: set[str] = set()
    for seed in range(2000):
        drawn = draw_attempt(bank, seed, 10)
        assert {d.item.goal for d in drawn} == GOALS, seed
        assert len({d.item.id for d in drawn}) == 10
        seen |= {d.item.id for d in drawn}
    assert seen == {it.id for it in bank.items}  # every item can come up


def test_a_short_attempt_takes_goals_at_random_never_twice(bank):
    for seed in range(200):
        goals = [d.item.goal for d in draw_attempt(bank, seed, 3)]
        assert len(set(goals)) == 3


def test_the_bank_holds_what_the_phase_asks(bank):
    ids = [it.id for it in bank.items]
    assert len(ids) >= 60
    assert sum(i.startswith("scenario-") for i in ids) >= 6
    assert sum(i.startswith("tp-attn-") for i in ids) >= 2
    for one in ("tp-gqa-kv-heads", "ep-all-to-all-volume", "inf-disaggregation"):
        assert one in ids
    assert sum(i.startswith("fsdp2-") for i in ids) >= 2
    cited = [it for it in bank.items if "[cite: " in it.explanation]
    assert len([it for it in cited if it.goal == "read-sources"]) >= 4
    for it in bank.items:
        assert it.explanation and it.source, it.id


def _bank(tmp_path, raw: dict) -> Path:
    path = tmp_path / "bank.json"
    path.write_text(json.dumps(raw))
    return path


ITEM = {"id": "c1", "kind": "choice", "topic": "t", "question": "q?", "choices": ["x", "y"], "answer": "A",
        "explanation": "because"}


@pytest.mark.parametrize(("raw", "where", "problem"), [
    ({"goals": [{"id": "g", "title": "G"}], "items": [ITEM]}, "items[0].goal",
     "expected one of the bank's goals (g), found 'none'"),
    ({"goals": [{"id": "g", "title": "G"}], "items": [{**ITEM, "goal": "h"}]}, "items[0].goal", "found 'h'"),
    ({"items": [{**ITEM, "goal": "g"}]}, "items[0].goal", "but the bank lists no goals"),
    ({"goals": [{"id": "g", "title": "G"}, {"id": "h", "title": "H"}], "items": [{**ITEM, "goal": "g"}]}, "goals",
     "no item exercises goal 'h'"),
    ({"goals": [{"id": "g", "title": "G"}, {"id": "g", "title": "again"}], "items": [{**ITEM, "goal": "g"}]},
     "goals[1].id", "duplicate goal id 'g'"),
])
def test_goals_that_do_not_fit_the_items_name_the_field(tmp_path, raw, where, problem):
    path = _bank(tmp_path, {"id": "t", "title": "t", **raw})
    with pytest.raises(ConfigError) as info:
        load_bank(path)
    assert (info.value.where, problem in info.value.problem) == (where, True), info.value


def test_a_bank_without_goals_draws_as_before(tmp_path):
    """A bank naming no goals is drawn by one random sample, as before goals existed."""
    import random

    items = [{**ITEM, "id": f"c{i}"} for i in range(12)]
    bank = load_bank(_bank(tmp_path, {"id": "t", "title": "t", "items": items}))
    assert [d.item.id for d in draw_attempt(bank, 7, 5)] == [it.id for it in random.Random(7).sample(bank.items, 5)]


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not (_installed("megatron-core") and _installed("torch")),
                    reason="megatron-core (the 'notes' extra) or torch not installed")
def test_the_source_items_citations_resolve_in_the_installed_sources(bank):
    """Each item whose explanation cites megatron-core or torch names a file and symbol, with a quote, that the
    kit's citation resolver finds in the installed packages, as it does for a reading note."""
    from pytest_distcheck.citations.resolver import Resolver
    from pytest_distcheck.citations.syntax import parse_note
    from pytest_distcheck.citations.verifier import Status, check_citation

    resolver = Resolver()
    checked = 0
    for it in bank.items:
        note = parse_note(it.explanation, Path(f"{BANK.name}:{it.id}"))
        assert not note.malformed, (it.id, note.malformed)
        for cit in note.citations:
            result = check_citation(resolver, cit, packages=("megatron-core", "torch"))
            assert result.status is Status.COUNTED, (it.id, result.code, result.reason)
            checked += 1
    assert checked >= 6


# Each scenario item: the model and cluster its question states, and what the chooser must print for its right
# answer (the plan, and the memory figures the answer quotes).
SCENARIOS = {
    "scenario-13b-pcie": (("llama2-13b", None), (40, 8, 2, "pcie", "fast"), "TP=1 x PP=4 x DP=4", ["37.4 GB"]),
    "scenario-13b-nvlink": (("llama2-13b", None), (40, 8, 2, "nvlink", "fast"), "TP=8 x PP=2 x DP=1",
                            ["13.0 GB", "20.3 GB"]),
    "scenario-small-pcie": ((None, 1.5e9), (24, 8, 1, "pcie", "fast"), "ZeRO-2", ["5.6 GB", "21.6 GB"]),
    "scenario-70b-activations": (("llama2-70b", None), (80, 8, 4, "nvlink", "fast"), "TP=8 x PP=1 x DP=4",
                                 ["60.4 GB", "11.4 GB"]),
    "scenario-175b-slow": (("gpt3-175b", None), (80, 8, 16, "nvlink", "slow"), "TP=8 x PP=8 x DP=2",
                           ["27.3 GB", "34.4 GB"]),
    "scenario-13b-pcie-slow": (("llama2-13b", None), (40, 8, 2, "pcie", "slow"), "HYBRID_SHARD", ["26.0 GB"]),
}


@pytest.mark.parametrize("item_id", sorted(SCENARIOS))
def test_a_scenario_items_answer_is_what_the_chooser_picks(bank, item_id):
    from pytest_distcheck.strategy import Cluster, Model, choose, preset_model

    (preset, params), (mem, gpn, nodes, intra, inter), plan_name, figures = SCENARIOS[item_id]
    model = preset_model(preset) if preset else Model(params)
    plan = choose(model, Cluster(mem, gpn, nodes, intra, inter))
    assert plan.fits and plan_name in plan.name
    shown = {f"{plan.model_state_bytes / 1e9:.1f} GB", f"{plan.activation_bytes / 1e9:.1f} GB",
             f"{plan.total_bytes / 1e9:.1f} GB"} | {m.group(0) for r in plan.rejected
                                                     for m in re.finditer(r"\d+\.\d GB", r)}
    item = bank.item(item_id)
    text = _right(item)
    for figure in figures:
        assert figure in shown, (item_id, figure, shown)
        assert figure in text or figure in item.explanation, (item_id, figure)
    assert item_id.startswith("scenario-") and item.goal == "choose-plan"


def test_the_numbers_of_the_other_new_items():
    """The EP volume, heads per rank and the DP size the items quote, computed."""
    assert round(2 * 4 * 4096 * 4096 * 2 / 1e6) == 268  # top-2 x b x s x h x bf16, MB
    assert 32 // 4 == 8 and 3 * (4096 // 4) == 3 * 1024  # heads per rank, QKV rows per rank
    assert 64 // (8 * 2 * 1) == 4  # megatron-core's data-parallel size
    assert 64 // 8 == 8 and 8 // 8 == 1  # Llama 3 70B: query and KV heads per rank at TP = 8
