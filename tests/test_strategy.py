"""The strategy chooser: decisions on known cases (ZeRO's own setting among them), invariants over a grid,
and `distcheck strategy` output."""

import itertools

import pytest

from pytest_distcheck.calc import memory
from pytest_distcheck.cli import main
from pytest_distcheck.strategy import Cluster, Model, check, choose, choose_inference

GPT3 = dict(layers=96, hidden=12288, heads=96, seq_len=2048)


def ids(plan):
    return [r.id for r in plan.rules]


def test_small_model_gets_ddp():
    plan = choose(Model(1.5e9), Cluster(80, 8))
    assert (plan.name, plan.tp, plan.pp, plan.dp, plan.zero) == ("DDP", 1, 1, 8, "ddp")
    assert plan.model_state_bytes == pytest.approx(24e9)  # ZeRO sec. 3.1: 16 x 1.5B
    assert "R0" in ids(plan) and plan.fits and not plan.rejected


# Megatron-LM 7.5B shape (Narayanan et al. 2021 Table 1) at a short sequence: activations are small
ZERO_7_5B = dict(layers=36, hidden=4096, heads=32, seq_len=512)


def test_zero_paper_setting_7_5b_on_64_v100s_picks_zero2():
    # ZeRO Fig. 1 setting (7.5B, N_d = 64) on 32 GB GPUs, 90% usable = 28.8 GB. Activations (Korthikanti Eq. (1),
    # no recomputation): 36 x sbh(34 + 5as/h) = 36 x 512 x 4096 x 54 = 4.08 GB.
    # DDP 120 GB and ZeRO-1 31.4 GB do not fit, ZeRO-2 16.6 GB + 4.08 GB does
    plan = choose(Model(7.5e9, **ZERO_7_5B), Cluster(32, 8, nodes=8))
    assert plan.name.startswith("ZeRO-2") and plan.fsdp == "SHARD_GRAD_OP" and plan.dp == 64
    assert plan.model_state_bytes / 1e9 == pytest.approx(16.640625)
    assert plan.activation_bytes == pytest.approx(36 * 512 * 4096 * 54)
    assert [r.split(",")[0] for r in plan.rejected] == ["DDP", "ZeRO-1"]
    assert "states 31.4" in plan.rejected[1]


def test_hybrid_shard_when_node_sharding_is_enough():
    # 30B on 2 nodes x 8 x 80 GB: ZeRO-2 over 16 = 2*30 + 14*30/16 = 86.25 GB > 72; HYBRID_SHARD 16*30/8 = 60 GB
    # + the gathered layer 4 x 12h^2 = 3.2 GB (DeepSpeed's largest-layer term) + activations 4.4 GB fits
    plan = choose(Model(30e9, layers=48, hidden=8192, heads=64, seq_len=256), Cluster(80, 8, nodes=2))
    assert plan.fsdp == "HYBRID_SHARD" and plan.shard_group == 8
    assert plan.model_state_bytes == pytest.approx(60e9)
    assert plan.gathered_bytes == pytest.approx(4 * 12 * 8192**2)
    assert plan.total_bytes <= plan.usable_bytes
    assert "R2" in ids(plan)


def test_zero3_single_node_only_when_zero1_and_2_do_not_fit():
    # 30B on one node of 8 x 80 GB: ZeRO-2 = 112.5 GB, ZeRO-3 = 60 GB (+ gathered layer, activations)
    plan = choose(Model(30e9, layers=48, hidden=8192, heads=64, seq_len=256), Cluster(80, 8))
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


def test_without_architecture_the_nearest_megatron_shape_is_assumed_and_said():
    plan = choose(Model(1e9), Cluster(80, 1))
    # Narayanan et al. 2021 Table 1, 1.7B: a = 24, h = 2304, L = 24, s = 2048; Korthikanti Eq. (1)
    assert plan.activation_bytes == pytest.approx(24 * 2048 * 2304 * (34 + 5 * 24 * 2048 / 2304))
    act = next(r for r in plan.rules if r.id == "ACT")
    assert "Megatron-LM 1.7B shape" in act.text and "--layers" in act.text


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
    assert plan.tp * plan.pp * plan.cp * plan.dp == gpn * nodes
    assert plan.tp <= gpn and model.heads % plan.tp == 0 and plan.pp <= model.layers
    if intra == "pcie":
        assert plan.tp == 1
    if plan.fits:
        assert plan.total_bytes <= plan.usable_bytes
    states = memory.zero_model_state_bytes(params / (plan.tp * plan.pp), plan.zero, plan.shard_group)
    assert plan.model_state_bytes == pytest.approx(states)
    assert plan.activation_bytes > 0
    fired = {r.id: r.text for r in plan.rules}
    if "R5" in fired:  # the reasons agree with the plan
        assert plan.tp == 1 and ("pipeline stages instead" in fired["R5"]) == (plan.pp > 1)
    if plan.fits:
        assert {"R0": plan.zero == "ddp" and plan.tp * plan.pp == 1, "R1": plan.zero in ("zero1", "zero2"),
                "R2": plan.fsdp == "HYBRID_SHARD", "R3": plan.fsdp == "FULL_SHARD",
                "R4": plan.tp * plan.pp > 1}[next(r.id for r in plan.rules if r.id in ("R0", "R1", "R2", "R3", "R4")
                                                  and not r.text.startswith(("ZeRO-3 / FULL_SHARD over", "slow")))]
    if inter == "slow" and nodes > 1:
        assert plan.zero not in ("zero1", "zero2", "zero3") or plan.tp * plan.pp > 1 or plan.fsdp == "HYBRID_SHARD"
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
    rc = main(["strategy", "--params", "7.5B", "--layers", "36", "--hidden", "4096", "--heads", "32", "--seq-len",
               "512", "--gpu-memory-gb", "32", "--gpus-per-node", "8", "--nodes", "8"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "recommended: ZeRO-2 (FSDP SHARD_GRAD_OP)" in out
    assert "memory per GPU: 20.7 GB = model states 16.6 GB + activations 4.1 GB" in out
    assert "[R1]" in out and "source: Rajbhandari et al. 2019 (ZeRO)" in out
    assert "- ZeRO-1, recompute none: 35.5 GB per GPU (states 31.4 GB + activations 4.1 GB)" in out


def test_cli_exit_1_when_nothing_fits(capsys):
    rc = main(["strategy", "--params", "70B", "--gpu-memory-gb", "24", "--gpus-per-node", "1"])
    assert rc == 1 and "DOES NOT FIT" in capsys.readouterr().out


def test_cli_rejects_a_bad_count(capsys):
    with pytest.raises(SystemExit):
        main(["strategy", "--params", "lots", "--gpu-memory-gb", "80", "--gpus-per-node", "8"])
    assert "'lots' is not a count" in capsys.readouterr().err


# --- issue 17: the three chooser faults, each failing on the old chooser ---------------------------------------

def test_70b_on_128_nodes_counts_activations_before_saying_it_fits():
    # Old chooser: TP=4 x DP=256 with ZeRO-1 at 70.8 of 72 GB, activations left out. States alone are
    # 4 x 17.5B + 12 x 17.5B / 256 = 70.82 GB (ZeRO sec. 5.1 on Psi / TP); any activation pushes it over.
    plan = choose(Model(70e9), Cluster(80, 8, nodes=128))
    assert plan.fits and plan.activation_bytes > 0 and plan.total_bytes <= plan.usable_bytes
    assert (plan.tp, plan.pp, plan.dp) != (4, 1, 256)
    tp4 = next(r for r in plan.rejected if r.startswith("TP=4 x PP=1 x DP=256, ZeRO-1, recompute none"))
    assert "states 70.8 GB + activations" in tp4
    # with Llama 2 70B's own shape (Touvron et al. 2023: 80 layers, h = 8192, 64 heads, 4k context)
    plan = choose(Model(70e9, layers=80, hidden=8192, heads=64, seq_len=4096), Cluster(80, 8, nodes=128))
    assert plan.fits and plan.activation_bytes > 0 and plan.total_bytes <= plan.usable_bytes


def test_pcie_30b_rules_agree_with_the_plan():
    # Old chooser: ZeRO-3 recommended while printing "[R5] ... no tensor parallelism, pipeline stages instead".
    plan = choose(Model(30e9), Cluster(80, 8, intra_node="pcie"))
    r5 = next(r for r in plan.rules if r.id == "R5")
    assert plan.tp == 1
    assert ("pipeline stages instead" in r5.text) == (plan.pp > 1)
    if plan.zero == "zero3":  # allowed only when no pipeline plan fits, and then it says so
        assert "none fits" in r5.text
    # PP is tried before ZeRO-3 on PCIe (HF: without NVLink PP is faster than TP or ZeRO)
    order = [r.split(",")[0] for r in plan.rejected if "recompute none" in r]
    if "ZeRO-3 (FSDP FULL_SHARD)" in order and any(o.startswith("TP=1 x PP=") for o in order):
        assert order.index("ZeRO-3 (FSDP FULL_SHARD)") > max(i for i, o in enumerate(order) if o.startswith("TP=1"))


def test_slow_inter_node_7b_on_4_nodes_gets_hybrid_shard_not_cross_node_zero():
    # Old chooser: ZeRO-1 over all 32 GPUs across the slow link. HYBRID_SHARD: 16 x 7B / 8 = 14 GB states.
    plan = choose(Model(7e9), Cluster(80, 8, nodes=4, inter_node="slow"))
    assert plan.fsdp == "HYBRID_SHARD" and plan.shard_group == 8
    assert plan.model_state_bytes == pytest.approx(14e9)
    assert not any(r.startswith(("ZeRO-1", "ZeRO-2")) for r in plan.rejected)
    assert "R2" in ids(plan)


def test_check_names_every_rule_a_plan_breaks():
    model = Model(175e9, **GPT3)
    broken, mem = check(model, Cluster(80, 8, nodes=16, intra_node="pcie", inter_node="slow"), tp=16, pp=7, dp=2,
                        zero="zero3")
    texts = {r.id: r.text for r in broken}
    assert set(texts) == {"SIZE", "R4", "R5", "R6", "R3"} and mem is None
    assert "16 x 7 x 1 x 2 = 224" in texts["SIZE"]
    assert sum(r.id == "R4" for r in broken) == 1  # TP across nodes
    broken, _ = check(Model(13e9, layers=40, hidden=5120, heads=20, seq_len=2048), Cluster(80, 8), tp=8, pp=1, dp=1)
    assert [r.id for r in broken] == ["R4"] and "heads (20)" in broken[0].text
    broken, _ = check(model, Cluster(80, 8, nodes=16), tp=8, pp=200, dp=1)
    assert any(r.id == "R4" and "more stages than layers" in r.text for r in broken)
    broken, mem = check(model, Cluster(80, 8, nodes=16), tp=8, pp=8, dp=2)
    assert broken == [] and mem is not None and mem.total_bytes < 72e9
    broken, _ = check(Model(175e9, layers=96, hidden=12288, heads=96, seq_len=2048), Cluster(80, 8, nodes=2),
                      tp=8, pp=1, dp=2)
    assert [r.id for r in broken] == ["FIT"]


def test_cli_check(capsys):
    rc = main(["strategy", "--params", "175B", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "16",
               "--check", "tp=16,pp=8,dp=1"])
    out = capsys.readouterr().out
    assert rc == 1 and "breaks 1 rule(s)" in out and "TP=16 spans nodes" in out


def test_inference_puts_tp_in_the_node_and_pp_across():
    # Llama 2 70B (80 layers, h 8192, 64 heads, 8 KV heads): bf16 weights 140 GB; KV cache for 32 x 4096 tokens
    # = 2 x 80 x 32 x 4096 x 8 x 128 x 2 bytes = 42.9 GB (Pope et al. 2022 sec. 2)
    model = Model(70e9, layers=80, hidden=8192, heads=64, kv_heads=8)
    plan = choose_inference(model, Cluster(80, 8, nodes=2), batch=32, context=4096)
    assert (plan.tp, plan.pp, plan.replicas) == (4, 1, 4)
    assert plan.weight_bytes == pytest.approx(35e9)
    assert plan.kv_bytes == pytest.approx(2 * 80 * 32 * 4096 * 1024 * 2 / 4)
    big = choose_inference(Model(405e9, layers=126, hidden=16384, heads=128, kv_heads=8), Cluster(80, 8, nodes=4),
                           batch=8, context=8192)
    assert big.fits and big.tp == 8 and big.pp > 1 and big.tp * big.pp > 8
    pcie = choose_inference(model, Cluster(48, 8, intra_node="pcie"), batch=1, context=4096)
    assert pcie.tp == 1 and pcie.pp > 1 and pcie.fits


def test_cli_check_with_recompute_and_a_published_plan(capsys):
    # Llama 3 405B, Dubey et al. 2024 Tables 3-4: TP 8 x PP 16 x DP 128 on 16,384 H100s; FSDP without resharding
    # after forward (ZeRO-2-like) breaks the R6 guidance; with full recomputation it fits
    args = ["strategy", "--params", "405B", "--layers", "126", "--hidden", "16384", "--heads", "128", "--seq-len",
            "8192", "--recipe", "megatron-bf16", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "2048",
            "--check", "tp=8,pp=16,dp=128,zero=zero2,recompute=full"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "breaks 1 rule(s)" in out and "[R6]" in out and "(full recomputation)" in out


def test_cli_inference(capsys):
    rc = main(["strategy", "--params", "70B", "--layers", "80", "--hidden", "8192", "--heads", "64", "--kv-heads", "8",
               "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "2", "--inference", "--batch", "32",
               "--context", "4096"])
    out = capsys.readouterr().out
    assert rc == 0 and "serving: TP = 4, PP = 1, 4 replica(s)" in out
    assert "weights 35.0 GB + KV cache 10.7 GB" in out
