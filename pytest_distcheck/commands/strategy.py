"""Recommend a parallelization strategy (DDP, ZeRO, FSDP, TP x PP x DP), check a plan, or place a model for serving.

  distcheck strategy --params 7.5B --gpu-memory-gb 80 --gpus-per-node 8
  distcheck strategy --model llama2-13b --gpu-memory-gb 40 --gpus-per-node 8 --nodes 2 --intra pcie
  distcheck strategy --params 175B --gpu-memory-gb 80 --gpus-per-node 8 --nodes 16 --check tp=8,pp=8,dp=2
  distcheck strategy --params 70B --gpu-memory-gb 80 --gpus-per-node 8 --inference --batch 32 --context 4096
  distcheck strategy --rules

Prints the plan, the memory per GPU it predicts, the rules that fired with their sources, and the candidates
rejected before it; --check names every rule a plan breaks (exit 1 if any); --rules prints the decision table.
GB = 1e9 bytes, on every line that shows memory. More: docs/kit/tools.md.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import count, positive_int, real
from pytest_distcheck.i18n import N_, _, ngettext

CHECK_KEYS = ("tp", "pp", "dp", "cp", "zero", "recompute")
GIVE = N_("give {missing} (or --rules for the decision table)")
OR_FLAG = N_("{flag} (or {other})")  # one of the flags GIVE names: "--params (or --model)"
# --check's spec (argparse says them as "argument --check: ...")
NOT_KEY_VALUE = N_("{item!r}: expected KEY=VALUE with KEY one of {keys}")
RECOMPUTE_VALUES = N_("{item!r}: recompute is none, selective or full")
SPEC_LACKS = N_("{text!r} lacks {missing} (e.g. tp=8,pp=4,dp=2)")
# The frame of the output; plans' names, rules' texts and sources are built (and translated) by strategy/.
RULES_HEADER = N_("decision table of distcheck strategy, in its order of preference:")
RULE_LINE = N_("  [{rule}] {text}\n        source: {source}")
CLUSTER = N_("{gpus} GPUs ({nodes} x {per_node}, {memory:g} GB, {intra}{inter}); model {params:.4g} parameters")
INTER_NODE = N_(", {inter} inter-node")
# --inter's values as INTER_NODE says them (the flag's values stay fast/slow)
LINK_SPEED = {"fast": N_("fast"), "slow": N_("slow")}
ARCHITECTURE = N_("architecture {name}: L = {layers} layers, h = {hidden}, a = {heads} heads ({kv_heads} KV heads), "
                  "s = {seq_len} tokens; source: {source}")
MORE = N_("... {n} more ...")
RECOMMENDED = N_("recommended: {plan}")
DOES_NOT_FIT = N_("(DOES NOT FIT)")
SEQUENCE_PARALLEL = N_("sequence parallel")
RECOMPUTATION = N_("{recompute} recomputation")
MICROBATCHES = N_("m >= {m} micro-batches")
MEMORY_PER_GPU = N_("  memory per GPU: {total:.1f} GB = model states {states:.1f} GB + activations {activations:.1f} GB"
                    "{gathered} (usable {usable:.1f} GB)")
GATHERED = N_(" + gathered unit {gathered:.1f} GB")
RULES_FIRED = N_("rules that fired:")
CHECKED_MEMORY = N_("plan {name}: {total:.1f} GB per GPU = states {states:.1f} GB + activations {activations:.1f} GB + "
                    "gathered unit {gathered:.1f} GB ({recompute} recomputation)")
BREAKS_NO_RULE = N_("plan {name} breaks no rule")
SERVING = N_("serving: TP = {tp}, PP = {pp}, {replicas}")
SERVING_MEMORY = N_("  memory per GPU: {total:.1f} GB = weights {weights:.1f} GB + KV cache {kv:.1f} GB "
                    "(usable {usable:.1f} GB)")


def nodes(n: int) -> str:
    """``2 node(s)``: the count of nodes (English keeps its "(s)"; Spanish says nodo/nodos)."""
    return ngettext("{n} node(s)", "{n} node(s)", n).format(n=n)


def replicas(n: int) -> str:
    """``4 replica(s)``: the count of model replicas when serving."""
    return ngettext("{n} replica(s)", "{n} replica(s)", n).format(n=n)


def rejected_first(n: int) -> str:
    """The heading of the candidates rejected before the plan."""
    return ngettext("rejected first ({n} candidates, in the order tried):",
                    "rejected first ({n} candidates, in the order tried):", n).format(n=n)


def breaks(name: str, n: int) -> str:
    """The heading of the rules a checked plan breaks."""
    return ngettext("plan {name} breaks {n} rule(s):", "plan {name} breaks {n} rule(s):", n).format(name=name, n=n)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pytest_distcheck.calc.precision import PRESETS
    from pytest_distcheck.strategy.presets import ARCHITECTURES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--rules", action="store_true", help="print the decision table and each rule's source")
    parser.add_argument("--model", choices=sorted(ARCHITECTURES), metavar="NAME",
                        help=f"a published architecture: {', '.join(ARCHITECTURES)}")
    parser.add_argument("--params", type=count, help="parameters (7.5e9, 7.5B, 350M); or --model")
    parser.add_argument("--layers", type=positive_int, help="transformer layers (with --hidden, --heads, --seq-len; "
                                                            "else a Megatron-LM shape of the nearest size)")
    parser.add_argument("--hidden", type=positive_int, help="hidden size")
    parser.add_argument("--heads", type=positive_int, help="attention heads")
    parser.add_argument("--kv-heads", type=positive_int, help="key/value heads (grouped-query attention; inference)")
    parser.add_argument("--seq-len", type=positive_int, help="sequence length")
    parser.add_argument("--micro-batch", type=positive_int, default=1, help="micro-batch size (default 1)")
    parser.add_argument("--recipe", choices=sorted(PRESETS), default="zero",
                        help="precision recipe (default zero: 16 bytes/parameter)")
    parser.add_argument("--gpu-memory-gb", type=real(0, 1e5, low_open=True), help="memory of one GPU, GB (1e9 bytes)")
    parser.add_argument("--gpus-per-node", type=positive_int)
    parser.add_argument("--nodes", type=positive_int, default=1, help="default 1")
    parser.add_argument("--intra", choices=("nvlink", "pcie"), default="nvlink",
                        help="interconnect within a node (default nvlink)")
    parser.add_argument("--inter", choices=("fast", "slow"), default="fast",
                        help="between nodes: fast = InfiniBand/RoCE class, slow = Ethernet class (default fast)")
    parser.add_argument("--usable-fraction", type=real(0, 1, low_open=True), default=0.9,
                        help="share of GPU memory a plan may use, in (0, 1] (default 0.9)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", metavar="tp=T,pp=P,dp=D[,cp=C,zero=Z,recompute=R]", type=_plan_spec,
                      help="name every rule this plan breaks instead of choosing one")
    mode.add_argument("--inference", action="store_true", help="place the model for serving (weights + KV cache)")
    parser.add_argument("--batch", type=positive_int, default=1, help="sequences served at once (--inference)")
    parser.add_argument("--context", type=positive_int, default=4096, help="tokens per sequence (--inference)")


def _plan_spec(text: str) -> dict[str, object]:
    """``tp=8,pp=4,dp=2`` (also cp=, zero= a ZeRO stage or FSDP strategy, recompute= none/selective/full)
    -> a dict; tp, pp, dp required."""
    spec: dict[str, object] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in CHECK_KEYS:
            raise argparse.ArgumentTypeError(_(NOT_KEY_VALUE).format(item=item, keys=", ".join(CHECK_KEYS)))
        if key == "recompute" and value.strip() not in ("none", "selective", "full"):
            raise argparse.ArgumentTypeError(_(RECOMPUTE_VALUES).format(item=item))
        spec[key] = value.strip() if key in ("zero", "recompute") else positive_int(value)
    missing = [k for k in ("tp", "pp", "dp") if k not in spec]
    if missing:
        raise argparse.ArgumentTypeError(_(SPEC_LACKS).format(text=text, missing=", ".join(missing)))
    return spec


def print_rules() -> None:
    """The decision table, one rule per entry with its source (``distcheck strategy --rules``)."""
    from pytest_distcheck.strategy import RULES

    print(_(RULES_HEADER))
    for rule, (text, source) in RULES.items():
        print(_(RULE_LINE).format(rule=rule, text=_(text), source=_(source)))


def _model(args: argparse.Namespace):
    from pytest_distcheck.strategy import Model, preset_model

    given = dict(params=args.params, layers=args.layers, hidden=args.hidden, heads=args.heads, seq_len=args.seq_len,
                 micro_batch=args.micro_batch, recipe=args.recipe, kv_heads=args.kv_heads)
    if args.model:
        return preset_model(args.model, **given)
    return Model(**given)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import DistcheckError
    from pytest_distcheck.strategy import ARCHITECTURES, Cluster

    if args.rules:
        print_rules()
        return 0
    needed = ((_(OR_FLAG).format(flag="--params", other="--model"), args.params or args.model),
              ("--gpu-memory-gb", args.gpu_memory_gb), ("--gpus-per-node", args.gpus_per_node))
    missing = [flag for flag, value in needed if value is None]
    if missing:  # main() prefixes "distcheck strategy: "
        raise DistcheckError(_(GIVE).format(missing=", ".join(missing)))
    model = _model(args)
    cluster = Cluster(args.gpu_memory_gb, args.gpus_per_node, args.nodes, args.intra, args.inter)
    inter = _(INTER_NODE).format(inter=_(LINK_SPEED[cluster.inter_node])) if cluster.nodes > 1 else ""
    print(_(CLUSTER).format(gpus=cluster.gpus, nodes=nodes(cluster.nodes), per_node=cluster.gpus_per_node,
                            memory=cluster.gpu_memory_gb, intra=cluster.intra_node, inter=inter, params=model.params))
    if args.model:
        arch = ARCHITECTURES[args.model]
        print(_(ARCHITECTURE).format(name=args.model, layers=model.layers, hidden=model.hidden, heads=model.heads,
                                     kv_heads=model.kv_heads, seq_len=model.seq_len, source=arch.cited))
    try:
        if args.check:
            return _check(model, cluster, args)
        if args.inference:
            return _inference(model, cluster, args)
        return _choose(model, cluster, args)
    except ValueError as exc:
        raise DistcheckError(str(exc)) from None


def _rules(rules) -> None:
    for rule in rules:
        print(_(RULE_LINE).format(rule=rule.id, text=rule.text, source=_(rule.source)))


def _rejected(rejected) -> None:
    if rejected:
        shown = list(rejected)
        if len(shown) > 6:  # the simplest strategies and the nearest misses say the most
            shown = [*shown[:3], _(MORE).format(n=len(shown) - 6), *shown[-3:]]
        print("\n" + rejected_first(len(rejected)))
        for line in shown:
            print(f"  - {line}")


def _choose(model, cluster, args: argparse.Namespace) -> int:
    from pytest_distcheck.strategy import choose

    plan = choose(model, cluster, args.usable_fraction)
    print("\n" + _(RECOMMENDED).format(plan=plan.name) + ("" if plan.fits else "   " + _(DOES_NOT_FIT)))
    zero = f", ZeRO-{plan.zero[-1]}" if plan.zero != "ddp" else ""
    print(f"  TP = {plan.tp}, PP = {plan.pp}, DP = {plan.dp}{zero}"
          + (f", FSDP {plan.fsdp}" if plan.fsdp else "")
          + (", " + _(SEQUENCE_PARALLEL) if plan.sequence_parallel else "")
          + (", " + _(RECOMPUTATION).format(recompute=plan.recompute) if plan.recompute != "none" else "")
          + (", " + _(MICROBATCHES).format(m=plan.microbatches) if plan.microbatches else ""))
    gathered = _(GATHERED).format(gathered=plan.gathered_bytes / 1e9) if plan.gathered_bytes else ""
    print(_(MEMORY_PER_GPU).format(total=plan.total_bytes / 1e9, states=plan.model_state_bytes / 1e9,
                                   activations=plan.activation_bytes / 1e9, gathered=gathered,
                                   usable=plan.usable_bytes / 1e9))
    print("\n" + _(RULES_FIRED))
    _rules(plan.rules)
    _rejected(plan.rejected)
    return 0 if plan.fits else 1


def _check(model, cluster, args: argparse.Namespace) -> int:
    from pytest_distcheck.strategy import check

    spec = dict(args.check)
    recompute = str(spec.get("recompute", "selective"))
    broken, mem = check(model, cluster, spec["tp"], spec["pp"], spec["dp"], str(spec.get("zero", "zero1")),
                        int(spec.get("cp", 1)), recompute, args.usable_fraction)
    name = ", ".join(f"{k}={v}" for k, v in spec.items())
    if mem is not None:
        print(_(CHECKED_MEMORY).format(name=name, total=mem.total_bytes / 1e9, states=mem.states.total_bytes / 1e9,
                                       activations=mem.activation_bytes / 1e9, gathered=mem.gathered_bytes / 1e9,
                                       recompute=recompute))
    if not broken:
        print(_(BREAKS_NO_RULE).format(name=name))
        return 0
    print(breaks(name, len(broken)))
    _rules(broken)
    return 1


def _inference(model, cluster, args: argparse.Namespace) -> int:
    from pytest_distcheck.strategy import choose_inference

    plan = choose_inference(model, cluster, args.batch, args.context, usable_fraction=args.usable_fraction)
    print("\n" + _(SERVING).format(tp=plan.tp, pp=plan.pp, replicas=replicas(plan.replicas))
          + ("" if plan.fits else "   " + _(DOES_NOT_FIT)))
    print(_(SERVING_MEMORY).format(total=plan.total_bytes / 1e9, weights=plan.weight_bytes / 1e9,
                                   kv=plan.kv_bytes / 1e9, usable=plan.usable_bytes / 1e9))
    print("\n" + _(RULES_FIRED))
    _rules(plan.rules)
    _rejected(plan.rejected)
    return 0 if plan.fits else 1
