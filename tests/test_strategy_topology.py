"""Theory 02's "Choosing a plan by topology": every row of its table is what `distcheck strategy` chooses, and
the architecture presets are the published models' shapes (issue 27, point 2; issue 28, presets and units)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_distcheck.cli import main
from pytest_distcheck.commands._numbers import count
from pytest_distcheck.strategy import ARCHITECTURES, Cluster, Model, choose, preset_model

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "theory" / "02-parallelism-flavors.md"
SECTION = "## Choosing a plan by topology"


def table_rows() -> list[list[str]]:
    """The cells of each row of the section's table (header and rule lines aside)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(SECTION):text.index("\n## ", text.index(SECTION) + 1)]
    lines = [ln for ln in section.splitlines() if ln.startswith("| `")]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]


def test_the_table_covers_both_links_inside_and_between_nodes():
    rows = table_rows()
    assert len(rows) >= 8
    assert {r[3] for r in rows} == {"NVLink", "PCIe"} and {"fast", "slow"} <= {r[4] for r in rows}
    assert len({r[0] for r in rows}) >= 5


@pytest.mark.parametrize("row", table_rows(), ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}-{r[3]}-{r[4]}")
def test_each_row_is_what_the_chooser_picks(row):
    name, memory, shape, intra, inter, plan_text, per_gpu, rules = row
    name = name.strip("`")
    model = preset_model(name) if name in ARCHITECTURES else Model(count(name))
    nodes, gpus = (int(x) for x in shape.split(" x "))
    cluster = Cluster(float(memory.removesuffix(" GB")), gpus, nodes, intra.lower(),
                      "fast" if inter == "–" else inter)
    plan = choose(model, cluster)
    assert plan.fits
    assert plan_text == plan.name + (f", {plan.recompute} recomputation" if plan.recompute != "none" else "")
    assert per_gpu == f"{plan.total_bytes / 1e9:.1f} GB"
    assert rules.split(", ") == list(dict.fromkeys(r.id for r in plan.rules if r.id.startswith("R")))


def test_the_worked_pcie_example_keeps_tp_off_pcie():
    pcie = choose(preset_model("llama2-13b"), Cluster(40, 8, 2, "pcie"))
    nvlink = choose(preset_model("llama2-13b"), Cluster(40, 8, 2, "nvlink"))
    assert pcie.tp == 1 and pcie.pp > 1 and nvlink.tp == 8


# Vocabulary and MLP width of each preset (Llama 2: the HF config.json of meta-llama/Llama-2-*-hf; Llama 3:
# Dubey et al. 2024 Table 3 and the Llama-3.1 config.json, vocabulary 128,256): the parameter count of a Llama
# block stack is V h (embeddings) + V h (untied output) + L (attention + 3 h d_ff MLP + 2 h norms) + h.
LLAMA_SHAPES = {"llama2-7b": (32000, 11008), "llama2-13b": (32000, 13824), "llama2-70b": (32000, 28672),
                "llama3-8b": (128256, 14336), "llama3-70b": (128256, 28672), "llama3-405b": (128256, 53248)}


@pytest.mark.parametrize("name", sorted(LLAMA_SHAPES))
def test_a_llama_presets_parameters_follow_from_its_shape(name):
    arch = ARCHITECTURES[name]
    vocab, d_ff = LLAMA_SHAPES[name]
    h, head_dim = arch.hidden, arch.hidden // arch.heads
    attention = 2 * h * h + 2 * h * arch.kv_heads * head_dim  # q and o, then k and v of the KV heads
    per_layer = attention + 3 * h * d_ff + 2 * h
    assert arch.params == 2 * vocab * h + arch.layers * per_layer + h


def test_gpt3_is_the_papers_shape():
    arch = ARCHITECTURES["gpt3-175b"]
    assert (arch.params, arch.layers, arch.hidden, arch.heads, arch.seq_len) == (175e9, 96, 12288, 96, 2048)
    assert all(a.source for a in ARCHITECTURES.values())


def test_a_preset_by_name_with_a_flag_that_wins(capsys):
    assert main(["strategy", "--model", "llama2-70b", "--seq-len", "2048", "--gpu-memory-gb", "80",
                 "--gpus-per-node", "8", "--nodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "architecture llama2-70b: L = 80 layers, h = 8192, a = 64 heads (8 KV heads), s = 2048 tokens" in out
    assert "source: Touvron et al. 2023" in out


def test_without_the_model_size_the_command_says_what_to_give(capsys):
    assert main(["strategy", "--gpu-memory-gb", "80"]) == 2
    assert capsys.readouterr().err == ("distcheck strategy: give --params (or --model), --gpus-per-node "
                                       "(or --rules for the decision table)\n")


# Every quantity the chooser prints carries its unit: GB, %, or a count named by the words around it (the
# sources it cites are left aside).
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\d.])(?!e[+-])")


@pytest.mark.parametrize("argv", [
    ["--model", "llama2-13b", "--gpu-memory-gb", "40", "--gpus-per-node", "8", "--nodes", "2", "--intra", "pcie"],
    ["--params", "30B", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "2"],
    ["--params", "70B", "--gpu-memory-gb", "24", "--gpus-per-node", "1"],
    ["--model", "gpt3-175b", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "16",
     "--check", "tp=8,pp=4,dp=4,zero=zero3"],
    ["--model", "llama2-70b", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--inference", "--batch", "64"],
])
def test_every_printed_number_with_a_decimal_point_has_its_unit(argv, capsys):
    main(["strategy", *argv])
    out = capsys.readouterr().out
    for line in out.splitlines():
        line = line.partition("source: ")[0]  # citations: section and arXiv numbers are no quantities
        for m in _DECIMAL.finditer(line):
            after = line[m.end():m.end() + 3]
            assert after.startswith((" GB", "%", "B ", "x ")), f"no unit after {m.group()!r} in: {line}"
