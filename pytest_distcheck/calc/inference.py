"""Memory of serving a transformer: weights + KV cache per GPU under TP and PP.

KV cache (Pope et al. 2022, "Efficiently Scaling Transformer Inference", arXiv:2211.05102, sec. 2): each
layer keeps a key and a value vector per token of context, so the cache is
    2 x layers x batch x context x kv_heads x head_dim x bytes_per_element
bytes, where head_dim = hidden / heads and kv_heads = heads for multi-head attention (fewer with
grouped-query attention, Ainslie et al. 2023). TP splits the heads over t GPUs (Shoeybi et al. 2019
sec. 3), so each GPU keeps 1/t of the cache while t <= kv_heads (beyond that the KV heads are
replicated: 1/kv_heads); PP splits the layers over p stages.
"""

from __future__ import annotations

import math

from pytest_distcheck.calc import precision
from pytest_distcheck.calc._checks import FINITE_POSITIVE, refuse
from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

HEADS_DIVIDE = N_("need heads % kv_heads == 0 and hidden % heads == 0; got hidden={hidden}, heads={heads}, "
                  "kv_heads={kv_heads}")
LAYERS_PP = N_("layers={layers} must be divisible by pp={pp}")


def kv_cache_bytes(layers: int, batch: int, context: int, hidden: int, heads: int, kv_heads: int | None = None,
                   dtype: str = "bf16") -> float:
    """KV-cache bytes of the whole model: 2 L b s kv_heads (h / a) bytes (module docstring; Pope et al. 2022 sec. 2).

    Args:
        layers: L. batch: sequences served at once. context: tokens per sequence (prompt + generated).
        hidden: h. heads: a (query heads). kv_heads: key/value heads (default a). dtype: cache dtype.

    Raises:
        ValueError: a size not a whole number >= 1, kv_heads not dividing heads, hidden not divisible by heads,
            an unknown dtype.
    """
    for name, value in (("layers", layers), ("batch", batch), ("context", context), ("hidden", hidden),
                        ("heads", heads)):
        _whole(name, value)
    kv = heads if kv_heads is None else kv_heads
    _whole("kv_heads", kv)
    if heads % kv or hidden % heads:
        raise ValueError(_(HEADS_DIVIDE).format(hidden=hidden, heads=heads, kv_heads=kv))
    return 2.0 * layers * batch * context * kv * (hidden // heads) * precision.dtype_bytes(dtype)


def serving_bytes_per_gpu(params: float, layers: int, batch: int, context: int, hidden: int, heads: int,
                          kv_heads: int | None = None, tp: int = 1, pp: int = 1, weight_dtype: str = "bf16",
                          kv_dtype: str = "bf16") -> tuple[float, float]:
    """(weight bytes, KV-cache bytes) one GPU holds when serving under TP degree t and PP degree p.

    Weights: params x bytes / (t p). KV cache: :func:`kv_cache_bytes` / (min(t, kv_heads) p) (module docstring).
    Activations of a decode step (b x h per layer) are small and not counted.

    Raises:
        ValueError: as :func:`kv_cache_bytes`; params <= 0; tp/pp not whole numbers >= 1; layers % pp != 0.
    """
    if not (params > 0 and math.isfinite(params)):
        raise refuse(FINITE_POSITIVE, "params", params)
    _whole("tp", tp)
    _whole("pp", pp)
    if layers % pp:
        raise ValueError(_(LAYERS_PP).format(layers=layers, pp=pp))
    kv = heads if kv_heads is None else kv_heads
    weights = params * precision.dtype_bytes(weight_dtype) / (tp * pp)
    cache = kv_cache_bytes(layers, batch, context, hidden, heads, kv, kv_dtype) / (min(tp, kv) * pp)
    return weights, cache
