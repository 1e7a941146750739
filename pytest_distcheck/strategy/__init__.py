"""Choose a parallelization strategy for a model and a cluster, check a given plan, and show the reasoning.

:func:`choose` walks a decision table (below) from the cheapest strategy to the most involved and returns
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

Decision table (order of preference):
  R0  DDP when the whole model's states + activations fit    HF perf_train_gpu_many, single-GPU case
      on one GPU.
  R1  ZeRO-1, then ZeRO-2 over all GPUs: the same            ZeRO sec. 5.1-5.2, sec. 7.2.1
      communication as DDP. Not across slow inter-node
      links (R2 instead).
  R2  multi-node: FSDP HYBRID_SHARD (shard in a node,        torch fsdp/api.py HYBRID_SHARD; NCCL runs
      replicate across). On a slow inter-node link it comes  all-gather/reduce-scatter as rings only,
      before any ZeRO stage over all GPUs: its all-gathers   all-reduce also as trees (NCCL 2.4 blog)
      and reduce-scatters stay in the node; only the
      all-reduce of each rank's 1/G gradient shard crosses.
  R3  ZeRO-3 / FSDP FULL_SHARD over all GPUs: only when      ZeRO sec. 7.2.2 (1.5x communication);
      ZeRO-1/2 do not fit, not over slow inter-node links,   HF perf_train_gpu_many multi-node;
      and not on >= 512 GPUs.                                Ultra-Scale Playbook (DP <= 512)
  R4  else TP x PP x DP: TP within a node (t <= GPUs per     Narayanan et al. 2021 sec. 3.2,
      node, t divides the heads), PP across nodes, smallest  Takeaways #1-#2; Shoeybi et al. 2019
      t x p first (even stages before uneven), DP ZeRO-1.
  R5  no NVLink (PCIe): no TP; pipeline plans are tried      HF perf_train_gpu_many ("without NVLink,
      before ZeRO-3 (PP sends only activations).             PP will be faster than TP or ZeRO")
  R6  PP pairs with ZeRO-1, not ZeRO-2/3.                    HF perf_train_gpu_many; Playbook
  R7  TP uses sequence parallelism (no extra traffic).       Korthikanti et al. 2022 sec. 4.2.2
  R8  if nothing fits, retry with selective, then full       Korthikanti et al. 2022 sec. 5
      activation recomputation; then context parallelism    Megatron-Core context parallelism docs
      (CP, the sequence split over ranks) the same way.     (Llama 3: CP 16 for 128K tokens)
  R9  PP: m >= 4(p-1) micro-batches keep the bubble <= 1/5   Huang et al. 2019 (GPipe) sec. 2.3
      of the iteration, (p-1)/(m+p-1).
"""


# Modules: model (inputs, rules' sources, checks), training (choose), checking (check), serving (choose_inference).
from pytest_distcheck.strategy.checking import check
from pytest_distcheck.strategy.model import (
    INTER_NODE,
    INTRA_NODE,
    MAX_GPUS,
    MEGATRON_TABLE_1,
    SOURCES,
    ZERO3_MAX_DP,
    Cluster,
    Model,
    Rule,
    with_architecture,
)
from pytest_distcheck.strategy.serving import InferencePlan, choose_inference
from pytest_distcheck.strategy.training import Plan, choose

__all__ = ["INTER_NODE", "INTRA_NODE", "MAX_GPUS", "MEGATRON_TABLE_1", "SOURCES", "ZERO3_MAX_DP", "Cluster",
           "InferencePlan", "Model", "Plan", "Rule", "check", "choose", "choose_inference", "with_architecture"]
