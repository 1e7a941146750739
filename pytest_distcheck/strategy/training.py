"""The training chooser: candidates in the decision table's order (see the package docstring), the first
that fits, with the rules that fired and the candidates rejected before it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_distcheck.calc import memory, pipeline
from pytest_distcheck.i18n import N_, _
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

SINGLE_GPU = N_("single GPU")
HSDP_NAME = N_("FSDP HYBRID_SHARD (shard over {g} GPUs in a node, replicate across {nodes} nodes)")
SLOW_LINK = N_("slow inter-node link: no ZeRO stage over all {n} GPUs; FSDP HYBRID_SHARD keeps its all-gathers and "
               "reduce-scatters inside the node")
NO_ZERO3 = N_("ZeRO-3 / FULL_SHARD over all {n} GPUs not considered ({why})")
SLOW_LINKS = N_("slow inter-node links")
TOO_MANY_RANKS = N_("{n} GPUs >= {max}")
FITS_WHEN = N_("a plan fits when model states + activations + gathered ZeRO-3/FSDP unit <= {fraction:.0%} of "
               "{gpu_gb:g} GB = {usable:.1f} GB (margin {margin:.1f} GB for buffers, fragmentation, CUDA context)")
REJECTED = N_("{name}, recompute {recompute}: {total:.1f} GB per GPU (states {states:.1f} GB + activations "
              "{activations:.1f} GB{gathered}) > {usable:.1f} GB")
PLUS_GATHERED = N_(" + gathered unit {gathered:.1f} GB")
R0_FITS = N_("model states and activations fit on one GPU: {what}")
R0_DDP = N_("data parallelism (DDP)")
R0_NONE = N_("no parallelism needed")
R1_STAGE = N_("{name} over all {dp} GPUs is the smallest ZeRO stage that fits; its communication equals DDP's")
R2_HYBRID = N_("shard model states within each node over fast intra-node links and replicate across nodes")
R3_FULL = N_("only full sharding of parameters, gradients and optimizer states fits; it costs 1.5x DDP's "
             "communication")
R4_MODEL = N_("no data-parallel sharding fits: TP={tp} within a node (<= {g} GPUs per node), PP={pp}{across}{cp}, "
              "DP={dp} ({product} = {gpus})")
ACROSS_NODES = N_(" across nodes")
R4_CP = N_(", CP={cp} (the sequence split, Megatron-Core context parallelism)")
R5_PIPELINE = N_("pipeline stages instead (they send only activations between GPUs)")
R5_ZERO3 = N_("pipeline plans were tried before ZeRO-3, but none fits (see the rejected list)")
R5_NONE = N_("none needed: the data-parallel plan above fits")
R5_NO_NVLINK = N_("no NVLink within a node: no tensor parallelism; {why}")
R6_ZERO1 = N_("with pipeline parallelism the data-parallel part uses ZeRO-1")
R7_SP = N_("sequence parallelism with TP={tp} shards LayerNorm/dropout activations at no extra communication")
R8_RECOMPUTE = N_("{recompute} activation recomputation is needed to fit")
R9_MICROBATCHES = N_("use m >= {m} micro-batches per batch: bubble {fraction:.1%} of the iteration")
NOTHING_FITS = N_("nothing fits: {name} is the least-memory plan; add GPUs, shrink the micro-batch or sequence, or "
                  "offload")


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
    out = [_Candidate("DDP" if n > 1 else _(SINGLE_GPU), "R0", dp=n, fsdp="NO_SHARD" if n > 1 else "")]
    hsdp = [_Candidate(_(HSDP_NAME).format(g=g, nodes=nodes), "R2", dp=n, zero="zero3", fsdp="HYBRID_SHARD",
                       shard_group=g)] if nodes > 1 and g > 1 else []
    if slow:
        out += hsdp
        notes.append(Rule("R2", _(SLOW_LINK).format(n=n), SOURCES["R2"]))
    elif n > 1:
        out += [_Candidate("ZeRO-1", "R1", dp=n, zero="zero1", shard_group=n),
                _Candidate("ZeRO-2 (FSDP SHARD_GRAD_OP)", "R1", dp=n, zero="zero2", fsdp="SHARD_GRAD_OP",
                           shard_group=n)] + ([] if pcie else hsdp)
    zero3 = []
    if n > 1 and not slow and n < ZERO3_MAX_DP:
        zero3 = [_Candidate("ZeRO-3 (FSDP FULL_SHARD)", "R3", dp=n, zero="zero3", fsdp="FULL_SHARD", shard_group=n)]
    elif n > 1:
        why = _(SLOW_LINKS) if slow else _(TOO_MANY_RANKS).format(n=n, max=ZERO3_MAX_DP)
        notes.append(Rule("R3", _(NO_ZERO3).format(n=n, why=why), SOURCES["R3"]))
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
    fits_when = _(FITS_WHEN).format(fraction=usable_fraction, gpu_gb=cluster.gpu_memory_gb, usable=usable / GB,
                                    margin=(1 - usable_fraction) * cluster.gpu_memory_gb)
    notes: list[Rule] = [Rule("FIT", fits_when, SOURCES["FIT"])]
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
            gathered = _(PLUS_GATHERED).format(gathered=mem.gathered_bytes / GB) if mem.gathered_bytes else ""
            rejected.append(_(REJECTED).format(name=c.name, recompute=recompute, total=mem.total_bytes / GB,
                                               states=mem.states.total_bytes / GB,
                                               activations=mem.activation_bytes / GB, gathered=gathered,
                                               usable=usable / GB))
            if best is None or mem.total_bytes < best[0]:
                best = (mem.total_bytes, c, recompute)
    assert best is not None
    _least, c, recompute = best
    return _plan(c, recompute, _memory(model, c, recompute), usable, False, cluster, notes, rejected)


def _fit_text(c: _Candidate, cluster: Cluster) -> str:
    """What the rule that chose ``c`` (R0-R4) says about it."""
    if c.rule == "R0":
        return _(R0_FITS).format(what=_(R0_DDP) if c.dp > 1 else _(R0_NONE))
    if c.rule == "R1":
        return _(R1_STAGE).format(name=c.name, dp=c.dp)
    if c.rule in ("R2", "R3"):
        message = R2_HYBRID if c.rule == "R2" else R3_FULL
        return _(message)
    across = _(ACROSS_NODES) if c.pp > 1 and cluster.nodes > 1 else ""
    cp = _(R4_CP).format(cp=c.cp) if c.cp > 1 else ""
    product = "TP x CP x PP x DP" if c.cp > 1 else "TP x PP x DP"
    return _(R4_MODEL).format(tp=c.tp, g=cluster.gpus_per_node, pp=c.pp, across=across, cp=cp, dp=c.dp,
                              product=product, gpus=cluster.gpus)


def _plan(c: _Candidate, recompute: str, mem: memory.PlanMemory, usable: float, fits: bool, cluster: Cluster,
          notes: list[Rule], rejected: list[str]) -> Plan:
    rules = list(notes)
    if fits:
        rules.append(Rule(c.rule, _fit_text(c, cluster), SOURCES[c.rule]))
    if cluster.intra_node == "pcie":
        why = R5_PIPELINE if c.pp > 1 else R5_ZERO3 if c.zero == "zero3" else R5_NONE
        rules.append(Rule("R5", _(R5_NO_NVLINK).format(why=_(why)), SOURCES["R5"]))
    if c.pp > 1 and c.dp > 1:
        rules.append(Rule("R6", _(R6_ZERO1), SOURCES["R6"]))
    if c.tp > 1:
        rules.append(Rule("R7", _(R7_SP).format(tp=c.tp), SOURCES["R7"]))
    if recompute != "none":
        rules.append(Rule("R8", _(R8_RECOMPUTE).format(recompute=recompute), SOURCES["R8"]))
    microbatches = None
    if c.pp > 1:
        microbatches = pipeline.min_microbatches_for_bubble(c.pp, 0.2)
        frac = pipeline.bubble_fraction_of_total(c.pp, microbatches)
        rules.append(Rule("R9", _(R9_MICROBATCHES).format(m=microbatches, fraction=frac), SOURCES["R9"]))
    if not fits:
        rules.append(Rule("FIT", _(NOTHING_FITS).format(name=c.name), SOURCES["FIT"]))
    return Plan(name=c.name, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, zero=c.zero, fsdp=c.fsdp, shard_group=c.shard_group,
                recompute=recompute, sequence_parallel=c.tp > 1, model_state_bytes=mem.states.total_bytes,
                activation_bytes=mem.activation_bytes, usable_bytes=usable, fits=fits, microbatches=microbatches,
                rules=tuple(rules), rejected=tuple(rejected), gathered_bytes=mem.gathered_bytes,
                assumptions=mem.assumptions)


