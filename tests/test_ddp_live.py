"""DDP against one process (pytest_distcheck.ddp) on the lab's model: what the live DDP check proves, on 2 ranks."""

from __future__ import annotations

import pytest

from pytest_distcheck import ddp


def _against_one_process(variant: str) -> dict:
    """On a rank: the lab's API with one part replaced by a learner's mistake, compared over 2 steps."""
    import types

    import torch

    from experiments.ddp_cpu import lab

    api = types.SimpleNamespace(LabConfig=lab.LabConfig, build_model=lab.build_model, batch=lab.batch, loss=lab.loss)
    if variant == "sum-loss":
        api.loss = lambda output, target: ((output - target) ** 2).sum()
    elif variant == "no-gradient":
        api.loss = lambda output, target: (output * 0).sum()
    elif variant == "uneven-batch":
        api.batch = lambda cfg, step: tuple(t[:63] for t in lab.batch(cfg, step))
    elif variant == "unseeded-init":
        def build_model(cfg):
            torch.manual_seed(torch.distributed.get_rank())  # each rank draws its own initial weights
            return lab.build_model(cfg).apply(lambda m: m.reset_parameters() if hasattr(m, "reset_parameters")
                                              else None)
        api.build_model = build_model
    return ddp.against_one_process(api, 2)


def test_the_labs_ddp_equals_one_process_on_the_full_batch(dist_world):
    runs = dist_world.run(_against_one_process, "lab")
    assert ddp.problem(runs) is None
    assert [r["ranks_differing"] for r in runs] == [[], []]
    assert runs[0]["parameters"] == 32 * 256 + 256 + 256 * 256 + 256 + 256 + 1
    assert runs[0]["max_abs_diff_vs_single_process"] <= ddp.ATOL
    assert runs[0]["max_abs_change"] > ddp.ATOL


def test_initial_weights_that_differ_per_rank_are_compared_from_the_ones_ddp_broadcast(dist_world):
    assert ddp.problem(dist_world.run(_against_one_process, "unseeded-init")) is None


def test_a_loss_summed_over_the_batch_is_named_as_the_reason_ddp_differs(dist_world):
    """DDP averages the shards' gradients: with a summed loss each replica takes half the single process's step."""
    why = ddp.problem(dist_world.run(_against_one_process, "sum-loss"))
    head, _, tail = ddp.NOT_ONE_PROCESS.partition("{detail}")
    assert why.startswith(head.format(steps=2, rank=0, rtol=ddp.RTOL, atol=ddp.ATOL))
    assert why.endswith(tail) and "Mismatched elements" in why


def test_a_model_that_does_not_train_is_refused(dist_world):
    assert ddp.problem(dist_world.run(_against_one_process, "no-gradient")) == ddp.NOT_TRAINED.format(
        steps=2, change=0.0, lr=ddp.LR)


def test_a_batch_that_does_not_split_into_equal_shards_is_refused(dist_world):
    assert ddp.problem(dist_world.run(_against_one_process, "uneven-batch")) == ddp.UNEVEN_BATCH.format(n=63, world=2)


@pytest.mark.parametrize(("runs", "expected"), [
    ([{"steps": 3, "ranks_differing": [1], "mismatch": None, "max_abs_change": 1.0, "atol": 1e-5}] * 2,
     ddp.RANKS_DIFFER.format(steps=3, ranks="1")),
    ([{"error": "uneven"}], "uneven"),
], ids=["replicas-differ", "error"])
def test_problem_reads_plain_data(runs, expected):
    assert ddp.problem(runs) == expected
