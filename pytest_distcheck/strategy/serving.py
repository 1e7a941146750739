"""Place a model for serving: weights + KV cache per GPU, TP inside the NVLink domain, PP across nodes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_distcheck.calc import inference
from pytest_distcheck.calc._checks import whole
from pytest_distcheck.i18n import N_, _, ngettext
from pytest_distcheck.strategy.model import GB, SOURCES, Cluster, Model, Rule, divisors, validate, with_architecture

SERVING = N_("serving {batch} sequences x {context} tokens: weights ({weight_dtype}) + KV cache ({kv_dtype}, {kv} KV "
             "heads) per GPU <= {usable:.1f} GB")
TP_IN_NODE = N_("TP within a node")
PP_ACROSS_NODES = N_(", PP={pp} across nodes")
PP_ACROSS_GPUS = N_(", PP={pp} across GPUs")
NO_NVLINK = N_("no NVLink within a node: no tensor parallelism")
NO_NVLINK_PP = N_("no NVLink within a node: no tensor parallelism; pipeline stages instead")
REJECTED = N_("TP={tp} x PP={pp}: {total:.1f} GB per GPU (weights {weights:.1f} GB + KV cache {kv:.1f} GB) > "
              "{usable:.1f} GB")
NOTHING_FITS = N_("nothing fits: fewer sequences, a shorter context, a smaller KV dtype, or more GPUs")


def placed(tp: int, pp: int, where: str, replicas: int, gpus: int) -> str:
    """The rule text of a placement that fits (English keeps "replica(s)"; Spanish says réplica/réplicas)."""
    return ngettext("TP={tp} x PP={pp}: {where}; {replicas} replica(s) on {gpus} GPUs",
                    "TP={tp} x PP={pp}: {where}; {replicas} replica(s) on {gpus} GPUs",
                    replicas).format(tp=tp, pp=pp, where=where, replicas=replicas, gpus=gpus)


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
    validate(model, cluster, usable_fraction)
    for name, value in (("batch", batch), ("context", context)):
        whole(name, value)
    model, assumed = with_architecture(replace(model, seq_len=model.seq_len or context))
    assert model.layers is not None and model.heads is not None and model.hidden is not None
    kv = model.kv_heads or model.heads
    usable = usable_fraction * cluster.gpu_memory_gb * GB
    g = cluster.gpus_per_node
    tps = [1] if cluster.intra_node == "pcie" else [t for t in divisors(g) if model.heads % t == 0]
    shapes = [(t, 1) for t in tps] + [(tps[-1], p) for p in divisors(model.layers) if 1 < p
                                      and tps[-1] * p <= cluster.gpus]
    rules = [Rule("INF", _(SERVING).format(batch=batch, context=context, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                           kv=kv, usable=usable / GB), SOURCES["INF"])]
    if assumed:
        rules.append(assumed)
    rejected: list[str] = []
    for t, p in shapes:
        w, c = inference.serving_bytes_per_gpu(model.params, model.layers, batch, context, model.hidden, model.heads,
                                               kv, t, p, weight_dtype, kv_dtype)
        if w + c <= usable:
            across = _(PP_ACROSS_NODES if t * p > g else PP_ACROSS_GPUS).format(pp=p) if p > 1 else ""
            if cluster.intra_node == "pcie":
                rules.append(Rule("R5", _(NO_NVLINK_PP if p > 1 else NO_NVLINK), SOURCES["R5"]))
            rules.append(Rule("INF", placed(t, p, _(TP_IN_NODE) + across, cluster.gpus // (t * p), cluster.gpus),
                              SOURCES["INF"]))
            return InferencePlan(t, p, cluster.gpus // (t * p), w, c, usable, True, tuple(rules), tuple(rejected))
        rejected.append(_(REJECTED).format(tp=t, pp=p, total=(w + c) / GB, weights=w / GB, kv=c / GB,
                                           usable=usable / GB))
    t, p = shapes[-1]
    w, c = inference.serving_bytes_per_gpu(model.params, model.layers, batch, context, model.hidden, model.heads,
                                           kv, t, p, weight_dtype, kv_dtype)
    rules.append(Rule("FIT", _(NOTHING_FITS), SOURCES["FIT"]))
    return InferencePlan(t, p, max(cluster.gpus // (t * p), 0), w, c, usable, False, tuple(rules), tuple(rejected))
