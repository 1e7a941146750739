"""The TP sharding plan of one transformer block of the lab's model (Megatron-LM, sec. 3).

Module paths are relative to one decoder block; styles are defined in ``pytest_distcheck.tp.plan``.
The model, the diagram check and the docs all read this mapping.
"""

BLOCK_PLAN: dict[str, str] = {
    "attn.qkv": "colwise",  # heads split across ranks
    "attn.out": "rowwise",  # all-reduce after
    "mlp.up": "colwise",
    "mlp.down": "rowwise",  # all-reduce after
}

# Read by the diagram check only: each of these sublayers adds its input back to its output
# (pre-LayerNorm residual, Radford et al. 2019, sec. 2.3), so its drawing needs that add.
BLOCK_PLAN_RESIDUAL: tuple[str, ...] = ("attn", "mlp")
