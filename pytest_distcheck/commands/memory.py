"""Memory per GPU: model states under DDP, ZeRO-1/2/3, FSDP and Megatron's distributed optimizer; activations.

  distcheck memory --params 7.5B --dp 64                       ZeRO Fig. 1: 120 / 31.4 / 16.6 / 1.9 GB
  distcheck memory --params 70B --dp 32 --gpus-per-node 8      adds HYBRID_SHARD
  distcheck memory --params 175B --dp 8 --tp 8 --pp 16 --layers 96 --hidden 12288 --heads 96 --seq-len 2048 \\
      --recipe megatron-bf16 --zero megatron-distopt --recompute selective
                                                               the per-GPU total of that plan
TP and PP divide every row (each GPU holds Psi/(TP x PP) parameters). GB = 1e9 bytes. Precision recipes:
calc/precision.py (default: the ZeRO paper's fp16 + fp32 Adam, 16 bytes/parameter). Buffers, fragmentation
and the CUDA context are extra: that is what --margin-gb is for.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import count, positive_int, real

ZERO_CHOICES = ("ddp", "zero1", "zero2", "zero3", "megatron-distopt", "HYBRID_SHARD")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pytest_distcheck.calc.precision import PRESETS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--params", type=count, required=True, help="parameters Psi (7.5e9, 7.5B, 350M)")
    parser.add_argument("--dp", type=positive_int, required=True, help="data-parallel degree N_d")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree t (default 1)")
    parser.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree p (default 1)")
    parser.add_argument("--cp", type=positive_int, default=1, help="context-parallel degree (default 1)")
    parser.add_argument("--gpus-per-node", type=positive_int, help="shard group of HYBRID_SHARD")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--recipe", choices=sorted(PRESETS), default="zero",
                           help="precision recipe (default zero: fp16 weights/grads, fp32 master + Adam)")
    precision.add_argument("--k", type=real(0, 64), help="ZeRO's K, optimizer bytes per parameter incl. the fp32 "
                                                         "master (0-64; fp16 weights and grads)")
    parser.add_argument("--zero", choices=ZERO_CHOICES, default="zero1",
                        help="the plan's sharding for the per-GPU total (default zero1)")
    parser.add_argument("--margin-gb", type=real(0, 1e4), default=0.0,
                        help="GB to add for buffers, fragmentation, CUDA context (default 0)")
    arch = parser.add_argument_group("activations (Korthikanti et al. 2022), all four needed")
    arch.add_argument("--layers", type=positive_int, help="transformer layers L")
    arch.add_argument("--hidden", type=positive_int, help="hidden size h")
    arch.add_argument("--heads", type=positive_int, help="attention heads a")
    arch.add_argument("--seq-len", type=positive_int, help="sequence length s")
    arch.add_argument("--micro-batch", type=positive_int, default=1, help="micro-batch size b (default 1)")
    arch.add_argument("--recompute", choices=("none", "selective", "full"), default="none",
                      help="activation recomputation of the plan (default none)")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.calc import memory, precision
    from pytest_distcheck.errors import DistcheckError

    arch = (args.layers, args.hidden, args.heads, args.seq_len)
    if any(a is not None for a in arch) and None in arch:
        raise DistcheckError("activations need all of --layers, --hidden, --heads and --seq-len")
    try:
        return _run(args, memory, precision)
    except ValueError as exc:
        raise DistcheckError(str(exc)) from None


def _run(args: argparse.Namespace, memory, precision) -> int:
    psi, n, t, p, cp = args.params, args.dp, args.tp, args.pp, args.cp
    local = psi / (t * p)
    recipe = precision.recipe(args.recipe)
    k = recipe.k if args.k is None else args.k
    split = f", TP = {t}, PP = {p} (Psi below = Psi/(TP x PP) = {local:.4g} per GPU)" if t * p > 1 else ""
    group = n * cp
    what = f"K = {k:g}" if args.k is not None else f"recipe {recipe.name}, {recipe.total_bytes_per_param:g} B/param"
    print(f"model states per GPU, Psi = {psi:.4g} parameters, N_d = {group}{split}, {what} (Rajbhandari et al. 2019)")
    rows = [
        ("DDP / FSDP NO_SHARD", "(2+2+K) Psi", "ddp", "sec. 3.1"),
        ("ZeRO-1", "4 Psi + K Psi/N_d", "zero1", "sec. 5.1"),
        ("ZeRO-2 / FSDP SHARD_GRAD_OP", "2 Psi + (2+K) Psi/N_d", "zero2", "sec. 5.2"),
        ("ZeRO-3 / FSDP FULL_SHARD", "(2+2+K) Psi/N_d", "zero3", "sec. 5.3"),
    ]

    def states(scheme: str, shard_group: int | None = None):
        if args.k is not None:
            return memory.zero_model_states(local, precision.scheme(scheme), shard_group or group, k)
        return memory.model_states(psi, recipe, scheme, n, t, p, cp, shard_group)

    symbolic = args.k is not None or recipe.name == "zero"
    for name, formula, stage, sec in rows:
        s = states(stage)
        formula = formula if symbolic else _formula(recipe, stage, precision)
        print(f"  {name:<30} {formula:<24} {s.total_gb:>10.4g} GB   (params {s.params_bytes / 1e9:.4g}, grads "
              f"{(s.grads_bytes + s.main_grads_bytes) / 1e9:.4g}, optimizer "
              f"{(s.optimizer_bytes + s.master_bytes) / 1e9:.4g})  {sec}")
    if args.gpus_per_node:
        g = _node_group(args, group)
        h = states("HYBRID_SHARD", g)
        print(f"  {'FSDP HYBRID_SHARD':<30} {'(2+2+K) Psi/G, G=' + str(g):<24} {h.total_gb:>10.4g} GB"
              "   FULL_SHARD within a node (torch fsdp/api.py)")
    if args.k is None and recipe.master:
        d = states("megatron-distopt")
        formula = _formula(recipe, "megatron-distopt", precision)
        print(f"  {'Megatron distributed optimizer':<30} {formula:<24} {d.total_gb:>10.4g} GB"
              "   Megatron-LM README, 'Distributed Optimizer'")
    if None not in (args.layers, args.hidden, args.heads, args.seq_len):
        _activations(args)
    _plan(args, memory, precision, states, k)
    return 0


def _node_group(args: argparse.Namespace, group: int) -> int:
    """G, the data-parallel ranks inside one node: GPUs per node / (TP x CP) (TP and CP stay in the node)."""
    inner = args.tp * args.cp
    if args.gpus_per_node % inner:
        raise ValueError(f"HYBRID_SHARD: --gpus-per-node {args.gpus_per_node} is not a multiple of TP x CP = {inner}")
    g = args.gpus_per_node // inner
    if group % g:
        raise ValueError(f"HYBRID_SHARD needs N_d = {group} to be a multiple of the {g} data-parallel ranks of a node")
    return g


def _formula(recipe, scheme: str, precision) -> str:
    """``6 Psi + 12 Psi/N_d``: the recipe's whole and sharded bytes per parameter under ``scheme``."""
    per = recipe.bytes_per_param()
    sharded = dict(zip(precision.PARTS, precision.SHARDS[scheme], strict=True))
    whole = sum(v for part, v in per.items() if not sharded[part])
    split = sum(v for part, v in per.items() if sharded[part])
    terms = ([f"{whole:g} Psi"] if whole else []) + ([f"{split:g} Psi/N_d"] if split else [])
    return " + ".join(terms) or "0"


def _activations(args: argparse.Namespace) -> None:
    from pytest_distcheck.calc import memory

    s, b, h, a, t, L = args.seq_len, args.micro_batch, args.hidden, args.heads, args.tp, args.layers
    print(f"\nactivations, s = {s}, b = {b}, h = {h}, a = {a}, t = {t}, L = {L}, 16-bit (Korthikanti et al. 2022)")
    configs = [
        ("no recomputation" + (", TP" if t > 1 else ""), False, "none",
         "sbh(10 + 24/t + 5as/(ht))" if t > 1 else "sbh(34 + 5as/h)", "Eq. (2)" if t > 1 else "Eq. (1)"),
        ("TP + sequence parallel", True, "none", "(sbh/t)(34 + 5as/h)", "Eq. (4)"),
        ("TP + selective recompute", False, "selective", "sbh(10 + 24/t)", "Table 2"),
        ("TP + SP + selective", True, "selective", "34 sbh/t", "Table 2"),
        ("full recomputation", False, "full", "2 sbh", "Table 2"),
    ]
    for name, sp, rc, formula, where in configs:
        per_layer = memory.activation_bytes_per_layer(s, b, h, a, t, sp, rc)
        print(f"  {name:<30} {formula:<26} {per_layer / 1e9:>9.4g} GB/layer  {per_layer * L / 1e9:>9.4g} GB "
              f"for L layers  {where}")
    print("  (under 1F1B the first pipeline stage holds L layers' worth whatever p: Eq. (5)/(6))")


def _plan(args: argparse.Namespace, memory, precision, states, k: float) -> None:
    hybrid = args.zero == "HYBRID_SHARD"
    if hybrid and not args.gpus_per_node:
        raise ValueError("--zero HYBRID_SHARD needs --gpus-per-node")
    if args.k is not None and precision.scheme(args.zero) == "megatron-distopt":
        raise ValueError("--k describes the ZeRO paper's recipe; use --recipe with --zero megatron-distopt")
    pm = memory.plan_memory(
        args.params, recipe=args.recipe, sharding=args.zero, dp=args.dp, tp=args.tp, pp=args.pp, cp=args.cp,
        shard_group=_node_group(args, args.dp * args.cp) if hybrid else None, layers=args.layers, hidden=args.hidden,
        heads=args.heads, seq_len=args.seq_len, micro_batch=args.micro_batch, recompute=args.recompute)
    st = states(args.zero, _node_group(args, args.dp * args.cp) if hybrid else None).total_bytes
    total = st + pm.activation_bytes + pm.gathered_bytes + args.margin_gb * 1e9
    print(f"\nplan TP={args.tp} x PP={args.pp} x CP={args.cp} x DP={args.dp}, {args.zero}, recompute {args.recompute}: "
          f"{total / 1e9:.4g} GB per GPU = states {st / 1e9:.4g} + activations {pm.activation_bytes / 1e9:.4g} + "
          f"gathered unit {pm.gathered_bytes / 1e9:.4g} + margin {args.margin_gb:g}")
    notes = list(pm.assumptions)
    if args.k is not None:
        notes[0] = f"precision: fp16 weights and gradients, K = {k:g} (ZeRO sec. 3.1)"
    notes.append("not counted: embedding/loss activations, communication buffers, fragmentation, CUDA context "
                 "(ZeRO sec. 3.2)")
    print("assumed:")
    for note in notes:
        print(f"  - {note}")
