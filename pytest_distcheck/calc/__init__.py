"""Calculators for distributed training: pure functions (no torch), one module per topic.

Each public function's docstring gives the units and the paper, section and equation it follows.
Modules: ``pipeline`` (bubble), ``memory`` (ZeRO/FSDP model states, activations), ``collectives``
(alpha-beta times, nccl-tests algbw/busbw), ``tp_traffic`` (TP/SP/PP traffic), ``flops`` (training
FLOPs, decode bounds), ``cost`` (price of a run).
"""
