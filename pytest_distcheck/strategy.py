"""Choose a parallelization strategy for a model and a cluster, and show the reasoning.

:func:`choose` walks a decision table (below) from the cheapest strategy to the most involved and
returns the first that fits in GPU memory, with the memory per GPU it predicts, every candidate it
rejected (and why), and the rules that fired, each with its source.

Memory per GPU = model states (:mod:`pytest_distcheck.calc.memory`, ZeRO accounting, mixed-precision
Adam, K = 12) + activations of the first pipeline stage (Korthikanti et al. 2022, Eq. (5)/(6): L layers'
worth under 1F1B whatever p) when the architecture is given. It must stay within ``usable_fraction``
of the GPU's memory: the rest is left for what ZeRO sec. 3.2 calls residual states (temporary buffers,
fragmentation) and the CUDA context.

Decision table (order of preference):
  R0  DDP when 16 Psi + activations fit on one GPU.        HF perf_train_gpu_many, single-GPU case
  R1  else ZeRO-1, then ZeRO-2 over all GPUs: the same      ZeRO sec. 5.1-5.2, sec. 7.2.1
      communication as DDP.
  R2  multi-node: FSDP HYBRID_SHARD (shard in a node,       torch fsdp/api.py HYBRID_SHARD
      replicate across nodes).
  R3  ZeRO-3 / FSDP FULL_SHARD over all GPUs: only when     ZeRO sec. 7.2.2 (1.5x communication);
      ZeRO-1/2 do not fit, not over slow inter-node links,  HF perf_train_gpu_many multi-node;
      and not on >= 512 GPUs.                               Ultra-Scale Playbook (DP <= 512)
  R4  else TP x PP x DP: TP within a node (t <= GPUs per    Narayanan et al. 2021 sec. 3.2,
      node, t divides the heads), PP across nodes, smallest Takeaways #1-#2; Shoeybi et al. 2019
      p first, DP with ZeRO-1.
  R5  no NVLink (PCIe): no TP, pipeline instead.            HF perf_train_gpu_many; vLLM docs
  R6  PP pairs with ZeRO-1, not ZeRO-2/3.                   HF perf_train_gpu_many; Playbook
  R7  TP uses sequence parallelism (no extra traffic).      Korthikanti et al. 2022 sec. 4.2.2
  R8  if nothing fits, retry with selective, then full      Korthikanti et al. 2022 sec. 5
      activation recomputation.
  R9  PP: m >= 4(p-1) micro-batches keep the bubble <= 1/5  Huang et al. 2019 (GPipe) sec. 2.3
      of the iteration, (p-1)/(m+p-1) (GPipe: M >= 4K).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_distcheck.calc import memory, pipeline

GB = 1e9
INTRA_NODE = ("nvlink", "pcie")
INTER_NODE = ("fast", "slow")
FSDP_NAME = {"ddp": "NO_SHARD", "zero2": "SHARD_GRAD_OP", "zero3": "FULL_SHARD"}
ZERO3_MAX_DP = 512

SOURCES = {
    "R0": "HF Transformers docs, perf_train_gpu_many ('model fits onto a single GPU')",
    "R1": "Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.2 memory, sec. 7.2.1 communication = DDP's",
    "R2": "torch/distributed/fsdp/api.py ShardingStrategy.HYBRID_SHARD",
    "R3": "Rajbhandari et al. 2019 (ZeRO) sec. 7.2.2; HF perf_train_gpu_many; Ultra-Scale Playbook",
    "R4": "Narayanan et al. 2021 sec. 3.2, Takeaways #1 and #2",
    "R5": "HF perf_train_gpu_many (no NVLink: prefer PP); vLLM docs, parallelism_scaling",
    "R6": "HF perf_train_gpu_many (ZeRO-2/3 with PP); Ultra-Scale Playbook",
    "R7": "Korthikanti et al. 2022 sec. 4.2.2",
    "R8": "Korthikanti et al. 2022 sec. 5 (selective) and Table 2 (full recomputation)",
    "R9": "Huang et al. 2019 (GPipe) sec. 2.3; Narayanan et al. 2021 sec. 2.2.1",
    "ACT": "Korthikanti et al. 2022 sec. 4.2.3, Eq. (5) and (6)",
    "FIT": "Rajbhandari et al. 2019 (ZeRO) sec. 3.2 (residual states)",
}


@dataclass(frozen=True)
class Model:
    """The model to train.

    Attributes:
        params: number of parameters (count).
        layers, hidden, heads, seq_len: architecture; all four are needed to count activations.
        micro_batch: sequences per micro-batch (b).
    """

    params: float
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    seq_len: int | None = None
    micro_batch: int = 1

    @property
    def has_architecture(self) -> bool:
        """Whether activations can be counted."""
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
    """A rule that fired: its id in the decision table, what it concluded here, and its source."""

    id: str
    text: str
    source: str


@dataclass(frozen=True)
class Plan:
    """A recommended strategy.

    Attributes:
        name: e.g. ``"DDP"``, ``"ZeRO-2 (FSDP SHARD_GRAD_OP)"``, ``"TP=8 x PP=4 x DP=2, ZeRO-1"``.
        tp, pp, dp: degrees, tp * pp * dp = GPUs.
        zero: ZeRO stage of the data-parallel part (``"ddp"``, ``"zero1"``, ``"zero2"``, ``"zero3"``).
        fsdp: the matching FSDP sharding strategy, or ``""``.
        shard_group: ranks the model states are sharded over (dp, or GPUs per node for HYBRID_SHARD).
        recompute: activation recomputation assumed (``"none"``, ``"selective"``, ``"full"``).
        sequence_parallel: whether SP is assumed (with tp > 1).
        model_state_bytes, activation_bytes: predicted memory per GPU, bytes.
        usable_bytes: the memory the prediction must fit in.
        fits: whether it fits (False only when nothing does; the plan is then the least-memory one).
        microbatches: suggested micro-batches per batch when pp > 1 (m >= 4p), else None.
        rules: the rules that fired, in order. rejected: candidates tried first, with why.
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

    @property
    def total_bytes(self) -> float:
        """model states + activations per GPU, bytes."""
        return self.model_state_bytes + self.activation_bytes


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


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _validate(model: Model, cluster: Cluster, usable_fraction: float) -> None:
    if not model.params > 0:
        raise ValueError(f"model params must be > 0, got {model.params!r}")
    for name in ("layers", "hidden", "heads", "seq_len", "micro_batch"):
        value = getattr(model, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"model {name} must be a whole number >= 1, got {value!r}")
    if not cluster.gpu_memory_gb > 0:
        raise ValueError(f"gpu_memory_gb must be > 0, got {cluster.gpu_memory_gb!r}")
    for name in ("gpus_per_node", "nodes"):
        value = getattr(cluster, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"cluster {name} must be a whole number >= 1, got {value!r}")
    if cluster.intra_node not in INTRA_NODE:
        raise ValueError(f"intra_node must be one of {INTRA_NODE}, got {cluster.intra_node!r}")
    if cluster.inter_node not in INTER_NODE:
        raise ValueError(f"inter_node must be one of {INTER_NODE}, got {cluster.inter_node!r}")
    if not 0 < usable_fraction <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction!r}")


def _candidates(model: Model, cluster: Cluster, notes: list[Rule]) -> list[_Candidate]:
    n, g = cluster.gpus, cluster.gpus_per_node
    out = [_Candidate("DDP" if n > 1 else "single GPU", "R0", dp=n, fsdp="NO_SHARD" if n > 1 else "")]
    if n > 1:
        out += [_Candidate("ZeRO-1", "R1", dp=n, zero="zero1", shard_group=n),
                _Candidate("ZeRO-2 (FSDP SHARD_GRAD_OP)", "R1", dp=n, zero="zero2", fsdp="SHARD_GRAD_OP",
                           shard_group=n)]
    if cluster.nodes > 1 and g > 1:
        out.append(_Candidate(f"FSDP HYBRID_SHARD (shard over {g} GPUs in a node, replicate across "
                              f"{cluster.nodes} nodes)", "R2", dp=n, zero="zero3", fsdp="HYBRID_SHARD",
                              shard_group=g))
    slow = cluster.nodes > 1 and cluster.inter_node == "slow"
    if n > 1 and not slow and n < ZERO3_MAX_DP:
        out.append(_Candidate("ZeRO-3 (FSDP FULL_SHARD)", "R3", dp=n, zero="zero3", fsdp="FULL_SHARD",
                              shard_group=n))
    elif n > 1:
        why = "slow inter-node links" if slow else f"{n} GPUs >= {ZERO3_MAX_DP}"
        notes.append(Rule("R3", f"ZeRO-3 / FULL_SHARD over all {n} GPUs not considered ({why})", SOURCES["R3"]))
    tps = [t for t in _divisors(g) if model.heads is None or model.heads % t == 0]
    if cluster.intra_node == "pcie":
        tps = [1]
        notes.append(Rule("R5", "no NVLink within a node: no tensor parallelism, pipeline stages instead",
                          SOURCES["R5"]))
    for p in _divisors(n):
        if model.layers is not None and (p > model.layers or model.layers % p):
            continue
        for t in tps:
            if (t == 1 and p == 1) or n % (t * p):
                continue
            d = n // (t * p)
            zero = "zero1" if d > 1 else "ddp"
            name = f"TP={t} x PP={p} x DP={d}" + (", ZeRO-1" if d > 1 else "")
            out.append(_Candidate(name, "R4", tp=t, pp=p, dp=d, zero=zero, shard_group=d))
    return out


def _activations(model: Model, tp: int, recompute: str) -> float:
    if not model.has_architecture:
        return 0.0
    return memory.first_stage_activation_bytes(
        model.seq_len, model.micro_batch, model.hidden, model.heads, model.layers, tp=tp,
        sequence_parallel=tp > 1, recompute=recompute)


def _states(model: Model, c: _Candidate) -> float:
    return memory.zero_model_state_bytes(model.params / (c.tp * c.pp), c.zero, c.shard_group)


def choose(model: Model, cluster: Cluster, usable_fraction: float = 0.9) -> Plan:
    """The recommended strategy for training ``model`` on ``cluster`` (see the module docstring).

    Args:
        model: parameters and optionally architecture and micro-batch.
        cluster: GPU memory, GPUs per node, nodes, intra-/inter-node interconnect.
        usable_fraction: share of GPU memory the predicted memory may use.

    Returns a :class:`Plan` with tp * pp * dp == cluster.gpus and tp <= cluster.gpus_per_node.

    Raises:
        ValueError: a model or cluster value out of range, naming it.
    """
    _validate(model, cluster, usable_fraction)
    usable = usable_fraction * cluster.gpu_memory_gb * GB
    notes: list[Rule] = [Rule("FIT", f"a plan fits when model states + activations <= {usable_fraction:.0%} "
                                     f"of {cluster.gpu_memory_gb:g} GB = {usable / GB:.1f} GB", SOURCES["FIT"])]
    if not model.has_architecture:
        notes.append(Rule("ACT", "activations not counted: give layers, hidden, heads and seq_len to include "
                                 "them", SOURCES["ACT"]))
    candidates = _candidates(model, cluster, notes)
    rejected: list[str] = []
    best: tuple[float, _Candidate, str] | None = None
    for recompute in ("none", "selective", "full") if model.has_architecture else ("none",):
        for c in candidates:
            states, acts = _states(model, c), _activations(model, c.tp, recompute)
            if states + acts <= usable:
                return _plan(c, recompute, states, acts, usable, True, model, cluster, notes, rejected)
            rc = f", recompute {recompute}" if model.has_architecture else ""
            rejected.append(f"{c.name}{rc}: {(states + acts) / GB:.1f} GB per GPU (states "
                            f"{states / GB:.1f} + activations {acts / GB:.1f}) > {usable / GB:.1f} GB")
            if best is None or states + acts < best[0]:
                best = (states + acts, c, recompute)
    assert best is not None
    _, c, recompute = best
    return _plan(c, recompute, _states(model, c), _activations(model, c.tp, recompute), usable, False, model,
                 cluster, notes, rejected)


def _plan(c: _Candidate, recompute: str, states: float, acts: float, usable: float, fits: bool, model: Model,
          cluster: Cluster, notes: list[Rule], rejected: list[str]) -> Plan:
    rules = list(notes)
    texts = {
        "R0": "model states (16 bytes/parameter) and activations fit on one GPU: "
              + ("data parallelism (DDP)" if c.dp > 1 else "no parallelism needed"),
        "R1": f"{c.name} over all {c.dp} GPUs is the smallest ZeRO stage that fits; its communication equals "
              "DDP's",
        "R2": "shard model states within each node over fast intra-node links and replicate across nodes",
        "R3": "only full sharding of parameters, gradients and optimizer states fits; it costs 1.5x DDP's "
              "communication",
        "R4": f"no data-parallel sharding fits: TP={c.tp} within a node (<= {cluster.gpus_per_node} GPUs per "
              f"node), PP={c.pp}" + (" across nodes" if c.pp > 1 and cluster.nodes > 1 else "") +
              f", DP={c.dp} (TP x PP x DP = {cluster.gpus})",
    }
    if fits:
        rules.append(Rule(c.rule, texts[c.rule], SOURCES[c.rule]))
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
    return Plan(name=c.name, tp=c.tp, pp=c.pp, dp=c.dp, zero=c.zero, fsdp=c.fsdp, shard_group=c.shard_group,
                recompute=recompute, sequence_parallel=c.tp > 1, model_state_bytes=states, activation_bytes=acts,
                usable_bytes=usable, fits=fits, microbatches=microbatches, rules=tuple(rules),
                rejected=tuple(rejected))
