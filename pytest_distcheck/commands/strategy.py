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
from pytest_distcheck.i18n import N_, _

CHECK_KEYS = ("tp", "pp", "dp", "cp", "zero", "recompute")
GIVE = N_("give {missing} (or --rules for the decision table)")


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
            raise argparse.ArgumentTypeError(f"{item!r}: expected KEY=VALUE with KEY one of {', '.join(CHECK_KEYS)}")
        if key == "recompute" and value.strip() not in ("none", "selective", "full"):
            raise argparse.ArgumentTypeError(f"{item!r}: recompute is none, selective or full")
        spec[key] = value.strip() if key in ("zero", "recompute") else positive_int(value)
    missing = [k for k in ("tp", "pp", "dp") if k not in spec]
    if missing:
        raise argparse.ArgumentTypeError(f"{text!r} lacks {', '.join(missing)} (e.g. tp=8,pp=4,dp=2)")
    return spec


def print_rules() -> None:
    """The decision table, one rule per entry with its source (``distcheck strategy --rules``)."""
    from pytest_distcheck.strategy import RULES

    print("decision table of distcheck strategy, in its order of preference:")
    for rule, (text, source) in RULES.items():
        print(f"  [{rule}] {_(text)}\n        source: {source}")


def _model(args: argparse.Namespace):
    from pytest_distcheck.strategy import Model, preset_model

    given = dict(params=args.params, layers=args.layers, hidden=args.hidden, heads=args.heads, seq_len=args.seq_len,
                 micro_batch=args.micro_batch, recipe=args.recipe, kv_heads=args.kv_heads)
    if args.model:
        return preset_model(args.model, **given)
    return Model(**given)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import ConfigError, DistcheckError
    from pytest_distcheck.strategy import ARCHITECTURES, Cluster

    if args.rules:
        print_rules()
        return 0
    needed = (("--params (or --model)", args.params or args.model), ("--gpu-memory-gb", args.gpu_memory_gb),
              ("--gpus-per-node", args.gpus_per_node))
    missing = [flag for flag, value in needed if value is None]
    if missing:
        raise ConfigError("distcheck strategy", "", _(GIVE).format(missing=", ".join(missing)))
    model = _model(args)
    cluster = Cluster(args.gpu_memory_gb, args.gpus_per_node, args.nodes, args.intra, args.inter)
    print(f"{cluster.gpus} GPUs ({cluster.nodes} node(s) x {cluster.gpus_per_node}, {cluster.gpu_memory_gb:g} GB, "
          f"{cluster.intra_node}" + (f", {cluster.inter_node} inter-node" if cluster.nodes > 1 else "") +
          f"); model {model.params:.4g} parameters")
    if args.model:
        arch = ARCHITECTURES[args.model]
        print(f"architecture {args.model}: L = {model.layers} layers, h = {model.hidden}, a = {model.heads} heads "
              f"({model.kv_heads} KV heads), s = {model.seq_len} tokens; source: {arch.source}")
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
        print(f"  [{rule.id}] {rule.text}\n        source: {rule.source}")


def _rejected(rejected) -> None:
    if rejected:
        shown = list(rejected)
        if len(shown) > 6:  # the simplest strategies and the nearest misses say the most
            shown = [*shown[:3], f"... {len(shown) - 6} more ...", *shown[-3:]]
        print(f"\nrejected first ({len(rejected)} candidates, in the order tried):")
        for line in shown:
            print(f"  - {line}")


def _choose(model, cluster, args: argparse.Namespace) -> int:
    from pytest_distcheck.strategy import choose

    plan = choose(model, cluster, args.usable_fraction)
    print(f"\nrecommended: {plan.name}" + ("" if plan.fits else "   (DOES NOT FIT)"))
    zero = f", ZeRO-{plan.zero[-1]}" if plan.zero != "ddp" else ""
    print(f"  TP = {plan.tp}, PP = {plan.pp}, DP = {plan.dp}{zero}"
          + (f", FSDP {plan.fsdp}" if plan.fsdp else "") + (", sequence parallel" if plan.sequence_parallel else "")
          + (f", {plan.recompute} recomputation" if plan.recompute != "none" else "")
          + (f", m >= {plan.microbatches} micro-batches" if plan.microbatches else ""))
    print(f"  memory per GPU: {plan.total_bytes / 1e9:.1f} GB = model states {plan.model_state_bytes / 1e9:.1f} GB"
          f" + activations {plan.activation_bytes / 1e9:.1f} GB"
          + (f" + gathered unit {plan.gathered_bytes / 1e9:.1f} GB" if plan.gathered_bytes else "")
          + f" (usable {plan.usable_bytes / 1e9:.1f} GB)")
    print("\nrules that fired:")
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
        print(f"plan {name}: {mem.total_bytes / 1e9:.1f} GB per GPU = states {mem.states.total_bytes / 1e9:.1f} GB + "
              f"activations {mem.activation_bytes / 1e9:.1f} GB + gathered unit {mem.gathered_bytes / 1e9:.1f} GB "
              f"({recompute} recomputation)")
    if not broken:
        print(f"plan {name} breaks no rule")
        return 0
    print(f"plan {name} breaks {len(broken)} rule(s):")
    _rules(broken)
    return 1


def _inference(model, cluster, args: argparse.Namespace) -> int:
    from pytest_distcheck.strategy import choose_inference

    plan = choose_inference(model, cluster, args.batch, args.context, usable_fraction=args.usable_fraction)
    print(f"\nserving: TP = {plan.tp}, PP = {plan.pp}, {plan.replicas} replica(s)" + ("" if plan.fits else
                                                                                       "   (DOES NOT FIT)"))
    print(f"  memory per GPU: {plan.total_bytes / 1e9:.1f} GB = weights {plan.weight_bytes / 1e9:.1f} GB + KV cache "
          f"{plan.kv_bytes / 1e9:.1f} GB (usable {plan.usable_bytes / 1e9:.1f} GB)")
    print("\nrules that fired:")
    _rules(plan.rules)
    _rejected(plan.rejected)
    return 0 if plan.fits else 1
