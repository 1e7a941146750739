"""The TP lab's model equals the dense model and PyTorch's own TP, on gloo CPU ranks, for TP 1, 2 and 4.

Tolerance: float32 throughout; logits within ``rtol=1e-4, atol=1e-5`` (TP only changes the order of
the sums in the row-parallel layers and the all-reduce), generated tokens exactly equal (the dense
logits' top-1/top-2 margin is checked to be far above that tolerance, so equality is a fair claim).
"""

from __future__ import annotations

import pytest
import torch

RTOL, ATOL = 1e-4, 1e-5
CFG = dict(vocab_size=64, n_layers=2, d_model=32, n_heads=4, max_seq_len=32, init_std=0.3)
DEGREES = [pytest.param(t, marks=pytest.mark.world_size(t), id=f"tp{t}") for t in (1, 2, 4)]


def _generate_three_ways(cfg_kwargs: dict, batch: int, prompt_len: int, new_tokens: int) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from experiments.tp_inference.comm import TPGroup
    from experiments.tp_inference.generate import generate
    from experiments.tp_inference.model import GPTConfig, build_model
    from experiments.tp_inference.shard import shard_model, shard_with_torch

    cfg = GPTConfig(**cfg_kwargs)
    dense = build_model(cfg, seed=0)
    prompt = torch.randint(0, cfg.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(1))
    ours = shard_model(dense, TPGroup.from_group())
    theirs = shard_with_torch(dense, init_device_mesh("cpu", (dist.get_world_size(),)))
    out = {"qkv_rows": ours.blocks[0].attn.qkv.weight.shape[0], "down_cols": ours.blocks[0].mlp.down.weight.shape[1]}
    for name, model in (("dense", dense), ("ours", ours), ("torch", theirs)):
        g = generate(model, prompt, new_tokens)
        out[name] = (g.prefill_logits, g.step_logits, g.tokens)
    return out


@pytest.mark.parametrize("t", DEGREES)
def test_generation_matches_dense_and_torch_tp(dist_world, t):
    results = dist_world.run(_generate_three_ways, CFG, batch=2, prompt_len=8, new_tokens=6, timeout=120)
    assert len(results) == t
    for rank, r in enumerate(results):
        # Each rank really holds 1/t of the sharded weights: 3*d/t QKV rows, d_ff/t down-projection inputs.
        assert r["qkv_rows"] == 3 * CFG["d_model"] // t
        assert r["down_cols"] == 4 * CFG["d_model"] // t
        dense_prefill, dense_steps, dense_tokens = r["dense"]
        top2 = dense_steps.topk(2, dim=-1).values
        assert (top2[..., 0] - top2[..., 1]).min() > 1e3 * ATOL, "greedy choice too close to call"
        for name in ("ours", "torch"):
            prefill, steps, tokens = r[name]
            where = f"{name}, rank {rank}"
            torch.testing.assert_close(prefill, dense_prefill, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, w=where: f"prefill logits, {w}: {m}")
            torch.testing.assert_close(steps, dense_steps, rtol=RTOL, atol=ATOL,
                                       msg=lambda m, w=where: f"decode logits, {w}: {m}")
            assert torch.equal(tokens, dense_tokens), f"{where}: {tokens.tolist()} != dense {dense_tokens.tolist()}"
        # Every rank ends each step with bit-identical logits, so they all pick the same token.
        assert torch.equal(r["ours"][1], results[0]["ours"][1])


def _block_grads(cfg_kwargs: dict) -> dict:
    import torch

    from experiments.tp_inference.comm import TPGroup
    from experiments.tp_inference.model import GPTConfig, build_model
    from experiments.tp_inference.shard import shard_model

    cfg = GPTConfig(**cfg_kwargs)
    dense_model = build_model(cfg, seed=0)
    tp = TPGroup.from_group()
    tp_block = shard_model(dense_model, tp).blocks[0].train()
    dense_block = dense_model.blocks[0].train()
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, cfg.d_model, generator=gen)
    weights = torch.randn(2, 5, cfg.d_model, generator=gen)  # a loss whose gradient is not uniform
    grads = {}
    for name, block in (("dense", dense_block), ("tp", tp_block)):
        xi = x.clone().requires_grad_(True)
        (block(xi) * weights).sum().backward()
        grads[name] = {"x": xi.grad, **{n: p.grad for n, p in block.named_parameters()}}
    return {"rank": tp.rank, "size": tp.size, **grads}


def _expected_shard(grad: torch.Tensor, name: str, rank: int, t: int) -> torch.Tensor:
    """The slice of a dense gradient that TP rank ``rank`` of ``t`` holds for parameter ``name``."""
    if name.startswith(("attn.qkv.", "mlp.up.")):  # column-parallel: weight rows and bias split
        return grad.chunk(t, dim=0)[rank]
    if name in ("attn.out.weight", "mlp.down.weight"):  # row-parallel weight: input features split
        return grad.chunk(t, dim=1)[rank]
    return grad  # replicated: LayerNorms and the row-parallel biases


@pytest.mark.parametrize("t", DEGREES)
def test_block_gradients_match_dense(dist_world, t):
    results = dist_world.run(_block_grads, CFG, timeout=120)
    for r in results:
        dense, tp = r["dense"], r["tp"]
        assert set(dense) == set(tp)
        # dL/dx is whole on every rank only if f all-reduces in backward.
        torch.testing.assert_close(tp["x"], dense["x"], rtol=RTOL, atol=ATOL)
        for name in dense:
            if name == "x":
                continue
            torch.testing.assert_close(
                tp[name], _expected_shard(dense[name], name, r["rank"], t), rtol=RTOL, atol=ATOL,
                msg=lambda m, n=name, k=r["rank"]: f"grad of {n} on rank {k}: {m}",
            )
