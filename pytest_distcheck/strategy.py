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

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from pytest_distcheck.calc import inference, memory, pipeline, precision

GB = 1e9
INTRA_NODE = ("nvlink", "pcie")
INTER_NODE = ("fast", "slow")
ZERO3_MAX_DP = 512

SOURCES = {
    "R0": "HF Transformers docs, perf_train_gpu_many ('model fits onto a single GPU')",
    "R1": "Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.2 memory, sec. 7.2.1 communication = DDP's",
    "R2": "torch/distributed/fsdp/api.py ShardingStrategy.HYBRID_SHARD; NVIDIA, 'Massively scale your deep "
          "learning training with NCCL 2.4' (2019): trees for all-reduce only",
    "R3": "Rajbhandari et al. 2019 (ZeRO) sec. 7.2.2; HF perf_train_gpu_many; Ultra-Scale Playbook",
    "R4": "Narayanan et al. 2021 sec. 3.2, Takeaways #1 and #2; Shoeybi et al. 2019 sec. 3 (heads split over TP)",
    "R5": "HF perf_train_gpu_many, 'Model doesn't fit onto a single GPU' (without NVLink PP is faster than TP "
          "or ZeRO); vLLM docs, parallelism_scaling",
    "R6": "HF perf_train_gpu_many (ZeRO-2/3 with PP); Ultra-Scale Playbook",
    "R7": "Korthikanti et al. 2022 sec. 4.2.2",
    "R8": "Korthikanti et al. 2022 sec. 5 (selective) and Table 2 (full recomputation)",
    "R9": "Huang et al. 2019 (GPipe) sec. 2.3; Narayanan et al. 2021 sec. 2.2.1",
    "ACT": "Korthikanti et al. 2022 sec. 4.2.3, Eq. (5) and (6); shapes from Narayanan et al. 2021 Table 1",
    "FIT": "Rajbhandari et al. 2019 (ZeRO) sec. 3.2 (residual states)",
    "SIZE": "a plan uses every GPU: TP x PP x CP x DP = GPUs (Narayanan et al. 2021 sec. 3, n = p t d)",
    "INF": "Pope et al. 2022, 'Efficiently Scaling Transformer Inference', sec. 2 (KV cache); vLLM docs, "
           "parallelism_scaling (TP within a node, PP across nodes)",
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
    """A rule that fired (or that a plan breaks): its id in the decision table, what it says here, its source."""

    id: str
    text: str
    source: str


@dataclass(frozen=True)
class Plan:
    """A recommended (or checked) training plan.

    Attributes:
        name: e.g. ``"DDP"``, ``"ZeRO-2 (FSDP SHARD_GRAD_OP)"``, ``"TP=8 x PP=4 x DP=2, ZeRO-1"``.
        tp, pp, dp, cp: degrees (cp: context parallelism, the sequence split), tp * pp * cp * dp = GPUs.
        zero: scheme of the data-parallel part (``"ddp"``, ``"zero1"``, ``"zero2"``, ``"zero3"``).
        fsdp: the matching FSDP sharding strategy, or ``""``.
        shard_group: ranks the model states are sharded over (dp, or GPUs per node for HYBRID_SHARD).
        recompute: activation recomputation assumed (``"none"``, ``"selective"``, ``"full"``).
        sequence_parallel: whether SP is assumed (with tp > 1).
        model_state_bytes, activation_bytes, gathered_bytes: predicted memory per GPU, bytes.
        usable_bytes: the memory the prediction must fit in.
        fits: whether it fits (False only when nothing does; the plan is then the least-memory one).
        microbatches: suggested micro-batches per batch when pp > 1, else None.
        rules: the rules that fired, in order. rejected: candidates tried first, with why.
        assumptions: what the memory estimate assumed (precision, architecture, what is not counted).
    """

    name: str
    tp: int
    pp: int
    dp: int
    zero: str
    fsdp: str
    shard_group: int
    recompute: str
    sequence_parallel: bool
    model_state_bytes: float
    activation_bytes: float
    usable_bytes: float
    fits: bool
    microbatches: int | None = None
    rules: tuple[Rule, ...] = ()
    rejected: tuple[str, ...] = field(default_factory=tuple)
    gathered_bytes: float = 0.0
    assumptions: tuple[str, ...] = ()
    cp: int = 1

    @property
    def total_bytes(self) -> float:
        """model states + activations + gathered unit per GPU, bytes."""
        return self.model_state_bytes + self.activation_bytes + self.gathered_bytes


@dataclass(frozen=True)
class _Candidate:
    name: str
    rule: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: str = "ddp"
    fsdp: str = ""
    shard_group: int = 1
    cp: int = 1


MAX_GPUS = 1_000_000


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def _validate(model: Model, cluster: Cluster, usable_fraction: float) -> None:
    if not (model.params > 0 and math.isfinite(model.params)):
        raise ValueError(f"model params must be a finite number > 0, got {model.params!r}")
    for name in ("layers", "hidden", "heads", "seq_len", "micro_batch", "kv_heads"):
        value = getattr(model, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"model {name} must be a whole number >= 1, got {value!r}")
    precision.recipe(model.recipe)
    if not (cluster.gpu_memory_gb > 0 and math.isfinite(cluster.gpu_memory_gb)):
        raise ValueError(f"gpu_memory_gb must be a finite number > 0, got {cluster.gpu_memory_gb!r}")
    for name in ("gpus_per_node", "nodes"):
        value = getattr(cluster, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"cluster {name} must be a whole number >= 1, got {value!r}")
    if cluster.gpus > MAX_GPUS:
        raise ValueError(f"{cluster.gpus} GPUs ({cluster.nodes} nodes x {cluster.gpus_per_node}) is more than "
                         f"{MAX_GPUS:,}; is there a typo?")
    if cluster.intra_node not in INTRA_NODE:
        raise ValueError(f"intra_node must be one of {INTRA_NODE}, got {cluster.intra_node!r}")
    if cluster.inter_node not in INTER_NODE:
        raise ValueError(f"inter_node must be one of {INTER_NODE}, got {cluster.inter_node!r}")
    if not 0 < usable_fraction <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction!r}")


def with_architecture(model: Model) -> tuple[Model, Rule | None]:
    """``model`` with every missing architecture field taken from the Megatron-LM Table 1 row nearest in
    size (log scale), and the rule saying so (None when nothing was assumed)."""
    if model.has_architecture:
        return model, None
    row = min(MEGATRON_TABLE_1, key=lambda r: abs(math.log(r[0] / model.params)))
    size, heads, hidden, layers = row
    filled = replace(model, layers=model.layers or layers, hidden=model.hidden or hidden,
                     heads=model.heads or heads, seq_len=model.seq_len or 2048)
    return filled, Rule("ACT", f"architecture not given: activations counted for the Megatron-LM {size / 1e9:g}B "
                               f"shape (L = {filled.layers}, h = {filled.hidden}, a = {filled.heads}, "
                               f"s = {filled.seq_len}, b = {model.micro_batch}); give --layers, --hidden, "
                               "--heads and --seq-len for your model", SOURCES["ACT"])


def _candidates(model: Model, cluster: Cluster, notes: list[Rule]) -> list[_Candidate]:
    n, g, nodes = cluster.gpus, cluster.gpus_per_node, cluster.nodes
    slow = nodes > 1 and cluster.inter_node == "slow"
    pcie = cluster.intra_node == "pcie"
    out = [_Candidate("DDP" if n > 1 else "single GPU", "R0", dp=n, fsdp="NO_SHARD" if n > 1 else "")]
    hsdp = [_Candidate(f"FSDP HYBRID_SHARD (shard over {g} GPUs in a node, replicate across {nodes} nodes)",
                       "R2", dp=n, zero="zero3", fsdp="HYBRID_SHARD", shard_group=g)] if nodes > 1 and g > 1 else []
    if slow:
        out += hsdp
        notes.append(Rule("R2", f"slow inter-node link: no ZeRO stage over all {n} GPUs; FSDP HYBRID_SHARD keeps "
                                "its all-gathers and reduce-scatters inside the node", SOURCES["R2"]))
    elif n > 1:
        out += [_Candidate("ZeRO-1", "R1", dp=n, zero="zero1", shard_group=n),
                _Candidate("ZeRO-2 (FSDP SHARD_GRAD_OP)", "R1", dp=n, zero="zero2", fsdp="SHARD_GRAD_OP",
                           shard_group=n)] + hsdp
    zero3 = []
    if n > 1 and not slow and n < ZERO3_MAX_DP:
        zero3 = [_Candidate("ZeRO-3 (FSDP FULL_SHARD)", "R3", dp=n, zero="zero3", fsdp="FULL_SHARD", shard_group=n)]
    elif n > 1:
        why = "slow inter-node links" if slow else f"{n} GPUs >= {ZERO3_MAX_DP}"
        notes.append(Rule("R3", f"ZeRO-3 / FULL_SHARD over all {n} GPUs not considered ({why})", SOURCES["R3"]))
    if not pcie:
        out += zero3
    tps = [1] if pcie else [t for t in _divisors(g) if model.heads is None or model.heads % t == 0]
    grid = []
    cps = [c for c in _divisors(n) if model.seq_len is None or model.seq_len % (2 * c) == 0]
    for p in _divisors(n):
        if model.layers is not None and p > model.layers:
            continue
        for t in tps:
            for cp in cps:
                if (t == 1 and p == 1 and cp == 1) or n % (t * p * cp):
                    continue
                d = n // (t * p * cp)
                zero = "zero1" if d * cp > 1 else "ddp"
                name = f"TP={t}" + (f" x CP={cp}" if cp > 1 else "") + f" x PP={p} x DP={d}"
                grid.append(_Candidate(name + (", ZeRO-1" if zero == "zero1" else ""), "R4", tp=t, pp=p, dp=d,
                                       zero=zero, shard_group=d * cp, cp=cp))
    # context parallelism last (only long sequences need it); least model parallelism first; even stages before
    # uneven ones (Llama 3 put 126 layers on 16 stages); TP before PP
    out += sorted(grid, key=lambda c: (c.cp, c.tp * c.pp, bool(model.layers and model.layers % c.pp), c.pp))
    if pcie:
        out += zero3
    return out


def _memory(model: Model, c: _Candidate, recompute: str) -> memory.PlanMemory:
    sharding = "HYBRID_SHARD" if c.fsdp == "HYBRID_SHARD" else c.zero
    return memory.plan_memory(
        model.params, recipe=model.recipe, sharding=sharding, dp=c.dp, tp=c.tp, pp=c.pp, cp=c.cp,
        shard_group=c.shard_group if c.zero != "ddp" else None, layers=model.layers, hidden=model.hidden,
        heads=model.heads, seq_len=model.seq_len, micro_batch=model.micro_batch, recompute=recompute,
        sequence_parallel=c.tp > 1)


def choose(model: Model, cluster: Cluster, usable_fraction: float = 0.9) -> Plan:
    """The recommended strategy for training ``model`` on ``cluster`` (see the module docstring).

    Args:
        model: parameters, optionally architecture, micro-batch and precision recipe.
        cluster: GPU memory, GPUs per node, nodes, intra-/inter-node interconnect.
        usable_fraction: share of GPU memory the predicted memory may use (the rest is the margin).

    Returns a :class:`Plan` with tp * pp * cp * dp == cluster.gpus and tp <= cluster.gpus_per_node; its
    total_bytes includes activations.

    Raises:
        ValueError: a model or cluster value out of range, naming it.
    """
    _validate(model, cluster, usable_fraction)
    usable = usable_fraction * cluster.gpu_memory_gb * GB
    notes: list[Rule] = [Rule("FIT", f"a plan fits when model states + activations + gathered ZeRO-3/FSDP unit <= "
                                     f"{usable_fraction:.0%} of {cluster.gpu_memory_gb:g} GB = {usable / GB:.1f} GB "
                                     f"(margin {(1 - usable_fraction) * cluster.gpu_memory_gb:.1f} GB for buffers, "
                                     "fragmentation, CUDA context)", SOURCES["FIT"])]
    model, assumed = with_architecture(model)
    if assumed:
        notes.append(assumed)
    candidates = _candidates(model, cluster, notes)
    rejected: list[str] = []
    best: tuple[float, _Candidate, str] | None = None
    # context parallelism only once nothing without it fits, even with full recomputation (long sequences)
    passes = [(r, [c for c in candidates if c.cp == 1]) for r in ("none", "selective", "full")]
    passes += [(r, [c for c in candidates if c.cp > 1]) for r in ("none", "selective", "full")]
    for recompute, group in passes:
        for c in group:
            mem = _memory(model, c, recompute)
            if mem.total_bytes <= usable:
                return _plan(c, recompute, mem, usable, True, cluster, notes, rejected)
            rejected.append(f"{c.name}, recompute {recompute}: {mem.total_bytes / GB:.1f} GB per GPU (states "
                            f"{mem.states.total_bytes / GB:.1f} + activations {mem.activation_bytes / GB:.1f}"
                            + (f" + gathered unit {mem.gathered_bytes / GB:.1f}" if mem.gathered_bytes else "")
                            + f") > {usable / GB:.1f} GB")
            if best is None or mem.total_bytes < best[0]:
                best = (mem.total_bytes, c, recompute)
    assert best is not None
    _, c, recompute = best
    return _plan(c, recompute, _memory(model, c, recompute), usable, False, cluster, notes, rejected)


def _plan(c: _Candidate, recompute: str, mem: memory.PlanMemory, usable: float, fits: bool, cluster: Cluster,
          notes: list[Rule], rejected: list[str]) -> Plan:
    rules = list(notes)
    texts = {
        "R0": "model states and activations fit on one GPU: "
              + ("data parallelism (DDP)" if c.dp > 1 else "no parallelism needed"),
        "R1": f"{c.name} over all {c.dp} GPUs is the smallest ZeRO stage that fits; its communication equals "
              "DDP's",
        "R2": "shard model states within each node over fast intra-node links and replicate across nodes",
        "R3": "only full sharding of parameters, gradients and optimizer states fits; it costs 1.5x DDP's "
              "communication",
        "R4": f"no data-parallel sharding fits: TP={c.tp} within a node (<= {cluster.gpus_per_node} GPUs per "
              f"node), PP={c.pp}" + (" across nodes" if c.pp > 1 and cluster.nodes > 1 else "") +
              (f", CP={c.cp} (the sequence split, Megatron-Core context parallelism)" if c.cp > 1 else "") +
              f", DP={c.dp} (TP x {'CP x ' if c.cp > 1 else ''}PP x DP = {cluster.gpus})",
    }
    if fits:
        rules.append(Rule(c.rule, texts[c.rule], SOURCES[c.rule]))
    if cluster.intra_node == "pcie":
        if c.pp > 1:
            why = "pipeline stages instead (they send only activations between GPUs)"
        elif c.zero == "zero3":
            why = "pipeline plans were tried before ZeRO-3, but none fits (see the rejected list)"
        else:
            why = "none needed: the data-parallel plan above fits"
        rules.append(Rule("R5", f"no NVLink within a node: no tensor parallelism; {why}", SOURCES["R5"]))
    if c.pp > 1 and c.dp > 1:
        rules.append(Rule("R6", "with pipeline parallelism the data-parallel part uses ZeRO-1", SOURCES["R6"]))
    if c.tp > 1:
        rules.append(Rule("R7", f"sequence parallelism with TP={c.tp} shards LayerNorm/dropout activations at "
                                "no extra communication", SOURCES["R7"]))
    if recompute != "none":
        rules.append(Rule("R8", f"{recompute} activation recomputation is needed to fit", SOURCES["R8"]))
    microbatches = None
    if c.pp > 1:
        microbatches = pipeline.min_microbatches_for_bubble(c.pp, 0.2)
        frac = pipeline.bubble_fraction_of_total(c.pp, microbatches)
        rules.append(Rule("R9", f"use m >= {microbatches} micro-batches per batch: bubble "
                                f"{frac:.1%} of the iteration", SOURCES["R9"]))
    if not fits:
        rules.append(Rule("FIT", f"nothing fits: {c.name} is the least-memory plan; add GPUs, shrink the "
                                 "micro-batch or sequence, or offload", SOURCES["FIT"]))
    return Plan(name=c.name, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, zero=c.zero, fsdp=c.fsdp, shard_group=c.shard_group,
                recompute=recompute, sequence_parallel=c.tp > 1, model_state_bytes=mem.states.total_bytes,
                activation_bytes=mem.activation_bytes, usable_bytes=usable, fits=fits, microbatches=microbatches,
                rules=tuple(rules), rejected=tuple(rejected), gathered_bytes=mem.gathered_bytes,
                assumptions=mem.assumptions)


def check(model: Model, cluster: Cluster, tp: int, pp: int, dp: int, zero: str = "zero1", cp: int = 1,
          recompute: str = "selective", usable_fraction: float = 0.9) -> tuple[list[Rule], memory.PlanMemory | None]:
    """Every rule the plan TP x PP x CP x DP (data-parallel part under ``zero``) breaks on ``cluster``.

    Rules checked: SIZE (tp pp cp dp = GPUs); R4 (tp <= GPUs per node; heads and hidden divisible by tp;
    pp <= layers; uneven stages are allowed and the largest is counted, as Llama 3 put 126 layers on 16);
    R5 (tp > 1 without NVLink); R6 (PP with ZeRO-2/3); R3 (ZeRO-3 across a slow inter-node link, or over
    >= 512 ranks); FIT (the memory of :func:`memory.plan_memory`
    over the usable share). CP needs seq_len divisible by 2 cp (Megatron-Core context parallelism splits
    the sequence into 2 cp chunks for load balance).

    Returns (the broken rules, possibly empty; the plan's memory, or None when it cannot be computed).

    Raises:
        ValueError: a degree not a whole number >= 1, an unknown ZeRO stage, a bad model or cluster.
    """
    _validate(model, cluster, usable_fraction)
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    key = precision.scheme(zero)
    model, _ = with_architecture(model)
    assert model.layers is not None and model.heads is not None and model.hidden is not None
    assert model.seq_len is not None
    g, n = cluster.gpus_per_node, cluster.gpus
    broken: list[Rule] = []

    def breaks(rule: str, text: str) -> None:
        broken.append(Rule(rule, text, SOURCES[rule]))

    if tp * pp * cp * dp != n:
        breaks("SIZE", f"TP x PP x CP x DP = {tp} x {pp} x {cp} x {dp} = {tp * pp * cp * dp}, but the cluster has "
                       f"{n} GPUs")
    if tp > g:
        breaks("R4", f"TP={tp} spans nodes: keep TP <= {g} GPUs per node, pipeline across nodes")
    if model.heads % tp or model.hidden % tp:
        breaks("R4", f"TP={tp} must divide the attention heads ({model.heads}) and the hidden size ({model.hidden})")
    if pp > model.layers:
        breaks("R4", f"PP={pp} is more stages than layers ({model.layers})")
    if model.seq_len % (2 * cp):
        breaks("R4", f"CP={cp} needs seq_len ({model.seq_len}) divisible by 2 x CP")
    if tp > 1 and cluster.intra_node == "pcie":
        breaks("R5", f"TP={tp} without NVLink: TP's 4 all-reduces per layer run over PCIe; use PP instead")
    if pp > 1 and key in ("zero2", "zero3"):
        breaks("R6", f"{zero} with PP={pp}: gradients/parameters are reduce-scattered/gathered for every "
                     "micro-batch; use ZeRO-1")
    # Megatron's rank order puts TP, then CP, then DP innermost: the DP group leaves the node when tp cp dp > g
    if key == "zero3" and cluster.nodes > 1 and cluster.inter_node == "slow" and tp * cp * dp > g:
        breaks("R3", "ZeRO-3 over a slow inter-node link: parameter all-gathers cross it in every forward and "
                     "backward; use HYBRID_SHARD or TP x PP")
    if key == "zero3" and dp * cp >= ZERO3_MAX_DP:
        breaks("R3", f"ZeRO-3 over {dp * cp} >= {ZERO3_MAX_DP} ranks")
    mem = None
    if not any(r.id in ("SIZE", "R4") for r in broken):
        mem = memory.plan_memory(model.params, recipe=model.recipe, sharding=key, dp=dp, tp=tp, pp=pp, cp=cp,
                                 layers=model.layers, hidden=model.hidden, heads=model.heads,
                                 seq_len=model.seq_len, micro_batch=model.micro_batch, recompute=recompute)
        usable = usable_fraction * cluster.gpu_memory_gb * GB
        if mem.total_bytes > usable:
            breaks("FIT", f"{mem.total_bytes / GB:.1f} GB per GPU (states {mem.states.total_bytes / GB:.1f} + "
                          f"activations {mem.activation_bytes / GB:.1f} + gathered {mem.gathered_bytes / GB:.1f}) > "
                          f"{usable / GB:.1f} GB usable")
    return broken, mem


@dataclass(frozen=True)
class InferencePlan:
    """Where to serve a model: TP within the NVLink domain, PP across nodes, replicas on the rest.

    Attributes:
        tp, pp: degrees of one replica (tp * pp GPUs). replicas: copies that fit on the cluster.
        weight_bytes, kv_bytes: per GPU, bytes. usable_bytes: the limit. fits: whether one replica fits.
        rules: the rules that fired. rejected: (tp, pp) tried first, with why.
    """

    tp: int
    pp: int
    replicas: int
    weight_bytes: float
    kv_bytes: float
    usable_bytes: float
    fits: bool
    rules: tuple[Rule, ...]
    rejected: tuple[str, ...]

    @property
    def total_bytes(self) -> float:
        """weights + KV cache per GPU, bytes."""
        return self.weight_bytes + self.kv_bytes


def choose_inference(model: Model, cluster: Cluster, batch: int, context: int, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", usable_fraction: float = 0.9) -> InferencePlan:
    """The smallest replica that serves ``batch`` sequences of ``context`` tokens: weights + KV cache per GPU
    (:func:`pytest_distcheck.calc.inference.serving_bytes_per_gpu`) within the usable share.

    Order: TP = 1, 2, ... up to the GPUs of a node (NVLink only; TP divides heads and KV heads), then PP
    across nodes with TP = the largest in a node (vLLM parallelism_scaling; Narayanan et al. 2021
    Takeaway #1). On PCIe nodes TP stays 1 and PP grows instead.

    Raises:
        ValueError: bad model, cluster, batch or context (naming it).
    """
    _validate(model, cluster, usable_fraction)
    for name, value in (("batch", batch), ("context", context)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    model, assumed = with_architecture(replace(model, seq_len=model.seq_len or context))
    assert model.layers is not None and model.heads is not None and model.hidden is not None
    kv = model.kv_heads or model.heads
    usable = usable_fraction * cluster.gpu_memory_gb * GB
    g = cluster.gpus_per_node
    tps = [1] if cluster.intra_node == "pcie" else [t for t in _divisors(g) if model.heads % t == 0]
    shapes = [(t, 1) for t in tps] + [(tps[-1], p) for p in _divisors(model.layers) if 1 < p
                                      and tps[-1] * p <= cluster.gpus]
    rules = [Rule("INF", f"serving {batch} sequences x {context} tokens: weights ({weight_dtype}) + KV cache "
                         f"({kv_dtype}, {kv} KV heads) per GPU <= {usable / GB:.1f} GB", SOURCES["INF"])]
    if assumed:
        rules.append(assumed)
    rejected: list[str] = []
    for t, p in shapes:
        w, c = inference.serving_bytes_per_gpu(model.params, model.layers, batch, context, model.hidden, model.heads,
                                               kv, t, p, weight_dtype, kv_dtype)
        if w + c <= usable:
            where = "TP within a node" + (f", PP={p} across {'nodes' if t * p > g else 'GPUs'}" if p > 1 else "")
            if cluster.intra_node == "pcie":
                rules.append(Rule("R5", "no NVLink within a node: no tensor parallelism; pipeline stages instead"
                                  if p > 1 else "no NVLink within a node: no tensor parallelism", SOURCES["R5"]))
            rules.append(Rule("INF", f"TP={t} x PP={p}: {where}; {cluster.gpus // (t * p)} replica(s) on "
                                     f"{cluster.gpus} GPUs", SOURCES["INF"]))
            return InferencePlan(t, p, cluster.gpus // (t * p), w, c, usable, True, tuple(rules), tuple(rejected))
        rejected.append(f"TP={t} x PP={p}: {(w + c) / GB:.1f} GB per GPU (weights {w / GB:.1f} + KV cache "
                        f"{c / GB:.1f}) > {usable / GB:.1f} GB")
    t, p = shapes[-1]
    w, c = inference.serving_bytes_per_gpu(model.params, model.layers, batch, context, model.hidden, model.heads,
                                           kv, t, p, weight_dtype, kv_dtype)
    rules.append(Rule("FIT", "nothing fits: fewer sequences, a shorter context, a smaller KV dtype, or more GPUs",
                      SOURCES["FIT"]))
    return InferencePlan(t, p, max(cluster.gpus // (t * p), 0), w, c, usable, False, tuple(rules), tuple(rejected))
