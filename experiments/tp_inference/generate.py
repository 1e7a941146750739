"""Greedy generation with a KV cache: one prefill over the prompt, then one decode step per token.

Works unchanged on the dense model and on both TP models: under TP each rank caches the keys and
values of its own heads only (``n_heads / t``), and every rank ends each step with the same logits
(the row-parallel all-reduce makes the hidden state whole; the LM head is replicated), so every rank
picks the same next token without any further communication.

Prefill processes ``b * s`` tokens at once (compute bound on a GPU); each decode step processes ``b``
tokens and must read every weight once (memory-bandwidth bound at small ``b``), see
``docs/theory/04-distributed-inference.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from experiments.tp_inference.model import GPT, KVCache


@dataclass
class Generation:
    """What :func:`generate` returns.

    Attributes:
        tokens: int64 ``[b, new_tokens]``, the greedily chosen tokens.
        prefill_logits: ``[b, s, vocab]``, the logits of every prompt position.
        step_logits: ``[b, new_tokens, vocab]``, the logits each token was chosen from.
    """

    tokens: torch.Tensor
    prefill_logits: torch.Tensor
    step_logits: torch.Tensor


@torch.no_grad()
def prefill(model: GPT, prompt: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Run the prompt (int64 ``[b, s]``) through ``model``, filling ``cache``; logits ``[b, s, vocab]``."""
    return model(prompt, cache)


@torch.no_grad()
def decode_step(model: GPT, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """One decode step for the last tokens (int64 ``[b, 1]``); logits ``[b, vocab]``."""
    return model(token, cache)[:, -1]


def generate(model: GPT, prompt: torch.Tensor, new_tokens: int) -> Generation:
    """Greedy decoding of ``new_tokens`` tokens after ``prompt`` (int64 ``[b, s]``, on the model's device).

    Raises:
        ValueError: ``new_tokens < 1``, or prompt plus new tokens exceed the model's ``max_seq_len``.
    """
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be >= 1, got {new_tokens}")
    if prompt.shape[1] + new_tokens > model.cfg.max_seq_len:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + new_tokens {new_tokens} exceed max_seq_len {model.cfg.max_seq_len}"
        )
    cache = model.new_cache()
    prefill_logits = prefill(model, prompt, cache)
    logits = prefill_logits[:, -1]
    tokens, steps = [], []
    for i in range(new_tokens):
        if i:
            logits = decode_step(model, tokens[-1], cache)
        steps.append(logits)
        tokens.append(logits.argmax(-1, keepdim=True))
    return Generation(torch.cat(tokens, 1), prefill_logits, torch.stack(steps, 1))
