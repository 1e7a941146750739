"""Precision recipes as data: bytes per parameter of each model state, and what each sharding scheme shards.

A recipe gives, per parameter, the bytes of ``weights``, ``grads``, ``main_grads``, ``master`` and
``optimizer`` states, and ``compute``, the dtype a ZeRO-3/FSDP unit gathers to run. Dtype bytes: fp32 4,
bf16 2, fp16 2, fp8 1 (Micikevicius et al. 2022 sec. 2); Adam keeps 2 states per parameter (Kingma & Ba
2015), SGD with momentum 1, Adafactor ~0 (Shazeer & Stern 2018). Schemes shard over their group as ZeRO
sec. 5.1-5.3, torch's FSDP ``ShardingStrategy`` and Megatron-LM's distributed optimizer do; ZeRO's K
(sec. 3.1) is master + optimizer. The table of parts and schemes: docs/design/calc.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.i18n import N_, _

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
OPTIMIZER_STATES = {"adam": 2, "sgd_momentum": 1, "adafactor": 0, "sgd": 0}
PARTS = ("weights", "grads", "main_grads", "master", "optimizer")

# part -> sharded?  (weights, grads, main_grads, master, optimizer)
SHARDS: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "ddp": (False, False, False, False, False),
    "zero1": (False, False, True, True, True),
    "zero2": (False, True, True, True, True),
    "zero3": (True, True, True, True, True),
    "megatron-distopt": (False, False, True, True, True),
}
FSDP_TO_SCHEME = {"NO_SHARD": "ddp", "SHARD_GRAD_OP": "zero2", "FULL_SHARD": "zero3",
                  "HYBRID_SHARD": "zero3", "_HYBRID_SHARD_ZERO2": "zero2"}
SCHEME_SOURCE = {
    "ddp": "Rajbhandari et al. 2019 (ZeRO) sec. 3.1, 5",
    "zero1": "Rajbhandari et al. 2019 (ZeRO) sec. 5.1",
    "zero2": "Rajbhandari et al. 2019 (ZeRO) sec. 5.2",
    "zero3": "Rajbhandari et al. 2019 (ZeRO) sec. 5.3",
    "megatron-distopt": "Megatron-LM README, 'Distributed Optimizer' (bytes per parameter table)",
}
UNKNOWN_DTYPE = N_("unknown dtype {dtype!r}; known: {known}")
UNKNOWN_OPTIMIZER = N_("unknown optimizer {optimizer!r}; known: {known}")
UNKNOWN_RECIPE = N_("unknown precision recipe {recipe!r}; known: {known}")
UNKNOWN_SHARDING = N_("unknown sharding {sharding!r}; known: ddp (0), zero1, zero2, zero3, megatron-distopt, and FSDP "
                      "{fsdp}")


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (fp32 4, bf16 2, fp16 2, fp8 1).

    Raises:
        ValueError: an unknown dtype, naming the known ones.
    """
    if dtype not in DTYPE_BYTES:
        raise ValueError(_(UNKNOWN_DTYPE).format(dtype=dtype, known=", ".join(DTYPE_BYTES)))
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Recipe:
    """A mixed-precision training recipe: the dtype of each part of the model states (module docstring).

    Attributes:
        name: preset name. weights, grads, compute: dtypes. main_grads, master: dtype or None (no copy).
        optimizer: ``adam``, ``sgd_momentum``, ``adafactor`` or ``sgd``; optimizer_dtype: its states' dtype.
        source: where the recipe comes from (paper section, file or doc); the presets' are catalog messages,
            spoken translated in :func:`pytest_distcheck.calc.memory.plan_memory`'s notes.
    """

    name: str
    weights: str
    grads: str
    master: str | None
    optimizer: str
    optimizer_dtype: str = "fp32"
    main_grads: str | None = None
    compute: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for dtype in (self.weights, self.grads, self.optimizer_dtype, self.master, self.main_grads,
                      self.compute):
            if dtype is not None:
                dtype_bytes(dtype)
        if self.optimizer not in OPTIMIZER_STATES:
            raise ValueError(_(UNKNOWN_OPTIMIZER).format(optimizer=self.optimizer, known=", ".join(OPTIMIZER_STATES)))

    def bytes_per_param(self) -> dict[str, float]:
        """Bytes per parameter of each part (keys: :data:`PARTS`)."""
        return {
            "weights": dtype_bytes(self.weights),
            "grads": dtype_bytes(self.grads),
            "main_grads": dtype_bytes(self.main_grads) if self.main_grads else 0,
            "master": dtype_bytes(self.master) if self.master else 0,
            "optimizer": OPTIMIZER_STATES[self.optimizer] * dtype_bytes(self.optimizer_dtype),
        }

    @property
    def total_bytes_per_param(self) -> float:
        """Bytes per parameter with nothing sharded (16 for ZeRO's mixed-precision Adam)."""
        return float(sum(self.bytes_per_param().values()))

    @property
    def k(self) -> float:
        """ZeRO's K: master + optimizer bytes per parameter (ZeRO sec. 3.1; 12 for mixed-precision Adam)."""
        b = self.bytes_per_param()
        return float(b["master"] + b["optimizer"])

    @property
    def compute_bytes(self) -> int:
        """Bytes per element of the parameters a gathered unit runs with (``compute`` or ``weights``)."""
        return dtype_bytes(self.compute or self.weights)


PRESETS: dict[str, Recipe] = {r.name: r for r in (
    Recipe("zero", "fp16", "fp16", "fp32", "adam",
           source=N_("Rajbhandari et al. 2019 (ZeRO) sec. 3.1: 2 + 2 + K, K = 12 (fp32 params, momentum, variance)")),
    Recipe("megatron-bf16", "bf16", "fp32", "fp32", "adam",
           source=N_("Megatron-LM README, 'Distributed Optimizer': bf16 param, fp32 grads: 18 bytes, 6 + 12/d "
                     "distributed")),
    Recipe("megatron-fp16", "fp16", "fp16", "fp32", "adam", main_grads="fp32",
           source=N_("Megatron-LM README, 'Distributed Optimizer': fp16 param, fp16 grads: 20 bytes, 4 + 16/d "
                     "distributed")),
    Recipe("megatron-fp32", "fp32", "fp32", None, "adam",
           source=N_("Megatron-LM README, 'Distributed Optimizer': fp32 param, fp32 grads: 16 bytes, 8 + 8/d "
                     "distributed")),
    Recipe("deepspeed-fp16", "fp16", "fp16", "fp32", "adam",
           source=N_("fp16 weights and grads with fp32 Adam, counted as the ZeRO paper's 2 + 2 + 12 (ZeRO sec. 3.1); "
                     "DeepSpeed's own estimators count more (fp32 gradients too): calc/estimators.py, "
                     "variants deepspeed-docs and deepspeed-estimator")),
    Recipe("deepspeed-bf16", "bf16", "bf16", "fp32", "adam",
           source=N_("DeepSpeed bf16 config: the fp16 recipe with bf16 weights and grads (2 + 2 + 12)")),
    Recipe("fsdp2-bf16", "fp32", "fp32", None, "adam", compute="bf16",
           source=N_("torch.distributed.fsdp (torch 2.6+; _composable.fsdp in 2.5) "
                     "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): "
                     "sharded parameters stay fp32 (no extra master copy), bf16 only when unsharded")),
    Recipe("fp32-adam", "fp32", "fp32", None, "adam", source=N_("plain fp32 Adam: 4 + 4 + 8")),
    Recipe("bf16-sgd-momentum", "bf16", "bf16", "fp32", "sgd_momentum",
           source=N_("mixed precision with SGD + momentum: 2 + 2 + 4 (master) + 4 (momentum)")),
    Recipe("bf16-adafactor", "bf16", "bf16", "fp32", "adafactor",
           source=N_("mixed precision with Adafactor (Shazeer & Stern 2018, beta1 = 0): 2 + 2 + 4 (master)")),
    Recipe("fp8-megatron", "bf16", "fp32", "fp32", "adam", compute="fp8",
           source=N_("FP8 training as in Micikevicius et al. 2022 (FP8 formats): fp8 only for GEMM inputs, "
                     "weights and optimizer in higher precision; model states as megatron-bf16")),
)}


def recipe(name_or_recipe: str | Recipe) -> Recipe:
    """The :class:`Recipe` named ``name_or_recipe`` from :data:`PRESETS` (a Recipe is returned as is).

    Raises:
        ValueError: an unknown preset name, naming the known ones.
    """
    if isinstance(name_or_recipe, Recipe):
        return name_or_recipe
    if name_or_recipe not in PRESETS:
        raise ValueError(_(UNKNOWN_RECIPE).format(recipe=name_or_recipe, known=", ".join(PRESETS)))
    return PRESETS[name_or_recipe]


def scheme(name: str | int) -> str:
    """The sharding scheme key (``ddp``, ``zero1``, ``zero2``, ``zero3``, ``megatron-distopt``) for a ZeRO
    stage (0-3, ``"ZeRO-2"``...), an FSDP ShardingStrategy name, or ``distopt``.

    Raises:
        ValueError: an unknown name, naming the known ones.
    """
    text = str(name)
    if text.upper() in FSDP_TO_SCHEME or text.upper().lstrip("_") == "HYBRID_SHARD_ZERO2":
        return FSDP_TO_SCHEME.get(text.upper(), "zero2")
    key = text.lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"0": "ddp", "zero0": "ddp", "1": "zero1", "2": "zero2", "3": "zero3", "distopt": "megatron-distopt",
               "megatrondistopt": "megatron-distopt", "distributedoptimizer": "megatron-distopt",
               "fsdp": "zero3", "hsdp": "zero3"}
    key = aliases.get(key, key)
    if key not in SHARDS:
        raise ValueError(_(UNKNOWN_SHARDING).format(sharding=name, fsdp=", ".join(FSDP_TO_SCHEME)))
    return key
