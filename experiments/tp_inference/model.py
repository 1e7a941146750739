"""A small GPT-style decoder (pre-LayerNorm, GELU MLP, learned positions) with seeded random weights.

The block follows GPT-2 (Radford et al. 2019) as Megatron-LM (arXiv:1909.08053, sec. 3) shards it:
an attention with one fused QKV projection and an output projection, and an MLP with an up and a down
projection. Nothing is downloaded: weights come from a seed.

The same classes serve the dense model and both TP versions (``shard.py``): attention reads how many
heads it holds from the width of its QKV output, so a block whose ``attn.qkv`` was replaced by a
column-parallel layer simply runs on its ``n_heads / t`` heads. For that to give each rank whole heads,
the fused QKV output is laid out head by head, ``[n_heads, 3, head_dim]`` (Megatron-LM's layout too,
``megatron/core/transformer/attention.py``), so any contiguous split of it along ``out_features``
holds the q, k and v of whole heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the model. ``d_ff`` defaults to ``4 * d_model``; ``init_std`` is the weights' std.

    Raises:
        ValueError: ``d_model`` is not a multiple of ``n_heads``, or a size is < 1.
    """

    vocab_size: int = 64
    n_layers: int = 2
    d_model: int = 32
    n_heads: int = 4
    d_ff: int = 0
    max_seq_len: int = 64
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layers", "d_model", "n_heads", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"GPTConfig.d_model = {self.d_model} is not a multiple of n_heads = {self.n_heads}")
        if self.d_ff == 0:
            object.__setattr__(self, "d_ff", 4 * self.d_model)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class LayerCache:
    """Keys and values of one attention layer for the tokens seen so far.

    Buffers ``[batch, heads held, max_len, head_dim]`` are allocated at the first write, with the
    heads this rank holds (all of them in the dense model, ``n_heads / t`` under TP).
    """

    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self.length = 0
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k, v`` (``[b, h, s, hd]``); return all keys and values so far (``[b, h, T, hd]``).

        Raises:
            ValueError: the cache would hold more than ``max_len`` tokens.
        """
        b, h, s, hd = k.shape
        if self.length + s > self.max_len:
            raise ValueError(f"KV cache holds {self.max_len} tokens; {self.length} + {s} do not fit")
        if self.k is None:
            self.k = k.new_empty(b, h, self.max_len, hd)
            self.v = v.new_empty(b, h, self.max_len, hd)
        self.k[:, :, self.length : self.length + s] = k
        self.v[:, :, self.length : self.length + s] = v
        self.length += s
        return self.k[:, :, : self.length], self.v[:, :, : self.length]


class KVCache:
    """One :class:`LayerCache` per decoder block; ``length`` is the number of tokens cached."""

    def __init__(self, n_layers: int, max_len: int) -> None:
        self.layers = [LayerCache(max_len) for _ in range(n_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length


class Attention(nn.Module):
    """Causal multi-head self-attention. ``x``: ``[b, s, d_model]`` -> ``[b, s, d_model]``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # out features laid out [n_heads, 3, head_dim]
        self.out = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, -1, 3, self.head_dim)  # -1: the heads this rank holds
        q, k, v = qkv.permute(3, 0, 2, 1, 4).unbind(0)  # each [b, h, s, hd]
        if cache is not None:
            k, v = cache.update(k, v)
        total = k.shape[2]
        if s == total:  # prefill from an empty cache: plain causal attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif s == 1:  # one decode step: the new token attends to everything cached
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # new tokens attend to every cached token and causally among themselves
            mask = torch.ones(s, total, dtype=torch.bool, device=x.device).tril(total - s)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    """``down(GELU(up(x)))``. ``x``: ``[b, s, d_model]`` -> ``[b, s, d_model]``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """Pre-LN decoder block: ``x + attn(ln1(x))``, then ``+ mlp(ln2(.))``. Shapes ``[b, s, d_model]``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layers`` blocks, final LayerNorm, LM head (not tied).

    ``forward(idx, cache=None)``: ``idx`` int64 ``[b, s]`` -> logits ``[b, s, vocab_size]`` (dtype of
    the weights). With a cache, positions continue from ``cache.length`` and the cache is extended.
    Raises ValueError when the positions would pass ``max_seq_len``.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        start = cache.length if cache is not None else 0
        if start + idx.shape[1] > self.cfg.max_seq_len:
            raise ValueError(
                f"{start} cached + {idx.shape[1]} new tokens exceed max_seq_len {self.cfg.max_seq_len}"
            )
        pos = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, cache.layers[i] if cache is not None else None)
        return self.lm_head(self.ln_f(x))

    def new_cache(self) -> KVCache:
        """An empty KV cache for up to ``max_seq_len`` tokens."""
        return KVCache(self.cfg.n_layers, self.cfg.max_seq_len)


def build_model(cfg: GPTConfig, seed: int = 0, device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32) -> GPT:
    """The dense model with weights drawn from ``seed``, built on ``device`` in ``dtype``.

    Every rank that calls this with the same arguments on the same kind of device gets the same
    weights, so each can cut its own shard without any weights being sent. Linear weights and
    embeddings ~ N(0, init_std^2), output projections (``attn.out``, ``mlp.down``) scaled by
    ``1/sqrt(2 n_layers)`` as in GPT-2; biases ~ N(0, init_std^2) too (not zero, so a bias added
    twice under TP would show); LayerNorms start at weight 1, bias 0.
    """
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):
        model = GPT(cfg).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln_"):
                continue
            std = cfg.init_std
            if name.endswith(("attn.out.weight", "mlp.down.weight")):
                std /= (2 * cfg.n_layers) ** 0.5
            p.normal_(0.0, std, generator=gen)
    return model.eval()
