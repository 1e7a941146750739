"""Place a model for serving: weights + KV cache per GPU, TP inside the NVLink domain, PP across nodes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_distcheck.calc import inference
from pytest_distcheck.strategy.model import GB, SOURCES, Cluster, Model, Rule, divisors, validate, with_architecture


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
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    model, assumed = with_architecture(replace(model, seq_len=model.seq_len or context))
    assert model.layers is not None and model.heads is not None and model.hidden is not None
    kv = model.kv_heads or model.heads
    usable = usable_fraction * cluster.gpu_memory_gb * GB
    g = cluster.gpus_per_node
    tps = [1] if cluster.intra_node == "pcie" else [t for t in divisors(g) if model.heads % t == 0]
    shapes = [(t, 1) for t in tps] + [(tps[-1], p) for p in divisors(model.layers) if 1 < p
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
        rejected.append(f"TP={t} x PP={p}: {(w + c) / GB:.1f} GB per GPU (weights {w / GB:.1f} GB + KV cache "
                        f"{c / GB:.1f} GB) > {usable / GB:.1f} GB")
    t, p = shapes[-1]
    w, c = inference.serving_bytes_per_gpu(model.params, model.layers, batch, context, model.hidden, model.heads,
                                           kv, t, p, weight_dtype, kv_dtype)
    rules.append(Rule("FIT", "nothing fits: fewer sequences, a shorter context, a smaller KV dtype, or more GPUs",
                      SOURCES["FIT"]))
    return InferencePlan(t, p, max(cluster.gpus // (t * p), 0), w, c, usable, False, tuple(rules), tuple(rejected))
