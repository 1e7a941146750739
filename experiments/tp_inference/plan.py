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
