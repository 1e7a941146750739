"""Choose a parallelization strategy for a model and a cluster, check a given plan, and show the reasoning.

:func:`choose` walks a decision table (``RULES``) from the cheapest strategy to the most involved and returns
the first that fits, with the memory per GPU it predicts, every candidate it rejected (and why), and the
rules that fired, each with its source. :func:`check` names every rule a given TP x PP x DP plan breaks.
:func:`choose_inference` places a model for serving (weights + KV cache).

Fit (training): model states (:func:`pytest_distcheck.calc.memory.plan_memory`: precision recipe, ZeRO
stage or FSDP strategy, TP and PP applied) + activations of the first pipeline stage (Korthikanti et al.
2022, Eq. (5)/(6)) + the gathered ZeRO-3/FSDP unit (DeepSpeed's largest-layer term) must stay within
``usable_fraction`` of the GPU's memory; the rest is the stated margin for what ZeRO sec. 3.2 calls
residual states (buffers, fragmentation) and the CUDA context. Without an architecture, activations are
counted for the Megatron-LM configuration nearest in size (Narayanan et al. 2021, Table 1), and the
plan says so: a plan never "fits" with its activations left out.

The decision table is data: :data:`pytest_distcheck.strategy.model.RULES` (rule id -> when -> what, and
its source), printed by ``distcheck strategy --rules``. Public architectures are presets by name
(:mod:`.presets`).
"""


# Modules: model (inputs, rules' sources, checks), training (choose), checking (check), serving (choose_inference).
from pytest_distcheck.strategy.checking import check
from pytest_distcheck.strategy.model import (
    INTER_NODE,
    INTRA_NODE,
    MAX_GPUS,
    MEGATRON_TABLE_1,
    RULES,
    SOURCES,
    ZERO3_MAX_DP,
    Cluster,
    Model,
    Rule,
    with_architecture,
)
from pytest_distcheck.strategy.presets import ARCHITECTURES, Architecture, preset_model
from pytest_distcheck.strategy.serving import InferencePlan, choose_inference
from pytest_distcheck.strategy.training import Plan, choose

__all__ = ["ARCHITECTURES", "INTER_NODE", "INTRA_NODE", "MAX_GPUS", "MEGATRON_TABLE_1", "RULES", "SOURCES",
           "ZERO3_MAX_DP", "Architecture", "Cluster", "InferencePlan", "Model", "Plan", "Rule", "check", "choose",
           "choose_inference", "preset_model", "with_architecture"]
