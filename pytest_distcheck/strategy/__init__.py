"""Choose a parallelization strategy for a model and a cluster, check a given plan, and show the reasoning.

:func:`choose` walks the decision table (:data:`.model.RULES`, printed by ``distcheck strategy --rules``) from the
cheapest strategy to the most involved and returns the first that fits, with its memory per GPU, the candidates
rejected and the rules that fired, each with its source. :func:`check` names every rule a TP x PP x DP plan breaks;
:func:`choose_inference` places a model for serving (weights + KV cache). Fit: model states + activations of the
first stage (Korthikanti et al. 2022, Eq. (5)/(6)) + the gathered ZeRO-3/FSDP unit within ``usable_fraction`` of
the GPU's memory. Design record: docs/design/strategy.md.
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
