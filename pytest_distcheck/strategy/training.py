"""The training chooser: candidates in the decision table's order (see the package docstring), the first
that fits, with the rules that fired and the candidates rejected before it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_distcheck.calc import memory, pipeline
from pytest_distcheck.strategy.model import (
    GB,
    SOURCES,
    ZERO3_MAX_DP,
    Cluster,
    Model,
    Rule,
    divisors,
    validate,
    with_architecture,
)


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
                           shard_group=n)] + ([] if pcie else hsdp)
    zero3 = []
    if n > 1 and not slow and n < ZERO3_MAX_DP:
        zero3 = [_Candidate("ZeRO-3 (FSDP FULL_SHARD)", "R3", dp=n, zero="zero3", fsdp="FULL_SHARD", shard_group=n)]
    elif n > 1:
        why = "slow inter-node links" if slow else f"{n} GPUs >= {ZERO3_MAX_DP}"
        notes.append(Rule("R3", f"ZeRO-3 / FULL_SHARD over all {n} GPUs not considered ({why})", SOURCES["R3"]))
    if not pcie:
        out += zero3
    tps = [1] if pcie else [t for t in divisors(g) if model.heads is None or model.heads % t == 0]
    grid = []
    cps = [c for c in divisors(n) if model.seq_len is None or model.seq_len % (2 * c) == 0]
    for p in divisors(n):
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
    if pcie:  # without NVLink, pipeline plans before any ZeRO-3 (R5), sharding within a node first
        out += ([] if slow else hsdp) + zero3
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
    validate(model, cluster, usable_fraction)
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
                            f"{mem.states.total_bytes / GB:.1f} GB + activations {mem.activation_bytes / GB:.1f} GB"
                            + (f" + gathered unit {mem.gathered_bytes / GB:.1f} GB" if mem.gathered_bytes else "")
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


