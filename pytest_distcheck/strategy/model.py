"""The inputs of the strategy chooser and its rules' vocabulary: Model, Cluster, Rule, their checks, the
decision table's sources, and the Megatron-LM shapes assumed when a model gives no architecture."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pytest_distcheck.calc import precision
from pytest_distcheck.calc._checks import FINITE_POSITIVE, refuse
from pytest_distcheck.i18n import N_, _

GB = 1e9
INTRA_NODE = ("nvlink", "pcie")
INTER_NODE = ("fast", "slow")
ZERO3_MAX_DP = 512

# The decision table, in the order the chooser prefers plans: rule id -> (when -> what, its public source).
# `distcheck strategy --rules` prints it; theory 02, "Choosing a plan by topology", shows that output.
RULES: dict[str, tuple[str, str]] = {
    "R0": (N_("the whole model's states + activations fit on one GPU -> DDP (data parallelism only)"),
           N_("HF Transformers docs, perf_train_gpu_many, 'Scalability strategy' (fits on a single GPU: DDP or "
              "ZeRO)")),
    "R1": (N_("else ZeRO-1, then ZeRO-2, over all GPUs, when it fits -> the smallest such stage; its communication "
              "equals DDP's. Not across a slow inter-node link (R2)"),
           N_("Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.2 memory, sec. 7.2.1 communication = DDP's")),
    "R2": (N_("several nodes -> FSDP HYBRID_SHARD (shard in a node, replicate across): after ZeRO-1/2 on fast links, "
              "before any ZeRO stage over all GPUs on a slow inter-node link (only the all-reduce of each rank's 1/G "
              "gradient shard crosses nodes), after the pipeline plans on PCIe nodes (R5)"),
           N_("torch/distributed/fsdp/api.py ShardingStrategy.HYBRID_SHARD (fully_shard with a 2-D mesh: HSDP); "
              "NVIDIA, 'Massively scale your deep learning training with NCCL 2.4' (2019): trees for all-reduce "
              "only")),
    "R3": (N_("only full sharding fits -> ZeRO-3 / FSDP FULL_SHARD over all GPUs (1.5x DDP's communication); not over "
              "a slow inter-node link, not on >= 512 GPUs"),
           "Rajbhandari et al. 2019 (ZeRO) sec. 7.2.2; HF perf_train_gpu_many; Ultra-Scale Playbook"),
    "R4": (N_("no data-parallel sharding fits -> TP x PP x DP: TP within a node (t <= GPUs per node, t divides the "
              "heads), PP across nodes, the smallest t x p first, DP with ZeRO-1"),
           N_("Narayanan et al. 2021 sec. 3.2, Takeaways #1 and #2; Shoeybi et al. 2019 sec. 3 (heads split over "
              "TP); vLLM docs, parallelism_scaling (TP = GPUs per node, PP = nodes)")),
    "R5": (N_("no NVLink/NVSwitch in a node (PCIe) -> no TP; pipeline plans are tried before ZeRO-3 (PP sends only "
              "activations between GPUs)"),
           N_("HF Transformers docs v4.39, perf_train_gpu_many, 'Model doesn't fit onto a single GPU' (without "
              "NVLink, PP is faster than TP or ZeRO); vLLM docs, parallelism_scaling (no NVLink, e.g. L40S: PP "
              "instead of TP)")),
    "R6": (N_("PP -> its data-parallel part uses ZeRO-1, not ZeRO-2/3"),
           N_("HF perf_train_gpu_many (ZeRO-2/3 with PP); Ultra-Scale Playbook")),
    "R7": (N_("TP -> with sequence parallelism (no extra communication in the paper's count)"),
           "Korthikanti et al. 2022 sec. 4.2.2"),
    "R8": (N_("nothing fits -> selective, then full activation recomputation; then context parallelism (CP, the "
              "sequence split over ranks) the same way"),
           N_("Korthikanti et al. 2022 sec. 5 (selective) and Table 2 (full recomputation); Megatron-Core context "
              "parallelism docs")),
    "R9": (N_("PP -> m >= 4(p-1) micro-batches keep the bubble <= 1/5 of the iteration, (p-1)/(m+p-1)"),
           "Huang et al. 2019 (GPipe) sec. 2.3; Narayanan et al. 2021 sec. 2.2.1"),
}
# The sources with words of their own ("and", "memory", "(residual states)") are catalog messages: the command
# speaks every source as _(source); titles of papers and pages stay as published.
SOURCES = {rule: source for rule, (_when, source) in RULES.items()} | {
    "ACT": N_("Korthikanti et al. 2022 sec. 4.2.3, Eq. (5) and (6); shapes from Narayanan et al. 2021 Table 1"),
    "FIT": N_("Rajbhandari et al. 2019 (ZeRO) sec. 3.2 (residual states)"),
    "SIZE": N_("a plan uses every GPU: TP x PP x CP x DP = GPUs (Narayanan et al. 2021 sec. 3, n = p t d)"),
    "INF": N_("Pope et al. 2022, 'Efficiently Scaling Transformer Inference', sec. 2 (KV cache); vLLM docs, "
              "parallelism_scaling (TP within a node, PP across nodes)"),
}

# Narayanan et al. 2021 (arXiv:2104.04473), Table 1: (parameters, heads, hidden, layers); s = 2048, V = 51200
MEGATRON_TABLE_1 = (
    (1.7e9, 24, 2304, 24), (3.6e9, 32, 3072, 30), (7.5e9, 32, 4096, 36), (18.4e9, 48, 6144, 40),
    (39.1e9, 64, 8192, 48), (76.1e9, 80, 10240, 60), (145.6e9, 96, 12288, 80), (310.1e9, 128, 16384, 96),
    (529.6e9, 128, 20480, 105), (1008.0e9, 160, 25600, 128),
)


@dataclass(frozen=True)
class Model:
    """The model to train or serve.

    Attributes:
        params: number of parameters (count).
        layers, hidden, heads, seq_len: architecture; when any is missing the chooser assumes the
            Megatron-LM Table 1 shape nearest in size (and says so).
        micro_batch: sequences per micro-batch (b).
        recipe: precision recipe (``calc.precision.PRESETS`` name), default ``zero`` (16 bytes/parameter).
        kv_heads: key/value heads for the KV cache (grouped-query attention); default ``heads``.
    """

    params: float
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    seq_len: int | None = None
    micro_batch: int = 1
    recipe: str = "zero"
    kv_heads: int | None = None

    @property
    def has_architecture(self) -> bool:
        """Whether all four of layers, hidden, heads, seq_len were given."""
        return None not in (self.layers, self.hidden, self.heads, self.seq_len)


@dataclass(frozen=True)
class Cluster:
    """The cluster.

    Attributes:
        gpu_memory_gb: memory of one GPU in GB (1e9 bytes), e.g. 80 for an 80 GB H100.
        gpus_per_node: GPUs in one node.
        nodes: number of nodes.
        intra_node: ``"nvlink"`` (NVLink/NVSwitch) or ``"pcie"``.
        inter_node: ``"fast"`` (InfiniBand/RoCE class) or ``"slow"`` (Ethernet class); unused for 1 node.
    """

    gpu_memory_gb: float
    gpus_per_node: int
    nodes: int = 1
    intra_node: str = "nvlink"
    inter_node: str = "fast"

    @property
    def gpus(self) -> int:
        """Total GPUs."""
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Rule:
    """A rule that fired (or that a plan breaks): its id in the decision table, what it says here (in the language
    in use), its source (the English catalog message of :data:`SOURCES`; the command speaks it as ``_(source)``)."""

    id: str
    text: str
    source: str


MAX_GPUS = 1_000_000
MODEL_PARAMS = N_("model params must be a finite number > 0, got {value!r}")
MODEL_WHOLE = N_("model {name} must be a whole number >= 1, got {value!r}")
CLUSTER_WHOLE = N_("cluster {name} must be a whole number >= 1, got {value!r}")
TOO_MANY_GPUS = N_("{gpus} GPUs ({nodes} nodes x {per_node}) is more than {max:,}; is there a typo?")
ONE_OF = N_("{name} must be one of {choices}, got {value!r}")
USABLE_FRACTION = N_("usable_fraction must be in (0, 1], got {value!r}")
ASSUMED_SHAPE = N_("architecture not given: activations counted for the Megatron-LM {size:g}B shape (L = {layers} "
                   "layers, h = {hidden}, a = {heads} heads, s = {seq_len} tokens, b = {micro_batch} sequence(s)); "
                   "give --model or --layers, --hidden, --heads and --seq-len for your model")


def divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def validate(model: Model, cluster: Cluster, usable_fraction: float) -> None:
    if not (model.params > 0 and math.isfinite(model.params)):
        raise ValueError(_(MODEL_PARAMS).format(value=model.params))
    for name in ("layers", "hidden", "heads", "seq_len", "micro_batch", "kv_heads"):
        value = getattr(model, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(_(MODEL_WHOLE).format(name=name, value=value))
    precision.recipe(model.recipe)
    if not (cluster.gpu_memory_gb > 0 and math.isfinite(cluster.gpu_memory_gb)):
        raise refuse(FINITE_POSITIVE, "gpu_memory_gb", cluster.gpu_memory_gb)
    for name in ("gpus_per_node", "nodes"):
        value = getattr(cluster, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(_(CLUSTER_WHOLE).format(name=name, value=value))
    if cluster.gpus > MAX_GPUS:
        raise ValueError(_(TOO_MANY_GPUS).format(gpus=cluster.gpus, nodes=cluster.nodes,
                                                 per_node=cluster.gpus_per_node, max=MAX_GPUS))
    if cluster.intra_node not in INTRA_NODE:
        raise ValueError(_(ONE_OF).format(name="intra_node", choices=INTRA_NODE, value=cluster.intra_node))
    if cluster.inter_node not in INTER_NODE:
        raise ValueError(_(ONE_OF).format(name="inter_node", choices=INTER_NODE, value=cluster.inter_node))
    if not 0 < usable_fraction <= 1:
        raise ValueError(_(USABLE_FRACTION).format(value=usable_fraction))


def with_architecture(model: Model) -> tuple[Model, Rule | None]:
    """``model`` with every missing architecture field taken from the Megatron-LM Table 1 row nearest in
    size (log scale), and the rule saying so (None when nothing was assumed)."""
    if model.has_architecture:
        return model, None
    row = min(MEGATRON_TABLE_1, key=lambda r: abs(math.log(r[0] / model.params)))
    size, heads, hidden, layers = row
    filled = replace(model, layers=model.layers or layers, hidden=model.hidden or hidden,
                     heads=model.heads or heads, seq_len=model.seq_len or 2048)
    text = _(ASSUMED_SHAPE).format(size=size / 1e9, layers=filled.layers, hidden=filled.hidden, heads=filled.heads,
                                   seq_len=filled.seq_len, micro_batch=model.micro_batch)
    return filled, Rule("ACT", text, SOURCES["ACT"])


