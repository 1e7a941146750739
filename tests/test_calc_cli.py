"""`distcheck bubble` and `distcheck memory` print the calculators' numbers with their formulas."""

import pytest

from pytest_distcheck.calc import precision
from pytest_distcheck.calc.estimators import LOWER_BOUND, SOURCES, ZERO_PAPER
from pytest_distcheck.calc.memory import PRECISION_NOTE
from pytest_distcheck.cli import main
from pytest_distcheck.commands import bubble
from pytest_distcheck.commands import memory as memory_command


def test_bubble_prints_both_definitions(capsys):
    assert main(["bubble", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out
    assert "(p-1)/(v*m)               = 3/8 = 0.375" in out
    assert "= 3/11 = 0.2727 (27.3%)" in out
    assert "1F1B min(p, m) = 4" in out
    assert "needs m >= 12" in out


def test_bubble_interleaved(capsys):
    assert main(["bubble", "-p", "4", "-m", "8", "-v", "2"]) == 0
    out = capsys.readouterr().out
    assert "= 3/16 = 0.1875" in out and "interleaved 1F1B, v = 2" in out


def test_bubble_of_one_stage_says_there_is_none(capsys):
    assert main(["bubble", "-p", "1", "-m", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "(p-1)/(v*m)               = 0/8 = 0    " in lines[1]  # the substituted fraction, not "= 0 = 0"
    assert "((p-1)/v)/(m+(p-1)/v)     = 0/8 = 0 (0.0%)    " in lines[2]
    assert lines[4] == bubble.ONE_STAGE
    assert lines[4] == "  one stage: no pipeline, so no bubble (no stage waits for another); m only splits the batch"
    assert not any("needs m >=" in line for line in lines)


def test_bubble_interleaved_needs_m_multiple_of_p(capsys):
    assert main(["bubble", "-p", "4", "-m", "6", "-v", "2"]) == 2
    assert "m=6, p=4" in capsys.readouterr().err


def test_memory_reproduces_zero_figure_1(capsys):
    assert main(["memory", "--params", "7.5B", "--dp", "64", "--gpus-per-node", "8"]) == 0
    out = capsys.readouterr().out
    for number in ("120 GB", "31.41 GB", "16.64 GB", "1.875 GB"):
        assert number in out
    assert "FSDP HYBRID_SHARD" in out and "15 GB" in out


def test_memory_activations_table(capsys):
    args = ["memory", "--params", "175B", "--dp", "8", "--layers", "96", "--hidden", "12288", "--heads", "96",
            "--seq-len", "2048", "--tp", "8"]
    assert main(args) == 0
    out = capsys.readouterr().out
    # Korthikanti Eq. (4): (sbh/t)(34 + 5as/h) = 2048*12288/8*114 bytes = 0.3586 GB per layer
    assert "0.3586 GB/layer" in out
    assert "34 sbh/t" in out


def test_memory_activations_need_the_whole_architecture(capsys):
    assert main(["memory", "--params", "7B", "--dp", "8", "--layers", "32"]) == 2
    assert "--hidden" in capsys.readouterr().err


def test_memory_tp_shards_the_model_state_rows_too(capsys):
    # issue 17: `--tp 8` used to print 2800 GB "per GPU" for 175B beside TP-sharded activations.
    # Each GPU holds Psi/t = 21.875B parameters: DDP 16 x 21.875 = 350 GB; ZeRO-1 4 x 21.875 + 12 x 21.875/8 = 120.3
    assert main(["memory", "--params", "175B", "--dp", "8", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    assert "  350 GB" in out and "2800 GB" not in out and "120.3 GB" in out
    assert "plan TP=8 x PP=1 x CP=1 x DP=8, zero1" in out and "activations not counted" in out


def test_memory_plan_total_with_megatron_distributed_optimizer(capsys):
    # Megatron-LM README: bf16 params + fp32 grads with the distributed optimizer = 6 + 12/d bytes per parameter.
    # GPT-3 175B on TP 8 x PP 16 x DP 8: Psi/(t p) = 1.367e9 -> (6 + 12/8) x 1.367e9 = 10.25 GB; activations,
    # TP + SP + selective (Korthikanti Table 2): 34 sbh/t x 96 layers = 10.27 GB
    args = ["memory", "--params", "175B", "--dp", "8", "--tp", "8", "--pp", "16", "--layers", "96", "--hidden",
            "12288", "--heads", "96", "--seq-len", "2048", "--recipe", "megatron-bf16", "--zero", "megatron-distopt",
            "--recompute", "selective", "--margin-gb", "4"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "6 Psi + 12 Psi/N_d" in out
    assert memory_command.PLAN_TOTAL.format(tp=8, pp=16, cp=1, dp=8, zero="megatron-distopt", recompute="selective",
                                            total="24.52 GB", states="10.25 GB", activations="10.27 GB",
                                            gathered="0 GB", margin="4 GB") + "\n" in out
    assert PRECISION_NOTE.format(name="megatron-bf16", bytes=18, source=precision.recipe("megatron-bf16").source) in out


def test_memory_puts_the_unit_on_every_figure_and_names_the_variant(capsys):
    assert main(["memory", "--params", "7.5B", "--dp", "64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(memory_command.STATES_HEADER.format(
        psi=7.5e9, nd=64, split="", what="recipe zero, 16 B/param", variant=ZERO_PAPER,
        unit_note=memory_command.UNIT_NOTE["GB"]) + "\n")
    assert memory_command.STATES_ROW.format(name="DDP / FSDP NO_SHARD", formula="(2+2+K) Psi", total="       120 GB",
                                            params="15 GB", grads="15 GB", optimizer="90 GB", section="sec. 3.1") in out
    assert "margin 0 GB (variant zero-paper)" in out
    assert LOWER_BOUND in out


def test_memory_in_gib_prints_no_gb(capsys):
    # 120e9 bytes = 111.8 GiB; the one "GB" left is the note that DeepSpeed calls GiB "GB"
    assert main(["memory", "--params", "7.5B", "--dp", "64", "--unit", "GiB"]) == 0
    out = capsys.readouterr().out
    assert "111.8 GiB" in out and out.count(" GB") == 0 and 'what DeepSpeed prints as "GB"' in out


def test_memory_reproduces_deepspeeds_published_tables_under_its_variant(capsys):
    # DeepSpeed docs memory.rst, _all_cold: 2851e6 params, 32e6 largest layer, 1 node x 8 GPUs
    argv = ["memory", "--params", "2851M", "--dp", "8", "--largest-layer", "32M", "--unit", "GiB"]
    assert main([*argv, "--variant", "deepspeed-docs"]) == 0
    docs = capsys.readouterr().out
    for figure in ("5.31 GiB (2 Psi)", "15.93 GiB (4 Psi + 16 Psi/N)", "127.45 GiB", "71.69 GiB", "63.72 GiB",
                   "0.78 GiB", "1.43 GiB", "6.09 GiB (4L + 18 Psi/N)"):
        assert figure in docs
    assert main([*argv, "--variant", "deepspeed-estimator"]) == 0
    assert "11.28 GiB (2 Psi + 18 Psi/N)" in capsys.readouterr().out


def test_memory_largest_layer_is_zero3s_gathered_term(capsys):
    assert main(["memory", "--params", "2851M", "--dp", "8", "--zero", "zero3", "--largest-layer", "32M"]) == 0
    assert "gathered unit 0.128 GB" in capsys.readouterr().out   # 4 x 32e6 bytes


def test_memory_places_zero_infinity_states_per_gpu_and_per_node(capsys):
    argv = ["memory", "--params", "7B", "--dp", "16", "--gpus-per-node", "8", "--zero", "zero3",
            "--offload-optimizer", "cpu", "--offload-param", "nvme", "--largest-layer", "200M"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # GPU 4L = 0.8 GB; CPU 8 x (2 + 12) x 7e9/16 x 1.5 = 73.5 GB; NVMe 8 x 2 x 7e9/16 = 7 GB
    assert memory_command.OFFLOAD_LINE.format(
        options="zero3, offload_optimizer=cpu, offload_param=nvme", gpu="0.8 GB", gpu_formula="GPU holds 4L",
        cpu="73.5 GB", cpu_formula="1.5 x n x (grads+optimizer)", nvme=", NVMe 7 GB", source=SOURCES[ZERO_PAPER]) in out
    assert "0.8 GB per GPU = states 0.8 GB" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--tp", "64", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq-len", "2048"],
     memory_command.TP_HEADS.format(tp=64, heads=32)),
    (["--layers", "32", "--hidden", "4096", "--heads", "7", "--seq-len", "2048"],
     memory_command.HIDDEN_HEADS.format(hidden=4096, heads=7, dim=4096 / 7)),
    (["--tp", "2", "--variant", "deepspeed-docs"], memory_command.DEEPSPEED_SPLIT.format(tp=2, pp=1, cp=1)),
    (["--variant", "deepspeed-docs", "--offload-optimizer", "cpu"], memory_command.OFFLOAD_VARIANT),
    (["--recipe", "megatron-bf16", "--zero", "zero2", "--offload-optimizer", "cpu"], memory_command.OFFLOAD_RECIPE),
])
def test_memory_refuses_a_shape_or_option_it_cannot_count(capsys, argv, message):
    assert main(["memory", "--params", "7B", "--dp", "8", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_plan_line_says_it_counts_as_the_zero_paper_whatever_the_variant(capsys):
    """--variant chooses the table; the plan's total is the ZeRO paper's count of --zero and --recipe (its states
    are zero-paper's ZeRO-1 14.6 GiB here, not a DeepSpeed row), and the line after it says so."""
    assert main(["memory", "--params", "2851M", "--dp", "8", "--largest-layer", "32M", "--variant", "deepspeed-docs",
                 "--unit", "GiB"]) == 0
    lines = capsys.readouterr().out.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan TP=1"))
    assert lines[plan].startswith("plan TP=1 x PP=1 x CP=1 x DP=8, zero1, recompute none: 14.6 GiB per GPU = states "
                                  "14.6 GiB") and lines[plan].endswith("(variant zero-paper)")
    assert lines[plan + 1] == memory_command.PLAN_VARIANT.format(variant="deepspeed-docs")
    assert lines[plan + 1].startswith("  (the plan counts --zero and --recipe as the ZeRO paper does, whatever "
                                      "--variant")
    assert main(["memory", "--params", "2851M", "--dp", "8", "--unit", "GiB"]) == 0
    lines = capsys.readouterr().out.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan TP=1"))
    assert lines[plan + 1] == "assumed:"  # the default variant needs no word about it
