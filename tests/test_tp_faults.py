"""Every fault of the zoo (fixtures/tp_faults/zoo.py) is named by assert_tp_matches_dense; correct layers pass."""

from __future__ import annotations

import pytest

from fixtures.tp_faults.zoo import CORRECT, ZOO


def _check(name: str, correct: bool) -> str:
    import torch.distributed as dist

    from fixtures.tp_faults.zoo import CORRECT, ZOO
    from pytest_distcheck.tp import assert_tp_matches_dense

    entry = (CORRECT if correct else ZOO)[name]
    try:
        assert_tp_matches_dense(entry.dense(), entry.tp, entry.plan, entry.inputs(dist.get_rank()))
    except AssertionError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("name", sorted(ZOO))
def test_each_fault_is_named(dist_world, name):
    fault = ZOO[name].fault
    message, other = dist_world.run(_check, name, False)
    headline = message.splitlines()[0] if message else ""
    assert fault in headline, message
    assert fault in other  # the other rank fails too, pointing at rank 0


def test_an_activation_that_differs_across_ranks_is_named_at_its_layer(dist_world):
    message, _ = dist_world.run(_check, "non-replicated-activation", False)
    assert "- non-replicated-input [up]: the input of up differs across ranks: rank 1 vs rank 0" in message


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_layers_pass(dist_world, name):
    assert dist_world.run(_check, name, True) == ["", ""]
