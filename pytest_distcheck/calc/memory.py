"""Memory per GPU: model states under DDP, ZeRO-1/2/3 and the FSDP sharding strategies; activations.

Model states (Rajbhandari et al. 2019, "ZeRO", arXiv:1910.02054):
    sec. 3.1: mixed-precision Adam keeps 2 Psi bytes of fp16 parameters, 2 Psi of fp16 gradients and
    K Psi of optimizer states (fp32 master parameters, momentum, variance: K = 12), 16 Psi in all.
    sec. 5.1-5.3 and Fig. 1, with N_d data-parallel ranks:
        DDP     (2 + 2 + K) Psi
        ZeRO-1  (2 + 2) Psi + K Psi / N_d               (optimizer states partitioned, P_os)
        ZeRO-2  2 Psi + (2 + K) Psi / N_d               (+ gradients, P_os+g)
        ZeRO-3  (2 + 2 + K) Psi / N_d                   (+ parameters, P_os+g+p)
FSDP sharding strategies (PyTorch ``torch/distributed/fsdp/api.py``, ``ShardingStrategy``), counted
with ZeRO's accounting: NO_SHARD ~ DDP; SHARD_GRAD_OP ~ ZeRO-2 (parameters stay unsharded between
forward and backward); FULL_SHARD ~ ZeRO-3; HYBRID_SHARD = FULL_SHARD within a shard group of G GPUs
(one node) and replicated across nodes, so ZeRO-3 with N_d = G; _HYBRID_SHARD_ZERO2 likewise with
SHARD_GRAD_OP.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198), bytes per transformer layer with 16-bit activations and 1-byte dropout masks,
s = sequence length, b = micro-batch size, h = hidden size, a = attention heads, t = TP degree:
    no parallelism          s b h (34 + 5 a s / h)                 sec. 4.1, Eq. (1)
    TP                      s b h (10 + 24/t + 5 a s / (h t))      sec. 4.2.1, Eq. (2)
    TP + SP                 (s b h / t)(34 + 5 a s / h)            sec. 4.2.2, Eq. (4)
    TP + selective recomp.  s b h (10 + 24/t)                      sec. 5, Table 2
    TP + SP + selective     34 s b h / t                           sec. 5, Table 2
    full recomputation      2 s b h                                sec. 5, Table 2
These are the states only: no CUDA context, temporary buffers, or allocator fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.calc._checks import whole as _whole

GB = 1e9  # bytes (120 GB = 111.76 GiB)
ADAM_K = 12  # ZeRO sec. 3.1: fp32 params, momentum, variance for mixed-precision Adam
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
        optimizer_bytes: optimizer states (K Psi, or K Psi / N_d).
        strategy: the strategy as given (``"zero2"``, ``"FULL_SHARD"`` ...).
        shards: the number of ranks the partitioned states are divided over.
    """

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    strategy: str
    shards: int

    @property
    def total_bytes(self) -> float:
        """params + grads + optimizer states, bytes."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def total_gb(self) -> float:
        """total_bytes in GB (1e9 bytes)."""
        return self.total_bytes / GB


def _stage_key(stage: str | int) -> str:
    key = str(stage).lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"0": "ddp", "zero0": "ddp", "1": "zero1", "2": "zero2", "3": "zero3"}
    key = aliases.get(key, key)
    if key not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {stage!r}; known: ddp (or 0), zero1, zero2, zero3")
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
        raise ValueError(f"params must be >= 0, got {params!r}")
    _whole("dp (data-parallel degree)", dp)
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
        raise ValueError(f"unknown FSDP sharding strategy {sharding_strategy!r}; known: "
                         f"{', '.join(FSDP_STRATEGIES)}")
    _whole("world_size", world_size)
    shards = world_size
    if "HYBRID" in key:
        if gpus_per_node is None:
            raise ValueError(f"{key} shards within a node: give gpus_per_node")
        _whole("gpus_per_node", gpus_per_node)
        if world_size % gpus_per_node != 0:
            raise ValueError(f"{key} needs world_size to be a multiple of gpus_per_node; got "
                             f"world_size={world_size}, gpus_per_node={gpus_per_node}")
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
        raise ValueError(f"unknown recompute {recompute!r}; known: {', '.join(RECOMPUTE)}")
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
