"""Check a given TP x PP x CP x DP plan: every rule of the decision table it breaks."""

from __future__ import annotations

from pytest_distcheck.calc import memory, precision
from pytest_distcheck.calc._checks import whole
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.strategy.model import GB, SOURCES, ZERO3_MAX_DP, Cluster, Model, Rule, validate, with_architecture

SIZE = N_("TP x PP x CP x DP = {tp} x {pp} x {cp} x {dp} = {product}, but the cluster has {gpus} GPUs")
TP_SPANS_NODES = N_("TP={tp} spans nodes: keep TP <= {g} GPUs per node, pipeline across nodes")
TP_DIVIDES = N_("TP={tp} must divide the attention heads ({heads}) and the hidden size ({hidden})")
PP_LAYERS = N_("PP={pp} is more stages than layers ({layers})")
CP_SEQ_LEN = N_("CP={cp} needs seq_len ({seq_len}) divisible by 2 x CP")
TP_PCIE = N_("TP={tp} without NVLink: TP's 4 all-reduces per layer run over PCIe; use PP instead")
ZERO_WITH_PP = N_("{zero} with PP={pp}: gradients/parameters are reduce-scattered/gathered for every micro-batch; "
                  "use ZeRO-1")
ZERO3_SLOW = N_("ZeRO-3 over a slow inter-node link: parameter all-gathers cross it in every forward and backward; "
                "use HYBRID_SHARD or TP x PP")
ZERO3_RANKS = N_("ZeRO-3 over {ranks} >= {max} ranks")
DOES_NOT_FIT = N_("{total:.1f} GB per GPU (states {states:.1f} GB + activations {activations:.1f} GB + gathered "
                  "{gathered:.1f} GB) > {usable:.1f} GB usable")


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
        whole(name, value)
    key = precision.scheme(zero)
    model, _assumed = with_architecture(model)
    assert model.layers is not None and model.heads is not None and model.hidden is not None
    assert model.seq_len is not None
    g, n = cluster.gpus_per_node, cluster.gpus
    broken: list[Rule] = []

    def breaks(rule: str, text: str) -> None:
        broken.append(Rule(rule, text, SOURCES[rule]))

    if tp * pp * cp * dp != n:
        breaks("SIZE", _(SIZE).format(tp=tp, pp=pp, cp=cp, dp=dp, product=tp * pp * cp * dp, gpus=n))
    if tp > g:
        breaks("R4", _(TP_SPANS_NODES).format(tp=tp, g=g))
    if model.heads % tp or model.hidden % tp:
        breaks("R4", _(TP_DIVIDES).format(tp=tp, heads=model.heads, hidden=model.hidden))
    if pp > model.layers:
        breaks("R4", _(PP_LAYERS).format(pp=pp, layers=model.layers))
    if model.seq_len % (2 * cp):
        breaks("R4", _(CP_SEQ_LEN).format(cp=cp, seq_len=model.seq_len))
    if tp > 1 and cluster.intra_node == "pcie":
        breaks("R5", _(TP_PCIE).format(tp=tp))
    if pp > 1 and key in ("zero2", "zero3"):
        breaks("R6", _(ZERO_WITH_PP).format(zero=zero, pp=pp))
    # Megatron's rank order puts TP, then CP, then DP innermost: the DP group leaves the node when tp cp dp > g
    if key == "zero3" and cluster.nodes > 1 and cluster.inter_node == "slow" and tp * cp * dp > g:
        breaks("R3", _(ZERO3_SLOW))
    if key == "zero3" and dp * cp >= ZERO3_MAX_DP:
        breaks("R3", _(ZERO3_RANKS).format(ranks=dp * cp, max=ZERO3_MAX_DP))
    mem = None
    if not any(r.id in ("SIZE", "R4") for r in broken):
        mem = memory.plan_memory(model.params, recipe=model.recipe, sharding=key, dp=dp, tp=tp, pp=pp, cp=cp,
                                 layers=model.layers, hidden=model.hidden, heads=model.heads,
                                 seq_len=model.seq_len, micro_batch=model.micro_batch, recompute=recompute)
        usable = usable_fraction * cluster.gpu_memory_gb * GB
        if mem.total_bytes > usable:
            breaks("FIT", _(DOES_NOT_FIT).format(total=mem.total_bytes / GB, states=mem.states.total_bytes / GB,
                                                 activations=mem.activation_bytes / GB,
                                                 gathered=mem.gathered_bytes / GB, usable=usable / GB))
    return broken, mem


