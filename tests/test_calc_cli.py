"""`distcheck bubble` and `distcheck memory` print the calculators' numbers with their formulas."""

from pytest_distcheck.cli import main


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
    assert "24.52 GB per GPU = states 10.25 + activations 10.27 + gathered unit 0 + margin 4" in out
    assert "precision megatron-bf16: 18 bytes/parameter" in out
