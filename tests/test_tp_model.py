"""The TP lab's model, KV cache and plan reading, in one process (no ranks needed). The kit's messages are
compared in the language in use (lab 02 has the learner run this file, Spanish included); the lab's own, English."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from experiments.tp_inference.comm import TPGroup
from experiments.tp_inference.generate import generate
from experiments.tp_inference.layers import ColumnParallelLinear, RowParallelLinear
from experiments.tp_inference.model import GPTConfig, build_model
from experiments.tp_inference.plan import BLOCK_PLAN
from experiments.tp_inference.shard import planned_layers, shard_model, shard_with_torch, tp_degree_problems
from pytest_distcheck.i18n import _
from pytest_distcheck.tp.plan import (
    DOES_NOT_FIT,
    EVEN_SHARDS,
    HEADS_NOT_DIVISIBLE,
    NOT_DIVISIBLE,
    PLAN_ENTRY,
    STYLES,
    UNKNOWN_STYLE,
)

CFG = GPTConfig(vocab_size=64, n_layers=2, d_model=32, n_heads=4, max_seq_len=32, init_std=0.3)
SOLO = TPGroup(group=None, rank=0, size=1)  # TP degree 1 needs no process group


def test_same_seed_same_weights_other_seed_other_weights():
    a, b, c = build_model(CFG, seed=0), build_model(CFG, seed=0), build_model(CFG, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.blocks[0].attn.qkv.weight, c.blocks[0].attn.qkv.weight)


def test_kv_cache_decoding_equals_running_the_whole_sequence():
    model = build_model(CFG, seed=0)
    prompt = torch.randint(0, CFG.vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    g = generate(model, prompt, new_tokens=5)
    full = model(torch.cat([prompt, g.tokens], 1))  # no cache: plain causal attention over everything
    torch.testing.assert_close(g.prefill_logits, full[:, :7], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(g.step_logits, full[:, 6:11], rtol=1e-4, atol=1e-5)


def test_cache_overflow_and_bad_lengths_are_errors():
    model = build_model(CFG, seed=0)
    with pytest.raises(ValueError, match="exceed max_seq_len 32"):
        generate(model, torch.zeros(1, 30, dtype=torch.long), new_tokens=3)
    with pytest.raises(ValueError, match="new_tokens must be >= 1"):
        generate(model, torch.zeros(1, 3, dtype=torch.long), new_tokens=0)
    cache = model.new_cache()
    model(torch.zeros(1, 30, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="30 cached \\+ 3 new tokens exceed max_seq_len 32"):
        model(torch.zeros(1, 3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="KV cache holds 32 tokens; 30 \\+ 3 do not fit"):
        cache.layers[0].update(torch.zeros(1, 4, 3, 8), torch.zeros(1, 4, 3, 8))


def test_shard_model_replaces_exactly_the_planned_layers():
    dense = build_model(CFG, seed=0)
    tp = shard_model(dense, SOLO)
    for block in tp.blocks:
        for path, style in BLOCK_PLAN.items():
            want = ColumnParallelLinear if style == "colwise" else RowParallelLinear
            assert isinstance(block.get_submodule(path), want), path
    assert isinstance(dense.blocks[0].attn.qkv, nn.Linear), "the dense model must be left alone"
    assert type(tp.lm_head) is nn.Linear


def test_plan_naming_a_missing_module_is_an_error_naming_it():
    dense = build_model(CFG, seed=0)
    bad = {**BLOCK_PLAN, "mlp.gate": "colwise"}
    msg = "plan entry 'mlp.gate': block blocks.0 has no module 'mlp.gate' .*attn.qkv, attn.out, mlp.up, mlp.down"
    with pytest.raises(ValueError, match=msg):
        shard_model(dense, SOLO, bad)
    with pytest.raises(ValueError, match="plan entry 'mlp.gate'"):
        shard_with_torch(dense, mesh=None, plan=bad)  # refused before PyTorch sees the plan
    with pytest.raises(ValueError, match="plan entry 'attn.qkvx': block blocks.0 has no module"):
        planned_layers(dense, {"attn.qkvx": "colwise"})


def test_plan_naming_a_non_linear_or_unknown_style_is_an_error():
    dense = build_model(CFG, seed=0)
    with pytest.raises(ValueError, match="plan entry 'ln1': blocks.0.ln1 is a LayerNorm, not an nn.Linear"):
        planned_layers(dense, {"ln1": "colwise"})
    unknown = _(UNKNOWN_STYLE).format(style="diagonal", known=", ".join(STYLES))
    with pytest.raises(ValueError, match=re.escape(_(PLAN_ENTRY).format(path="attn.qkv", problem=unknown))):
        planned_layers(dense, {"attn.qkv": "diagonal"})


def test_indivisible_split_is_an_error():
    with pytest.raises(ValueError, match="out_features = 96 is not divisible by the TP degree 5"):
        ColumnParallelLinear.from_dense(nn.Linear(32, 96), TPGroup(None, 0, 5))
    with pytest.raises(ValueError, match="d_model = 30 is not a multiple of n_heads = 4"):
        GPTConfig(d_model=30, n_heads=4)


def test_a_tp_degree_that_splits_a_layer_or_the_heads_unevenly_is_refused_before_any_weight_is_cut():
    # d_model 32, 4 heads: TP 8 divides every layer (qkv 96 rows, 12 per rank) but not the heads, so each
    # rank would hold half a head and the attention's reshape would fail much later.
    dense = build_model(CFG, seed=0)
    heads = _(HEADS_NOT_DIVISIBLE).format(heads=4, t=8, per=0.5)
    assert tp_degree_problems(CFG, 8) == [heads]
    assert tp_degree_problems(CFG, 2) == []
    assert _(NOT_DIVISIBLE).format(what="mlp.up out_features", length=128, t=3) in tp_degree_problems(CFG, 3)
    for shard in (lambda: shard_model(dense, TPGroup(None, 0, 8)),
                  lambda: shard_with_torch(dense, mesh=type("Mesh", (), {"size": lambda self: 8})())):
        with pytest.raises(ValueError) as info:
            shard()
        assert str(info.value) == _(DOES_NOT_FIT).format(t=8, problems=heads, even_shards=_(EVEN_SHARDS))


def test_shards_are_the_right_slices_of_the_dense_weights():
    dense = nn.Linear(8, 12)
    parts = [ColumnParallelLinear.from_dense(dense, TPGroup(None, r, 3)) for r in range(3)]
    assert torch.equal(torch.cat([p.weight for p in parts]), dense.weight)
    assert torch.equal(torch.cat([p.bias for p in parts]), dense.bias)
    rows = [RowParallelLinear.from_dense(dense, TPGroup(None, r, 2)) for r in range(2)]
    assert torch.equal(torch.cat([p.weight for p in rows], dim=1), dense.weight)
    assert all(torch.equal(p.bias, dense.bias) for p in rows)
