"""Calculators for distributed training: pure functions (no torch), one module per topic.

Each public function's docstring gives the units and the paper, section and equation it follows.
Modules: ``pipeline`` (bubble), ``precision`` (recipes: bytes per parameter of each model state, what
each scheme shards), ``memory`` (ZeRO/FSDP/Megatron model states, activations, a plan's per-GPU total),
``inference`` (weights + KV cache), ``collectives`` (alpha-beta times of ring/tree/halving-doubling/
hierarchical all-reduce and the other collectives, data-parallel bytes per step, nccl-tests algbw/busbw),
``tp_traffic`` (TP/SP/PP traffic), ``flops`` (training FLOPs, decode bounds), ``cost`` (price of a run),
``estimators`` (DeepSpeed's and Megatron's own formulas as named variants; ZeRO-Offload/Infinity placements),
``layout`` (a published configuration's DP and micro-batch count).
"""
