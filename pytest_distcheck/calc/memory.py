"""Memory per GPU: model states under DDP, ZeRO-1/2/3 and the FSDP sharding strategies; activations.

Model states follow ZeRO (Rajbhandari et al. 2019, sec. 3.1 and 5.1-5.3, Fig. 1: 2 + 2 + K bytes per
parameter, K = 12 for mixed-precision Adam), the FSDP strategies counted with ZeRO's accounting
(``torch/distributed/fsdp/api.py``); activations per layer follow Korthikanti et al. 2022 (sec. 4-5,
Eq. (1), (2), (4), Table 2). Bytes everywhere; each function names its formula's section. General
recipes and the TP x PP x CP split: :func:`model_states`, :func:`plan_memory`. These are the states only:
no CUDA context, temporary buffers or allocator fragmentation. The tables: docs/design/calc.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_distcheck.calc import precision
from pytest_distcheck.calc._checks import FINITE_NON_NEGATIVE, FINITE_POSITIVE, NON_NEGATIVE, refuse
from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

GB = 1e9  # bytes (120 GB = 111.76 GiB)
ADAM_K = 12  # ZeRO sec. 3.1: fp32 params, momentum, variance for mixed-precision Adam
PRECISION_NOTE = N_("precision {name}: {bytes:g} bytes/parameter unsharded ({source})")
SHARDS_NOTE = N_("{strategy} shards over {shards} rank(s); each GPU holds Psi/(TP x PP) = {local:.4g} parameters")
NO_ACTIVATIONS = N_("activations not counted: give layers, hidden, heads and seq_len")
UNEVEN_STAGES = N_("uneven stages: the largest of the {pp} holds {largest} of the {layers} layers")
ACTIVATIONS_NOTE = N_("activations: 16-bit, {recompute} recomputation, sequence parallel {sp}, L = {layers} layers' "
                      "worth on the first stage (Korthikanti et al. 2022 Eq. (5)/(6)){split}")
SP_ON = N_("on")
SP_OFF = N_("off")
SPLIT_OVER_CP = N_(", split over CP = {cp}")
NO_GATHERED = N_("ZeRO-3/FSDP gathered unit not counted: give the largest layer (or hidden, or layers) to size it")
GATHERED_NOTE = N_("ZeRO-3/FSDP: one gathered unit of {unit:.4g} parameters / TP (DeepSpeed estimator's "
                   "largest-layer term)")
UNKNOWN_STAGE = N_("unknown ZeRO stage {stage!r}; known: ddp (or 0), zero1, zero2, zero3")
UNKNOWN_FSDP = N_("unknown FSDP sharding strategy {strategy!r}; known: {known}")
HYBRID_NEEDS_NODE = N_("{strategy} shards within a node: give gpus_per_node")
HYBRID_WORLD = N_("{strategy} needs world_size to be a multiple of gpus_per_node; got world_size={world_size}, "
                  "gpus_per_node={gpus_per_node}")
UNKNOWN_RECOMPUTE = N_("unknown recompute {recompute!r}; known: {known}")
HYBRID_NEEDS_GROUP = N_("{sharding} shards within a node: give shard_group (GPUs per node in the data-parallel "
                        "dimension)")
GROUP_DIVIDES = N_("shard_group={group} must divide dp * cp = {product}")
DP_DEGREE = N_("dp (data-parallel degree)")
FP16_BYTES = 2

ZERO_STAGES = ("ddp", "zero1", "zero2", "zero3")
FSDP_STRATEGIES = ("NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2")
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class ModelStates:
    """Model-state bytes per GPU, split as ZeRO sec. 3.1 does.

    Attributes:
        params_bytes: fp16 parameters held (2 Psi, or 2 Psi / N_d when partitioned).
        grads_bytes: fp16 gradients held.
        optimizer_bytes: optimizer states (K Psi, or K Psi / N_d; in :func:`zero_model_states` K includes
            the fp32 master copy, in :func:`model_states` the master copy is ``master_bytes``).
        strategy: the strategy as given (``"zero2"``, ``"FULL_SHARD"`` ...).
        shards: the number of ranks the partitioned states are divided over.
        main_grads_bytes: a separate fp32 gradient copy (Megatron fp16), 0 otherwise.
        master_bytes: fp32 master weights when counted apart from the optimizer (:func:`model_states`).
    """

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    strategy: str
    shards: int
    main_grads_bytes: float = 0.0
    master_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """params + grads + main grads + master + optimizer states, bytes."""
        return (self.params_bytes + self.grads_bytes + self.main_grads_bytes + self.master_bytes
                + self.optimizer_bytes)

    @property
    def total_gb(self) -> float:
        """total_bytes in GB (1e9 bytes)."""
        return self.total_bytes / GB


def _stage_key(stage: str | int) -> str:
    key = str(stage).lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"0": "ddp", "zero0": "ddp", "1": "zero1", "2": "zero2", "3": "zero3"}
    key = aliases.get(key, key)
    if key not in ZERO_STAGES:
        raise ValueError(_(UNKNOWN_STAGE).format(stage=stage))
    return key


def zero_model_states(params: float, stage: str | int, dp: int, k: float = ADAM_K) -> ModelStates:
    """Model states per GPU for DDP or ZeRO stage 1/2/3 over dp data-parallel ranks.

    Args:
        params: Psi, number of parameters each data-parallel replica holds (count, not bytes).
        stage: ``"ddp"``/0, ``"zero1"``/1, ``"zero2"``/2, ``"zero3"``/3.
        dp: N_d, data-parallel degree.
        k: optimizer bytes per parameter (12 for mixed-precision Adam, ZeRO sec. 3.1).

    Returns the split per ZeRO sec. 5.1-5.3 (Fig. 1: 7.5B parameters, N_d = 64 -> 120, 31.4, 16.6,
    1.9 GB).

    Raises:
        ValueError: params < 0, dp not a whole number >= 1, unknown stage.
    """
    if params < 0:
        raise refuse(NON_NEGATIVE, "params", params)
    _whole(_(DP_DEGREE), dp)
    key = _stage_key(stage)
    p16 = FP16_BYTES * params
    shards = {"ddp": (1, 1, 1), "zero1": (1, 1, dp), "zero2": (1, dp, dp), "zero3": (dp, dp, dp)}[key]
    return ModelStates(
        params_bytes=p16 / shards[0],
        grads_bytes=p16 / shards[1],
        optimizer_bytes=k * params / shards[2],
        strategy=str(stage),
        shards=dp if key != "ddp" else 1,
    )


def zero_model_state_bytes(params: float, stage: str | int, dp: int, k: float = ADAM_K) -> float:
    """Total model-state bytes per GPU of :func:`zero_model_states` (same arguments and errors)."""
    return zero_model_states(params, stage, dp, k).total_bytes


def fsdp_model_states(
    params: float,
    sharding_strategy: str,
    world_size: int,
    gpus_per_node: int | None = None,
    k: float = ADAM_K,
) -> ModelStates:
    """Model states per GPU under an FSDP ``ShardingStrategy``, with ZeRO's accounting (module docstring).

    Args:
        params: parameters of the model (count).
        sharding_strategy: NO_SHARD, SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2
            (case-insensitive, as in ``torch.distributed.fsdp.ShardingStrategy``).
        world_size: total ranks.
        gpus_per_node: size of the shard group for the hybrid strategies (required for them).

    Mapping (torch ``fsdp/api.py``): NO_SHARD -> DDP, SHARD_GRAD_OP -> ZeRO-2, FULL_SHARD -> ZeRO-3,
    each over world_size; HYBRID_SHARD -> ZeRO-3 over gpus_per_node; _HYBRID_SHARD_ZERO2 -> ZeRO-2
    over gpus_per_node. The one FSDP unit unsharded at a time during FULL_SHARD is not counted.

    Raises:
        ValueError: unknown strategy; hybrid without gpus_per_node, or gpus_per_node not dividing
            world_size.
    """
    key = sharding_strategy.upper().lstrip("_")
    key = "_" + key if key == "HYBRID_SHARD_ZERO2" else key
    stage = {"NO_SHARD": "ddp", "SHARD_GRAD_OP": "zero2", "FULL_SHARD": "zero3",
             "HYBRID_SHARD": "zero3", "_HYBRID_SHARD_ZERO2": "zero2"}.get(key)
    if stage is None:
        raise ValueError(_(UNKNOWN_FSDP).format(strategy=sharding_strategy, known=", ".join(FSDP_STRATEGIES)))
    _whole("world_size", world_size)
    shards = world_size
    if "HYBRID" in key:
        if gpus_per_node is None:
            raise ValueError(_(HYBRID_NEEDS_NODE).format(strategy=key))
        _whole("gpus_per_node", gpus_per_node)
        if world_size % gpus_per_node != 0:
            raise ValueError(_(HYBRID_WORLD).format(strategy=key, world_size=world_size, gpus_per_node=gpus_per_node))
        shards = gpus_per_node
    states = zero_model_states(params, stage, shards, k)
    return ModelStates(states.params_bytes, states.grads_bytes, states.optimizer_bytes, key,
                       states.shards)


def fsdp_model_state_bytes(
    params: float,
    sharding_strategy: str,
    world_size: int,
    gpus_per_node: int | None = None,
    k: float = ADAM_K,
) -> float:
    """Total model-state bytes per GPU of :func:`fsdp_model_states` (same arguments and errors)."""
    return fsdp_model_states(params, sharding_strategy, world_size, gpus_per_node, k).total_bytes


def activation_bytes_per_layer(
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Activation memory of one transformer layer on one GPU, bytes (Korthikanti et al. 2022).

    Args:
        seq_len: s, tokens per sequence. micro_batch: b. hidden: h. heads: a. tp: t, TP degree.
        sequence_parallel: shard LayerNorm/dropout activations along the sequence (sec. 4.2.2).
        recompute: ``"none"``, ``"selective"`` (recompute attention's softmax/dropout/QK^T, sec. 5)
            or ``"full"`` (keep only the layer input, 2sbh).

    Formulas: module docstring (Eq. (1), (2), (4) and Table 2). With t = 1 the TP formulas reduce to
    Eq. (1); sequence_parallel with t = 1 changes nothing.

    Raises:
        ValueError: a size not a whole number >= 1, unknown recompute.
    """
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("hidden", hidden),
                        ("heads", heads), ("tp", tp)):
        _whole(name, value)
    if recompute not in RECOMPUTE:
        raise ValueError(_(UNKNOWN_RECOMPUTE).format(recompute=recompute, known=", ".join(RECOMPUTE)))
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    sbh = s * b * h
    attention = 5 * a * s / h  # the a*s^2*b terms: softmax, its dropout mask, QK^T (sec. 4.1)
    if recompute == "full":
        return 2.0 * sbh
    if sequence_parallel:
        return sbh / t * (34 + (0 if recompute == "selective" else attention))
    if recompute == "selective":
        return sbh * (10 + 24 / t)
    return sbh * (10 + 24 / t + attention / t)


def first_stage_activation_bytes(
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    layers: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    pp: int = 1,
    interleaving_stages: int = 1,
) -> float:
    """Activations the first pipeline stage holds under 1F1B, bytes: L * per-layer bytes * factor.

    The first stage keeps p micro-batches of L/p layers, i.e. L layers' worth, independent of p
    (Korthikanti et al. 2022, sec. 4.2.3, Eq. (5) and Eq. (6)). The interleaved schedule multiplies
    it by (1 + (p-1)/(p*m)) with m = interleaving stages (sec. 4.2.3; here ``interleaving_stages``,
    not micro-batches). Embeddings, output layer and loss are not counted.

    Raises:
        ValueError: as :func:`activation_bytes_per_layer`, layers/pp/interleaving_stages < 1.
    """
    _whole("layers", layers)
    _whole("pp", pp)
    _whole("interleaving_stages", interleaving_stages)
    per_layer = activation_bytes_per_layer(seq_len, micro_batch, hidden, heads, tp, sequence_parallel,
                                           recompute)
    factor = 1.0 if interleaving_stages == 1 else 1 + (pp - 1) / (pp * interleaving_stages)
    return layers * per_layer * factor


def selective_recompute_saving(seq_len: int, hidden: int, heads: int) -> float:
    """Share of activation memory that selective recomputation saves under TP + SP: (5as/h)/(34+5as/h).

    Korthikanti et al. 2022, sec. 5: GPT-3 (a=96, s=2048, h=12288) 5as/h = 80 -> 70%; MT-NLG
    (a=128, s=2048, h=20480) 5as/h = 64 -> 65%.
    """
    for name, value in (("seq_len", seq_len), ("hidden", hidden), ("heads", heads)):
        _whole(name, value)
    attention = 5 * heads * seq_len / hidden
    return attention / (34 + attention)


def model_states(
    params: float,
    recipe: str | precision.Recipe = "zero",
    sharding: str | int = "ddp",
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    shard_group: int | None = None,
) -> ModelStates:
    """Model states per GPU of a TP x PP x CP x DP plan under a precision recipe and a sharding scheme.

    Args:
        params: Psi, parameters of the whole model (count).
        recipe: a :data:`pytest_distcheck.calc.precision.PRESETS` name or a ``Recipe`` (bytes of each part).
        sharding: ``ddp``, ``zero1``-``zero3`` (or 0-3), ``megatron-distopt``, or an FSDP ShardingStrategy
            (``HYBRID_SHARD`` shards within ``shard_group`` only).
        dp, tp, pp, cp: data-, tensor-, pipeline- and context-parallel degrees.
        shard_group: ranks the sharded parts are divided over; default dp * cp (every rank that holds
            the same weights: CP ranks keep identical weights, and Megatron's distributed optimizer shards
            over the data-parallel group with context parallelism). HYBRID_SHARD needs it (the GPUs of a
            node in the data-parallel dimension).

    Each GPU holds Psi / (t p) parameters: TP splits every weight matrix (Shoeybi et al. 2019 sec. 3) and
    PP splits the layers (Narayanan et al. 2021 sec. 2.2); embeddings are counted as if split evenly.
    The parts a scheme shards (``precision.SHARDS``) are divided by the shard group, the rest kept whole.
    With the ``zero`` recipe this equals :func:`zero_model_states` (ZeRO sec. 5.1-5.3; Fig. 1).

    Returns a :class:`ModelStates` whose ``optimizer_bytes`` excludes the master copy (``master_bytes``).

    Raises:
        ValueError: params <= 0 or not finite, a degree not a whole number >= 1, an unknown recipe or
            sharding, HYBRID_SHARD without shard_group, a shard group that does not divide dp * cp.
    """
    if not (params > 0 and math.isfinite(params)):
        raise refuse(FINITE_POSITIVE, "params", params)
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("cp", cp)):
        _whole(name, value)
    r = precision.recipe(recipe)
    key = precision.scheme(sharding)
    hybrid = "HYBRID" in str(sharding).upper()
    if hybrid and shard_group is None:
        raise ValueError(_(HYBRID_NEEDS_GROUP).format(sharding=sharding))
    group = dp * cp if shard_group is None else shard_group
    _whole("shard_group", group)
    if (dp * cp) % group:
        raise ValueError(_(GROUP_DIVIDES).format(group=group, product=dp * cp))
    local = params / (tp * pp)
    per = r.bytes_per_param()
    held = {part: per[part] * local / (group if sharded else 1)
            for part, sharded in zip(precision.PARTS, precision.SHARDS[key], strict=True)}
    return ModelStates(params_bytes=held["weights"], grads_bytes=held["grads"],
                       optimizer_bytes=held["optimizer"], strategy=str(sharding),
                       shards=group if key != "ddp" else 1, main_grads_bytes=held["main_grads"],
                       master_bytes=held["master"])


def gathered_unit_bytes(unit_params: float, recipe: str | precision.Recipe = "zero", tp: int = 1) -> float:
    """Bytes a ZeRO-3 / FSDP FULL_SHARD rank holds for the unit it is running: its unsharded parameters
    and their gradients in the compute dtype, 2 x compute bytes x unit_params / t.

    DeepSpeed's estimator counts 4 x largest-layer parameters (fp16 parameters + gradients) on top of the
    sharded states (``deepspeed/runtime/zero/stage3.py``, ``estimate_zero3_model_states_mem_needs``);
    FSDP gathers one unit (usually a transformer block) at a time and frees it after (Zhao et al. 2023,
    "PyTorch FSDP", sec. 3.2). A prefetched next unit would add as much again; it is not counted.

    Raises:
        ValueError: unit_params < 0 or not finite, tp not a whole number >= 1, an unknown recipe.
    """
    if not (unit_params >= 0 and math.isfinite(unit_params)):
        raise refuse(FINITE_NON_NEGATIVE, "unit_params", unit_params)
    _whole("tp", tp)
    return 2 * precision.recipe(recipe).compute_bytes * unit_params / tp


def layer_params(hidden: int) -> float:
    """Parameters of one GPT transformer layer, 12 h^2 (Narayanan et al. 2021 sec. 5.1, Eq. (2) without
    the biases, layer norms, embeddings and output layer)."""
    _whole("hidden", hidden)
    return 12.0 * hidden * hidden


@dataclass(frozen=True)
class PlanMemory:
    """Memory per GPU of one parallel plan: the rows of :func:`plan_memory`, bytes.

    Attributes:
        states: model states (:func:`model_states`).
        activation_bytes: activations of the first pipeline stage under 1F1B (0 when not counted).
        gathered_bytes: the running ZeRO-3/FSDP unit (:func:`gathered_unit_bytes`; 0 for other schemes).
        assumptions: what the numbers assume, one sentence each, for printing.
    """

    states: ModelStates
    activation_bytes: float
    gathered_bytes: float
    assumptions: tuple[str, ...]

    @property
    def total_bytes(self) -> float:
        """model states + activations + gathered unit, bytes per GPU (the margin is the caller's)."""
        return self.states.total_bytes + self.activation_bytes + self.gathered_bytes


def plan_memory(
    params: float,
    *,
    recipe: str | precision.Recipe = "zero",
    sharding: str | int = "ddp",
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    shard_group: int | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    seq_len: int | None = None,
    micro_batch: int = 1,
    recompute: str = "none",
    sequence_parallel: bool | None = None,
    interleaving_stages: int = 1,
    largest_layer: float | None = None,
) -> PlanMemory:
    """Per-GPU memory of a plan: model states + activations + the gathered ZeRO-3/FSDP unit, bytes.

    TP, PP and CP apply to every row: states as :func:`model_states`; activations as
    :func:`first_stage_activation_bytes` (Korthikanti et al. 2022 Eq. (5)/(6): L layers' worth on the first
    stage under 1F1B whatever p) divided by cp (context parallelism splits every activation along the
    sequence); the gathered unit is one transformer layer (12 h^2 / t parameters, :func:`layer_params`)
    for ZeRO-3 / FULL_SHARD / HYBRID_SHARD, or ``largest_layer`` parameters when given (DeepSpeed's L, whose 4L
    term is this unit in 16 bits). Activations need all of layers, hidden, heads and seq_len;
    without them they are 0 and the assumptions say so. sequence_parallel defaults to tp > 1.

    Not counted (say so wherever a fit is claimed): embeddings' and the loss's activations, temporary
    communication buffers, allocator fragmentation, the CUDA context (ZeRO sec. 3.2 "residual states").

    When pp does not divide the layers (DeepSpeed's pipeline allows uneven stages) the largest stage,
    ceil(L/p) layers, is counted.

    Raises:
        ValueError: as :func:`model_states` and :func:`activation_bytes_per_layer`.
    """
    states = model_states(params, recipe, sharding, dp, tp, pp, cp, shard_group)
    r = precision.recipe(recipe)
    _whole("micro_batch", micro_batch)
    sp = tp > 1 if sequence_parallel is None else sequence_parallel
    notes = [_(PRECISION_NOTE).format(name=r.name, bytes=r.total_bytes_per_param, source=_(r.source)),
             _(SHARDS_NOTE).format(strategy=states.strategy, shards=states.shards, local=params / (tp * pp))]
    arch = (layers, hidden, heads, seq_len)
    acts = 0.0
    if None in arch:
        notes.append(_(NO_ACTIVATIONS))
    else:
        assert layers is not None and hidden is not None and heads is not None and seq_len is not None
        _whole("pp", pp)
        worth = -(-layers // pp) * pp  # uneven stages: the largest holds ceil(L/p) layers for p micro-batches
        acts = first_stage_activation_bytes(seq_len, micro_batch, hidden, heads, worth, tp, sp, recompute, pp,
                                            interleaving_stages) / cp
        if worth != layers:
            notes.append(_(UNEVEN_STAGES).format(pp=pp, largest=worth // pp, layers=layers))
        notes.append(_(ACTIVATIONS_NOTE).format(recompute=recompute, sp=_(SP_ON) if sp else _(SP_OFF), layers=layers,
                                                split=_(SPLIT_OVER_CP).format(cp=cp) if cp > 1 else ""))
    gathered = 0.0
    if precision.SHARDS[precision.scheme(sharding)][0]:
        if hidden is None and layers is None and largest_layer is None:
            notes.append(_(NO_GATHERED))
        else:
            unit = (largest_layer if largest_layer is not None else
                    layer_params(hidden) if hidden is not None else params / (layers or 1))
            gathered = gathered_unit_bytes(unit, r, tp)
            notes.append(_(GATHERED_NOTE).format(unit=unit))
    return PlanMemory(states, acts, gathered, tuple(notes))
