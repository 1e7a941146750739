"""Check a given TP x PP x CP x DP plan: every rule of the decision table it breaks."""

from __future__ import annotations

from pytest_distcheck.calc import memory, precision
from pytest_distcheck.strategy.model import GB, SOURCES, ZERO3_MAX_DP, Cluster, Model, Rule, validate, with_architecture


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
    validate(model, cluster, usable_fraction)
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
            breaks("FIT", f"{mem.total_bytes / GB:.1f} GB per GPU (states {mem.states.total_bytes / GB:.1f} GB + "
                          f"activations {mem.activation_bytes / GB:.1f} GB + gathered "
                          f"{mem.gathered_bytes / GB:.1f} GB) > {usable / GB:.1f} GB usable")
    return broken, mem


