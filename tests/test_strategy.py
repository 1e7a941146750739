"""The strategy chooser: decisions on known cases (ZeRO's own setting among them), invariants over a grid,
and `distcheck strategy` output."""

import itertools

import pytest

from pytest_distcheck.calc import memory
from pytest_distcheck.cli import main
from pytest_distcheck.strategy import Cluster, Model, choose

GPT3 = dict(layers=96, hidden=12288, heads=96, seq_len=2048)


def ids(plan):
    return [r.id for r in plan.rules]


def test_small_model_gets_ddp():
    plan = choose(Model(1.5e9), Cluster(80, 8))
    assert (plan.name, plan.tp, plan.pp, plan.dp, plan.zero) == ("DDP", 1, 1, 8, "ddp")
    assert plan.model_state_bytes == pytest.approx(24e9)  # ZeRO sec. 3.1: 16 x 1.5B
    assert "R0" in ids(plan) and plan.fits and not plan.rejected


def test_zero_paper_setting_7_5b_on_64_v100s_picks_zero2():
    # ZeRO Fig. 1 setting (7.5B, N_d = 64) on 32 GB GPUs, 90% usable = 28.8 GB:
    # DDP 120 GB and ZeRO-1 31.4 GB do not fit, ZeRO-2 16.6 GB does
    plan = choose(Model(7.5e9), Cluster(32, 8, nodes=8))
    assert plan.name.startswith("ZeRO-2") and plan.fsdp == "SHARD_GRAD_OP" and plan.dp == 64
    assert plan.total_bytes / 1e9 == pytest.approx(16.640625)
    assert [r.split(":")[0] for r in plan.rejected] == ["DDP", "ZeRO-1"]
    assert "31.4 GB" in plan.rejected[1]


def test_hybrid_shard_when_node_sharding_is_enough():
    # 30B on 2 nodes x 8 x 80 GB: ZeRO-2 over 16 = 2*30 + 14*30/16 = 86.25 GB > 72; 16*30/8 = 60 GB fits
    plan = choose(Model(30e9), Cluster(80, 8, nodes=2))
    assert plan.fsdp == "HYBRID_SHARD" and plan.shard_group == 8
    assert plan.total_bytes == pytest.approx(60e9)
    assert "R2" in ids(plan)


def test_zero3_single_node_only_when_zero1_and_2_do_not_fit():
    # 30B on one node of 8 x 80 GB: ZeRO-2 = 112.5 GB, ZeRO-3 = 60 GB
    plan = choose(Model(30e9), Cluster(80, 8))
    assert plan.fsdp == "FULL_SHARD" and plan.zero == "zero3"
    rule = next(r for r in plan.rules if r.id == "R3")
    assert "1.5x" in rule.text and "ZeRO" in rule.source


def test_slow_inter_node_gives_tp_in_node_pp_across_and_no_zero3():
    plan = choose(Model(175e9, micro_batch=1, **GPT3), Cluster(80, 8, nodes=16, inter_node="slow"))
    assert plan.tp == 8 and plan.pp > 1 and plan.tp * plan.pp * plan.dp == 128
    assert plan.zero in ("zero1", "ddp")
    assert any(r.id == "R3" and "slow inter-node" in r.text for r in plan.rules)
    assert {"R4", "R7", "R9"} <= set(ids(plan))
    assert plan.microbatches == 4 * (plan.pp - 1)  # bubble <= 1/5 of the iteration needs m >= 4(p-1)


def test_no_zero3_on_512_gpus_or_more():
    plan = choose(Model(175e9, **GPT3), Cluster(80, 8, nodes=128))
    assert plan.zero != "zero3"
    assert any(r.id == "R3" and "1024 GPUs >= 512" in r.text for r in plan.rules)


def test_pcie_means_no_tensor_parallelism():
    plan = choose(Model(13e9, layers=40, hidden=5120, heads=40, seq_len=2048), Cluster(24, 8, intra_node="pcie"))
    assert plan.tp == 1 and "R5" in ids(plan)


def test_activations_follow_korthikanti():
    m = Model(7e9, layers=32, hidden=4096, heads=32, seq_len=2048, micro_batch=4)
    plan = choose(m, Cluster(80, 8))
    expected = memory.first_stage_activation_bytes(2048, 4, 4096, 32, 32, tp=plan.tp,
                                                   sequence_parallel=plan.tp > 1, recompute=plan.recompute)
    assert plan.activation_bytes == pytest.approx(expected)
    assert plan.total_bytes <= plan.usable_bytes


def test_without_architecture_activations_are_not_counted_and_it_says_so():
    plan = choose(Model(1e9), Cluster(80, 1))
    assert plan.activation_bytes == 0 and "ACT" in ids(plan) and plan.name == "single GPU"


def test_nothing_fits_is_reported_not_hidden():
    plan = choose(Model(70e9, layers=80, hidden=8192, heads=64, seq_len=4096), Cluster(24, 1))
    assert not plan.fits
    assert plan.rules[-1].text.startswith("nothing fits")


@pytest.mark.parametrize(
    ("params", "gpn", "nodes", "intra", "inter", "mem"),
    list(itertools.product([1e9, 13e9, 70e9, 175e9], [4, 8], [1, 4, 16], ["nvlink", "pcie"], ["fast", "slow"],
                           [40, 80])),
)
def test_invariants(params, gpn, nodes, intra, inter, mem):
    model = Model(params, **GPT3) if params >= 70e9 else Model(params, layers=40, hidden=5120, heads=40,
                                                                seq_len=2048)
    plan = choose(model, Cluster(mem, gpn, nodes, intra, inter))
    assert plan.tp * plan.pp * plan.dp == gpn * nodes
    assert plan.tp <= gpn and model.heads % plan.tp == 0 and model.layers % plan.pp == 0
    if intra == "pcie":
        assert plan.tp == 1
    if plan.fits:
        assert plan.total_bytes <= plan.usable_bytes
    states = memory.zero_model_state_bytes(params / (plan.tp * plan.pp), plan.zero, plan.shard_group)
    assert plan.model_state_bytes == pytest.approx(states)
    assert all(r.source for r in plan.rules)


@pytest.mark.parametrize(
    ("model", "cluster", "match"),
    [
        (Model(0), Cluster(80, 8), "params"),
        (Model(1e9, layers=0), Cluster(80, 8), "layers"),
        (Model(1e9), Cluster(0, 8), "gpu_memory_gb"),
        (Model(1e9), Cluster(80, 0), "gpus_per_node"),
        (Model(1e9), Cluster(80, 8, intra_node="infiniband"), "intra_node"),
        (Model(1e9), Cluster(80, 8, inter_node="medium"), "inter_node"),
    ],
)
def test_bad_input_names_the_field(model, cluster, match):
    with pytest.raises(ValueError, match=match):
        choose(model, cluster)


def test_cli_prints_plan_rules_sources_and_rejections(capsys):
    rc = main(["strategy", "--params", "7.5B", "--gpu-memory-gb", "32", "--gpus-per-node", "8", "--nodes", "8"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "recommended: ZeRO-2 (FSDP SHARD_GRAD_OP)" in out
    assert "memory per GPU: 16.6 GB" in out
    assert "[R1]" in out and "source: Rajbhandari et al. 2019 (ZeRO)" in out
    assert "- ZeRO-1: 31.4 GB per GPU" in out


def test_cli_exit_1_when_nothing_fits(capsys):
    rc = main(["strategy", "--params", "70B", "--gpu-memory-gb", "24", "--gpus-per-node", "1"])
    assert rc == 1 and "DOES NOT FIT" in capsys.readouterr().out


def test_cli_rejects_a_bad_count(capsys):
    with pytest.raises(SystemExit):
        main(["strategy", "--params", "lots", "--gpu-memory-gb", "80", "--gpus-per-node", "8"])
    assert "'lots' is not a count" in capsys.readouterr().err
