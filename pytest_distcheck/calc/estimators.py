"""Model states as each framework's own estimator counts them: named variants, each with its formula and source.

Psi parameters, N GPUs in all, n GPUs per node, L the largest layer's parameters; bytes per GPU and per
node. Variants: ``deepspeed-docs`` (DeepSpeed ``memory.rst``, "Memory Requirements"), ``deepspeed-estimator``
(``estimate_zero2_model_states_mem_needs`` after PR #5099, ``stage3.py``), ``megatron-distopt`` (Megatron-LM
README, "Distributed Optimizer"). Host memory per node multiplies by DeepSpeed's
``additional_buffer_factor`` = 1.5. DeepSpeed's "GB" are :data:`GIB`. The ZeRO paper's own count with
offload placements is :func:`offload_placement`. All are model states only, a lower bound; the
formulas: docs/design/calc.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_distcheck.calc import precision
from pytest_distcheck.calc._checks import FINITE_NON_NEGATIVE, FINITE_POSITIVE, refuse
from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

GIB = 2**30  # bytes; DeepSpeed's estimators print bytes / 2**30 as "GB"
BUFFER_FACTOR = 1.5  # DeepSpeed's additional_buffer_factor on host memory, "to be conservative" (memory.rst)
DEVICES = ("none", "cpu", "nvme")
LOWER_BOUND = N_("model states only: a lower bound (activations, communication buffers, fragmentation and the "
                 "CUDA context come on top; DeepSpeed#4527 measured 29-42x DeepSpeed's own estimate of 0.49 GiB)")

DEEPSPEED_DOCS = "deepspeed-docs"
DEEPSPEED_ESTIMATOR = "deepspeed-estimator"
MEGATRON_DISTOPT = "megatron-distopt"
ZERO_PAPER = "zero-paper"
# Catalog messages (their words, "and", "after", speak the learner's language; spoken as _(SOURCES[v])).
SOURCES = {
    ZERO_PAPER: N_("Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.3; ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840) "
                   "sec. 4; ZeRO-Infinity (Rajbhandari et al. 2021, arXiv:2104.07857) sec. 5"),
    DEEPSPEED_DOCS: N_("DeepSpeed docs, docs/code-docs/source/memory.rst ('Memory Requirements')"),
    DEEPSPEED_ESTIMATOR: N_("deepspeed/runtime/zero/stage_1_and_2.py and stage3.py, estimate_zero{2,3}_model_states_"
                            "mem_needs, after DeepSpeed PR #5099"),
    MEGATRON_DISTOPT: N_("Megatron-LM README, 'Distributed Optimizer' (theoretical bytes per parameter)"),
}
VARIANTS = tuple(SOURCES)
NOT_DEEPSPEED = N_("{function} follows {docs} or {estimator}, not {variant!r}")
OFFLOAD_DEVICES = N_("offload devices are {devices}; got optimizer={optimizer!r}, param={param!r}")
PARAM_OFFLOAD_STAGE = N_("parameter offload (ZeRO-Infinity) needs ZeRO-3, not {stage!r}")
OPTIMIZER_OFFLOAD_STAGE = N_("optimizer offload (ZeRO-Offload) needs ZeRO-2 or ZeRO-3, not {stage!r}")
PARAM_WITHOUT_OPTIMIZER = N_("parameter offload without optimizer offload is not a DeepSpeed configuration: offload "
                             "the optimizer too")
GPU_HOLDS = N_("GPU holds {held}")
NOTHING = N_("nothing")
# The ZeRO paper's three model states, named in the offload formulas ("GPU holds params", "(grads+optimizer)").
PART_NAMES = {"params": N_("params"), "grads": N_("grads"), "optimizer": N_("optimizer")}


@dataclass(frozen=True)
class Estimate:
    """One row of a framework's estimate: bytes per GPU and per node, with the formulas that gave them.

    Attributes:
        variant: a name of :data:`VARIANTS`. options: the configuration, in the framework's own words.
        gpu_bytes: per GPU. host_bytes: CPU memory per node. nvme_bytes: NVMe per node (0 unless offloaded there).
        gpu_formula, host_formula: the formulas, Psi/N/n/L as in the module docstring.
    """

    variant: str
    options: str
    gpu_bytes: float
    host_bytes: float
    gpu_formula: str
    host_formula: str
    nvme_bytes: float = 0.0

    @property
    def source(self) -> str:
        """Where the formula comes from (:data:`SOURCES`)."""
        return SOURCES[self.variant]


def _counts(params: float, gpus_per_node: int, nodes: int, largest_layer: float) -> None:
    if not (params > 0 and math.isfinite(params)):
        raise refuse(FINITE_POSITIVE, "params", params)
    if not (largest_layer >= 0 and math.isfinite(largest_layer)):
        raise refuse(FINITE_NON_NEGATIVE, "largest_layer", largest_layer)
    _whole("gpus_per_node", gpus_per_node)
    _whole("nodes", nodes)


def deepspeed_zero2(params: float, gpus_per_node: int = 1, nodes: int = 1, variant: str = DEEPSPEED_ESTIMATOR,
                    buffer_factor: float = BUFFER_FACTOR) -> list[Estimate]:
    """DeepSpeed's ZeRO-2 rows (optimizer offloaded to the CPU, then not), as ``estimate_zero2_model_states_mem_needs``.

    Offloaded: GPU 2 Psi, host Psi max(4N, 16) x factor (N all the GPUs, DeepSpeed's ``total_gpus``).
    Not: GPU 4 Psi + 16 Psi/N (``deepspeed-docs``) or
    2 Psi + 18 Psi/N (``deepspeed-estimator``, PR #5099: 2 fp16 params whole; 2 fp16 grads + 4 fp32 grads + 4 fp32
    params + 8 Adam partitioned), host 4 Psi n x factor (the fp32 model each process builds first). DeepSpeed
    truncates with ``int``, as here. Raises ValueError: bad counts, a variant that is not DeepSpeed's.
    """
    _counts(params, gpus_per_node, nodes, 0)
    if variant not in (DEEPSPEED_DOCS, DEEPSPEED_ESTIMATOR):
        raise ValueError(_(NOT_DEEPSPEED).format(function="deepspeed_zero2", docs=DEEPSPEED_DOCS,
                                                   estimator=DEEPSPEED_ESTIMATOR, variant=variant))
    total, n, f = nodes * gpus_per_node, gpus_per_node, buffer_factor
    whole, split = (4, 16) if variant == DEEPSPEED_DOCS else (2, 18)
    return [
        Estimate(variant, "offload_optimizer=cpu", int(2 * params), int(params * max(4 * total, 16) * f),
                 "2 Psi", f"{f:g} x max(4 N, 16) Psi"),
        Estimate(variant, "offload_optimizer=none", int(whole * params + int(split * params / total)),
                 int(params * 4 * n * f), f"{whole} Psi + {split} Psi/N", f"{f:g} x 4 n Psi"),
    ]


def deepspeed_zero3(params: float, largest_layer: float, gpus_per_node: int = 1, nodes: int = 1,
                    buffer_factor: float = BUFFER_FACTOR, variant: str = DEEPSPEED_ESTIMATOR) -> list[Estimate]:
    """DeepSpeed's six ZeRO-3 rows, in its order, as ``estimate_zero3_model_states_mem_needs`` (docs and code agree).

    GPU: 4L (the largest layer gathered: fp16 params + grads) plus 0, 2 Psi/N or 18 Psi/N as parameters and
    optimizer are offloaded; host per node, g = 1/nodes: 18 Psi g, 16 Psi g (with ``zero.Init``) or
    max(4n, 18 g) Psi, max(4n, 16 g) Psi (without), 4Ln or 4 Psi n when nothing is offloaded; x factor.
    Raises ValueError: bad counts, a variant that is not DeepSpeed's.
    """
    _counts(params, gpus_per_node, nodes, largest_layer)
    if variant not in (DEEPSPEED_DOCS, DEEPSPEED_ESTIMATOR):
        raise ValueError(_(NOT_DEEPSPEED).format(function="deepspeed_zero3", docs=DEEPSPEED_DOCS,
                                                   estimator=DEEPSPEED_ESTIMATOR, variant=variant))
    total, n, f, g = nodes * gpus_per_node, gpus_per_node, buffer_factor, 1 / nodes
    layer = 4 * largest_layer
    rows = []
    for optimizer, param in (("cpu", "cpu"), ("cpu", "none"), ("none", "none")):
        for zero_init in (1, 0):
            if param == "cpu":
                gpu, gpu_f = layer, "4L"
                host, host_f = (18 * g, "18 Psi/nodes") if zero_init else (max(4 * n, 18 * g), "max(4 n, 18/nodes) Psi")
                host *= params
            elif optimizer == "cpu":
                gpu, gpu_f = layer + int(2 * params / total), "4L + 2 Psi/N"
                host, host_f = (16 * g, "16 Psi/nodes") if zero_init else (max(4 * n, 16 * g), "max(4 n, 16/nodes) Psi")
                host *= params
            else:
                gpu, gpu_f = layer + int(18 * params / total), "4L + 18 Psi/N"
                host, host_f = (largest_layer * 4 * n, "4 L n") if zero_init else (params * 4 * n, "4 n Psi")
            options = f"offload_param={param}, offload_optimizer={optimizer}, zero_init={zero_init}"
            rows.append(Estimate(variant, options, int(gpu), int(host * f), gpu_f, f"{f:g} x {host_f}"))
    return rows


def megatron_distopt(params: float, dp: int) -> list[Estimate]:
    """The Megatron-LM README's distributed-optimizer rows for d = dp: bytes per GPU of Psi parameters.

    fp16 param + fp16 grads 4 + 16/d, bf16 param + fp32 grads 6 + 12/d, fp32 param + fp32 grads 8 + 8/d (the
    ``megatron-fp16``/``-bf16``/``-fp32`` recipes of ``calc.precision`` under ``megatron-distopt``). No host part.
    Raises ValueError: params not > 0, dp not a whole number >= 1.
    """
    from pytest_distcheck.calc.memory import model_states

    _counts(params, 1, 1, 0)
    _whole("dp", dp)
    rows = []
    for name, label in (("megatron-fp16", "fp16 param, fp16 grads"), ("megatron-bf16", "bf16 param, fp32 grads"),
                        ("megatron-fp32", "fp32 param, fp32 grads")):
        per = precision.recipe(name).bytes_per_param()
        sharded = dict(zip(precision.PARTS, precision.SHARDS["megatron-distopt"], strict=True))
        whole = sum(v for part, v in per.items() if not sharded[part])
        split = sum(v for part, v in per.items() if sharded[part])
        states = model_states(params, name, "megatron-distopt", dp=dp)
        rows.append(Estimate(MEGATRON_DISTOPT, label, states.total_bytes, 0.0, f"({whole:g} + {split:g}/d) Psi", "-"))
    return rows


def offload_placement(params: float, stage: str, dp: int, gpus_per_node: int, offload_optimizer: str = "none",
                      offload_param: str = "none", largest_layer: float = 0.0, k: float = 12,
                      buffer_factor: float = BUFFER_FACTOR) -> Estimate:
    """Where the ZeRO paper's 2 + 2 + K bytes per parameter live under ZeRO-Offload / ZeRO-Infinity, per GPU and node.

    Each rank keeps its 1/N_d partitions (ZeRO sec. 5). Offloading the optimizer (ZeRO-Offload, stage 2 or 3)
    moves the fp32 master + Adam (K Psi/N_d) and the reduced fp16 gradients (2 Psi/N_d) to the CPU (or NVMe,
    ZeRO-Infinity); offloading the parameters (ZeRO-Infinity, stage 3) moves the fp16 partition (2 Psi/N_d) too,
    and the GPU keeps the largest layer gathered with its gradients, 4L. Per node = gpus_per_node partitions,
    host bytes x buffer_factor (DeepSpeed's 1.5, memory.rst). Buffers and pinned staging are not counted.
    Raises ValueError: an unknown device, parameter offload below stage 3, offload below stage 2, bad counts.
    """
    _counts(params, gpus_per_node, 1, largest_layer)
    _whole("dp", dp)
    if offload_optimizer not in DEVICES or offload_param not in DEVICES:
        raise ValueError(_(OFFLOAD_DEVICES).format(devices=", ".join(DEVICES), optimizer=offload_optimizer,
                                                   param=offload_param))
    key = precision.scheme(stage)
    if offload_param != "none" and key != "zero3":
        raise ValueError(_(PARAM_OFFLOAD_STAGE).format(stage=stage))
    if offload_optimizer != "none" and key not in ("zero2", "zero3"):
        raise ValueError(_(OPTIMIZER_OFFLOAD_STAGE).format(stage=stage))
    if offload_param != "none" and offload_optimizer == "none":
        raise ValueError(_(PARAM_WITHOUT_OPTIMIZER))
    n_p, n_g, n_o = {"ddp": (1, 1, 1), "zero1": (1, 1, dp), "zero2": (1, dp, dp), "zero3": (dp, dp, dp)}[key]
    parts = {"params": (2 * params / n_p, offload_param), "grads": (2 * params / n_g, offload_optimizer),
             "optimizer": (k * params / n_o, offload_optimizer)}
    gpu = sum(b for b, where in parts.values() if where == "none") + (4 * largest_layer if key == "zero3" else 0)
    host = sum(b for b, where in parts.values() if where == "cpu") * gpus_per_node * buffer_factor
    nvme = sum(b for b, where in parts.values() if where == "nvme") * gpus_per_node
    on = lambda where: "+".join(_(PART_NAMES[name]) for name, (_bytes, w) in parts.items() if w == where) or "-"  # noqa: E731
    held = [x for x in (on("none"), "4L" if key == "zero3" else "-") if x != "-"]
    return Estimate(ZERO_PAPER, f"{key}, offload_optimizer={offload_optimizer}, offload_param={offload_param}",
                    gpu, host, _(GPU_HOLDS).format(held=" + ".join(held) or _(NOTHING)),
                    f"{buffer_factor:g} x n x ({on('cpu')})", nvme)
