"""Published configurations: DP and the micro-batch count derived, and what does not add up flagged (issue 28).

Rows are copied from NVIDIA's public benchmark tables: NVIDIA/NeMo docs/source/performance/performance_summary.md
(NeMo 24.07, DGX-H100) and NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (25.11 NeMo container). The
tables give no layer count: it comes from the model's paper, named on each row.
"""

from fractions import Fraction

import pytest

from pytest_distcheck.calc import layout as lay

NEMO_2407 = "NVIDIA/NeMo performance_summary.md, NeMo 24.07, DGX-H100"
BRIDGE_2511 = "NVIDIA-NeMo/Megatron-Bridge performance-summary.md, 25.11"


def test_gpt3_175b_on_128_h100_adds_up():
    # NEMO_2407: GPT3-175B, 128 GPUs, GBS 256, MBS 1, TP 4, PP 8, CP 1, VP 6; 96 layers (Brown et al. 2020 Table 2.1)
    out = lay.derive_layout(gpus=128, tp=4, pp=8, cp=1, vp=6, mbs=1, gbs=256, layers=96)
    assert (out.dp, out.microbatches, out.problems) == (4, 64, ())


def test_llama3_70b_on_64_h100_adds_up_with_its_published_ga():
    # BRIDGE_2511, DGX-H100: LLAMA3_70B, 64 GPUs, GBS 128, MBS 1, TP 4, PP 8, CP 1, VP 5, GA 64; 80 layers
    # (Dubey et al. 2024 Table 3)
    out = lay.derive_layout(gpus=64, tp=4, pp=8, cp=1, vp=5, mbs=1, gbs=128, layers=80, ga=64)
    assert (out.dp, out.microbatches, out.problems) == (2, 64, ())


def test_llama31_405b_on_gb300_has_126_layers_over_32_model_chunks():
    # BRIDGE_2511, DGX-GB300: LLAMA3.1_405B, 256 GPUs, GBS 1536, MBS 1, TP 2, PP 8, CP 2, VP 4, GA 192; 126 layers
    out = lay.derive_layout(gpus=256, tp=2, pp=8, cp=2, vp=4, mbs=1, gbs=1536, layers=126, ga=192)
    assert (out.dp, out.microbatches) == (8, 192)
    assert out.problems == (lay.LAYERS_UNEVEN.format(layers=126, chunks=32, per="3.938"),)


def test_gpt_oss_120b_on_h100_publishes_a_ga_its_own_columns_contradict():
    # BRIDGE_2511, DGX-H100: GPT OSS 120B, 64 GPUs, GBS 512, MBS 4, TP 1, PP 4, CP 1, VP 1, GA 2. DP = 64/4 = 16,
    # so m = 512/(16 x 4) = 8, not 2 (the DGX-B200 row, PP 1, has GA 2); 36 layers (transformers GptOssConfig)
    out = lay.derive_layout(gpus=64, tp=1, pp=4, cp=1, vp=1, mbs=4, gbs=512, layers=36, ga=2)
    assert (out.dp, out.microbatches) == (16, 8)
    assert out.problems == (lay.GA_DIFFERS.format(ga=2, m=8),)


def test_a_gpu_count_or_batch_that_does_not_divide_is_flagged():
    # synthetic (no public row has it): 96 GPUs over TP 8 x PP 8; GBS 100 over DP 8 x MBS 3
    bad_dp = lay.derive_layout(gpus=96, tp=8, pp=8, mbs=1, gbs=96)
    assert bad_dp.dp == Fraction(3, 2) and bad_dp.problems[0] == lay.DP_NOT_WHOLE.format(gpus=96, model=64, dp="1.5")
    bad_m = lay.derive_layout(gpus=64, tp=8, pp=1, mbs=3, gbs=100)
    assert bad_m.problems == (lay.M_NOT_WHOLE.format(gbs=100, per_step=24, m="4.167"),)


def test_interleaving_needs_the_micro_batches_in_groups_of_pp():
    out = lay.derive_layout(gpus=32, tp=1, pp=4, vp=2, mbs=1, gbs=48, layers=32)   # DP 8, m = 6
    assert out.problems == (lay.INTERLEAVE_M.format(vp=2, pp=4, m=6),)


def test_counts_must_be_whole():
    with pytest.raises(ValueError, match="tp"):
        lay.derive_layout(gpus=8, tp=0, pp=1, mbs=1, gbs=8)


def test_the_layout_command_prints_the_derivation_and_exits_1_on_a_problem(capsys):
    from pytest_distcheck.cli import main

    assert main(["layout", "--gpus", "64", "--tp", "4", "--pp", "8", "--vp", "5", "--mbs", "1", "--gbs", "128",
                 "--layers", "80", "--ga", "64"]) == 0
    out = capsys.readouterr().out
    assert "64 GPUs = TP 4 x PP 8 x CP 1 x DP 2" in out and "= 128 / (2 x 1) = 64" in out
    assert "(p-1)/(v*m) = 7/320 = 0.02187" in out and "consistent" in out
    assert main(["layout", "--gpus", "64", "--pp", "4", "--mbs", "4", "--gbs", "512", "--ga", "2"]) == 1
    assert lay.GA_DIFFERS.format(ga=2, m=8) in capsys.readouterr().out
