"""Memory per GPU: model states under DDP, ZeRO-1/2/3, FSDP and Megatron's distributed optimizer; activations.

  distcheck memory --params 7.5B --dp 64                       ZeRO Fig. 1: 120 / 31.4 / 16.6 / 1.9 GB
  distcheck memory --params 2851M --dp 8 --largest-layer 32M --variant deepspeed-docs --unit GiB   DeepSpeed's tables
  distcheck memory --params 7B --dp 16 --gpus-per-node 8 --zero zero3 --offload-optimizer cpu --offload-param nvme
  distcheck memory --params 175B --dp 8 --tp 8 --pp 16 --layers 96 --hidden 12288 --heads 96 --seq-len 2048 \\
      --recipe megatron-bf16 --zero megatron-distopt --recompute selective
Every figure carries its unit (--unit: GB = 1e9 bytes, or GiB = 2^30) and follows a named variant (--variant;
calc/estimators.py). TP and PP divide every row. Model states are a lower bound: buffers, fragmentation and the
CUDA context are extra (--margin-gb). More: docs/kit/tools.md.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import count, positive_int, real
from pytest_distcheck.i18n import N_, _, ngettext

ZERO_CHOICES = ("ddp", "zero1", "zero2", "zero3", "megatron-distopt", "HYBRID_SHARD")
UNITS = {"GB": 1e9, "GiB": 2**30}
STATES_HEADER = N_("model states per GPU, Psi = {psi:.4g} parameters, N_d = {nd}{split}, {what}; variant {variant} "
                    "(Rajbhandari et al. 2019); {unit_note}")
SPLIT = N_(", TP = {tp}, PP = {pp} (Psi below = Psi/(TP x PP) = {local:.4g} per GPU)")
RECIPE_BYTES = N_("recipe {name}, {bytes:g} B/param")
# {name} comes padded to the width of the longest row name (30 in English): the columns stay aligned.
STATES_ROW = N_("  {name:<30} {formula:<24} {total}   (params {params}, grads {grads}, optimizer {optimizer})  "
                "{section}")
HYBRID_ROW = N_("FULL_SHARD within a node (torch fsdp/api.py)")
DISTOPT_NAME = N_("Megatron distributed optimizer")
DISTOPT_SOURCE = N_("Megatron-LM README, 'Distributed Optimizer'")
OFFLOAD_LINE = N_("  offload {options}: per GPU {gpu} ({gpu_formula}); per node CPU {cpu} ({cpu_formula}){nvme}  "
                  "{source}")
PLAN_TOTAL = N_("plan TP={tp} x PP={pp} x CP={cp} x DP={dp}, {zero}, recompute {recompute}: {total} per GPU = "
                "states {states} + activations {activations} + gathered unit {gathered} + margin {margin} "
                "(variant zero-paper)")
# After PLAN_TOTAL when --variant is not zero-paper: the plan's total is still the paper's count, and why.
PLAN_VARIANT = N_("  (the plan counts --zero and --recipe as the ZeRO paper does, whatever --variant, and adds "
                  "activations and the gathered unit to that; the {variant} table above is that framework's own "
                  "estimate, to compare with)")
UNIT_NOTE = {"GB": N_("GB = 1e9 bytes"), "GiB": N_("GiB = 2^30 bytes, what DeepSpeed prints as \"GB\"")}
FRAMEWORK_HEADER = N_("model states, variant {variant} ({source}); {unit_note}")
DISTOPT_GROUP = N_("  per GPU, d = N_d = {group}, Psi = {local:.4g} per GPU")
LARGEST_LAYER = N_(", L = {largest:.4g} (largest layer)")
DEEPSPEED_CLUSTER = N_("  Psi = {psi:.4g}{largest}, {nodes} x {n} GPUs; N = {dp}")
DEEPSPEED_ROW = N_("per GPU {gpu} ({gpu_formula}); per node {host} ({host_formula})")
ZERO3_NEEDS_LAYER = N_("  (ZeRO-3 rows need --largest-layer: DeepSpeed's 4L, the largest layer gathered)")
ACTIVATIONS_HEADER = N_("activations, s = {s}, b = {b}, h = {h}, a = {a}, t = {t}, L = {L}, 16-bit "
                        "(Korthikanti et al. 2022)")
NO_RECOMPUTATION = N_("no recomputation")
TP_SEQUENCE_PARALLEL = N_("TP + sequence parallel")
TP_SELECTIVE = N_("TP + selective recompute")
TP_SP_SELECTIVE = N_("TP + SP + selective")
FULL_RECOMPUTATION = N_("full recomputation")
TABLE_2 = N_("Table 2")
ACTIVATIONS_ROW = N_("{per_layer}/layer  {total} for L layers")
FIRST_STAGE = N_("  (under 1F1B the first pipeline stage holds L layers' worth whatever p: Eq. (5)/(6))")
ASSUMED = N_("assumed:")
TP_HEADS = N_("--tp {tp} does not divide --heads {heads}: TP gives each rank whole attention heads (megatron-core "
              "TransformerConfig: num_attention_heads % tensor_model_parallel_size == 0); use a TP that divides "
              "{heads}")
HIDDEN_HEADS = N_("--hidden {hidden} is not a multiple of --heads {heads}: each head would get {dim:.4g} channels; "
                  "give the model's own head count")
DEEPSPEED_SPLIT = N_("DeepSpeed's estimators count data parallelism only: drop --tp/--pp/--cp (got TP = {tp}, "
                     "PP = {pp}, CP = {cp})")
DEEPSPEED_RECIPE = N_("DeepSpeed's estimators assume 16-bit weights with fp32 Adam: drop --k and --recipe {recipe}")
OFFLOAD_VARIANT = N_("--offload-optimizer/--offload-param place the ZeRO paper's states (--variant zero-paper); "
                     "the DeepSpeed variants list every offload option already")
OFFLOAD_RECIPE = N_("the offload placement counts the ZeRO paper's 2 + 2 + K bytes: use --recipe zero (or --k)")
NODES = N_("--dp {dp} is not a multiple of --gpus-per-node {n}")
ACTIVATIONS_NEED = N_("activations need all of --layers, --hidden, --heads and --seq-len")
HYBRID_NODE = N_("HYBRID_SHARD: --gpus-per-node {n} is not a multiple of TP x CP = {inner}")
HYBRID_GROUP = N_("HYBRID_SHARD needs N_d = {group} to be a multiple of the {g} data-parallel ranks of a node")
HYBRID_NEEDS_NODE = N_("--zero HYBRID_SHARD needs --gpus-per-node")
K_WITH_DISTOPT = N_("--k describes the ZeRO paper's recipe; use --recipe with --zero megatron-distopt")
K_NOTE = N_("precision: fp16 weights and gradients, K = {k:g} (ZeRO sec. 3.1)")
OFFLOAD_NOTE = N_("states on the GPU after offload_optimizer={optimizer}, offload_param={param} (ZeRO-Offload / "
                  "ZeRO-Infinity)")
NOT_COUNTED = N_("not counted: embedding/loss activations, communication buffers, fragmentation, CUDA context "
                 "(ZeRO sec. 3.2)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pytest_distcheck.calc.estimators import DEVICES, VARIANTS, ZERO_PAPER
    from pytest_distcheck.calc.precision import PRESETS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--params", type=count, required=True, help="parameters Psi (7.5e9, 7.5B, 350M)")
    parser.add_argument("--dp", type=positive_int, required=True, help="data-parallel degree N_d")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree t (default 1)")
    parser.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree p (default 1)")
    parser.add_argument("--cp", type=positive_int, default=1, help="context-parallel degree (default 1)")
    parser.add_argument("--gpus-per-node", type=positive_int, help="GPUs per node n: HYBRID_SHARD's shard group, "
                                                                   "the per-node figures of offloading")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--recipe", choices=sorted(PRESETS), default="zero",
                           help="precision recipe (default zero: fp16 weights/grads, fp32 master + Adam)")
    precision.add_argument("--k", type=real(0, 64), help="ZeRO's K, optimizer bytes per parameter incl. the fp32 "
                                                         "master (0-64; fp16 weights and grads)")
    parser.add_argument("--zero", choices=ZERO_CHOICES, default="zero1",
                        help="the plan's sharding for the per-GPU total (default zero1)")
    parser.add_argument("--variant", choices=VARIANTS, default=ZERO_PAPER,
                        help="whose formula the model-state rows follow (default zero-paper; calc/estimators.py)")
    parser.add_argument("--unit", choices=sorted(UNITS), default="GB", help="GB = 1e9 bytes (default) or GiB = 2^30")
    parser.add_argument("--largest-layer", type=count, metavar="COUNT",
                        help="parameters L of the largest layer: ZeRO-3's gathered 4L bytes (DeepSpeed's estimator)")
    parser.add_argument("--offload-optimizer", choices=DEVICES, default="none",
                        help="ZeRO-Offload: optimizer states and gradients to cpu or nvme (zero2/zero3)")
    parser.add_argument("--offload-param", choices=DEVICES, default="none",
                        help="ZeRO-Infinity: parameters to cpu or nvme too (zero3)")
    parser.add_argument("--margin-gb", type=real(0, 1e4), default=0.0,
                        help="GB (1e9 bytes) to add for buffers, fragmentation, CUDA context (default 0)")
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
        raise DistcheckError(_(ACTIVATIONS_NEED))
    if args.heads is not None and args.heads % args.tp:
        raise DistcheckError(_(TP_HEADS).format(tp=args.tp, heads=args.heads))
    if args.heads is not None and args.hidden % args.heads:
        raise DistcheckError(_(HIDDEN_HEADS).format(hidden=args.hidden, heads=args.heads, dim=args.hidden / args.heads))
    try:
        return _run(args, memory, precision)
    except ValueError as exc:
        raise DistcheckError(str(exc)) from None


def _fmt(args: argparse.Namespace, nbytes: float, width: int = 0) -> str:
    """``nbytes`` in the chosen unit, with the unit: ``31.41 GB``."""
    return f"{nbytes / UNITS[args.unit]:>{width}.4g} {args.unit}"


def _run(args: argparse.Namespace, memory, precision) -> int:
    from pytest_distcheck.calc import estimators

    psi, n, t, p, cp = args.params, args.dp, args.tp, args.pp, args.cp
    local = psi / (t * p)
    recipe = precision.recipe(args.recipe)
    k = recipe.k if args.k is None else args.k
    group = n * cp

    def states(scheme: str, shard_group: int | None = None):
        if args.k is not None:
            return memory.zero_model_states(local, precision.scheme(scheme), shard_group or group, k)
        return memory.model_states(psi, recipe, scheme, n, t, p, cp, shard_group)

    if args.variant == estimators.ZERO_PAPER:
        _paper_rows(args, memory, precision, recipe, k, states)
    else:
        if args.offload_optimizer != "none" or args.offload_param != "none":
            raise ValueError(_(OFFLOAD_VARIANT))
        _framework_rows(args, estimators, recipe, local, group)
    print(_(estimators.LOWER_BOUND))
    if None not in (args.layers, args.hidden, args.heads, args.seq_len):
        _activations(args)
    _plan(args, memory, precision, states, k)
    return 0


def _paper_rows(args: argparse.Namespace, memory, precision, recipe, k: float, states) -> None:
    from pytest_distcheck.calc.estimators import SOURCES, ZERO_PAPER

    psi, t, p = args.params, args.tp, args.pp
    split = _(SPLIT).format(tp=t, pp=p, local=psi / (t * p)) if t * p > 1 else ""
    what = (f"K = {k:g}" if args.k is not None
            else _(RECIPE_BYTES).format(name=recipe.name, bytes=recipe.total_bytes_per_param))
    print(_(STATES_HEADER).format(psi=psi, nd=args.dp * args.cp, split=split, what=what, variant=ZERO_PAPER,
                                  unit_note=_(UNIT_NOTE[args.unit])))
    rows = [
        ("DDP / FSDP NO_SHARD", "(2+2+K) Psi", "ddp", "sec. 3.1"),
        ("ZeRO-1", "4 Psi + K Psi/N_d", "zero1", "sec. 5.1"),
        ("ZeRO-2 / FSDP SHARD_GRAD_OP", "2 Psi + (2+K) Psi/N_d", "zero2", "sec. 5.2"),
        ("ZeRO-3 / FSDP FULL_SHARD", "(2+2+K) Psi/N_d", "zero3", "sec. 5.3"),
    ]
    symbolic = args.k is not None or recipe.name == "zero"
    distopt = args.k is None and recipe.master
    width = max(30, len(_(DISTOPT_NAME)) if distopt else 0)
    for name, formula, stage, sec in rows:
        s = states(stage)
        formula = formula if symbolic else _formula(recipe, stage, precision)
        print(_(STATES_ROW).format(
            name=name.ljust(width), formula=formula, total=_fmt(args, s.total_bytes, 10),
            params=_fmt(args, s.params_bytes), grads=_fmt(args, s.grads_bytes + s.main_grads_bytes),
            optimizer=_fmt(args, s.optimizer_bytes + s.master_bytes), section=sec))
    if args.gpus_per_node:
        g = _node_group(args, args.dp * args.cp)
        h = states("HYBRID_SHARD", g)
        print(f"  {'FSDP HYBRID_SHARD':<{width}} {'(2+2+K) Psi/G, G=' + str(g):<24} {_fmt(args, h.total_bytes, 10)}"
              f"   {_(HYBRID_ROW)}")
    if distopt:
        d = states("megatron-distopt")
        formula = _formula(recipe, "megatron-distopt", precision)
        print(f"  {_(DISTOPT_NAME):<{width}} {formula:<24} {_fmt(args, d.total_bytes, 10)}   {_(DISTOPT_SOURCE)}")
    if args.offload_optimizer != "none" or args.offload_param != "none":
        pl = _placement(args, k, recipe)
        nvme = f", NVMe {_fmt(args, pl.nvme_bytes)}" if pl.nvme_bytes else ""
        print(_(OFFLOAD_LINE).format(options=pl.options, gpu=_fmt(args, pl.gpu_bytes), gpu_formula=pl.gpu_formula,
                                     cpu=_fmt(args, pl.host_bytes), cpu_formula=pl.host_formula, nvme=nvme,
                                     source=_(SOURCES[ZERO_PAPER])))


def _placement(args: argparse.Namespace, k: float, recipe):
    from pytest_distcheck.calc.estimators import offload_placement

    if args.k is None and recipe.name != "zero":
        raise ValueError(_(OFFLOAD_RECIPE))
    n = args.gpus_per_node or args.dp
    return offload_placement(args.params / (args.tp * args.pp), args.zero, args.dp * args.cp, n,
                             args.offload_optimizer, args.offload_param, args.largest_layer or 0.0, k)


def _framework_rows(args: argparse.Namespace, estimators, recipe, local: float, group: int) -> None:
    """The tables of a framework's own estimator: DeepSpeed's (per CPU | per GPU | options, like DeepSpeed) or
    the Megatron-LM README's bytes per parameter."""
    head = _(FRAMEWORK_HEADER).format(variant=args.variant, source=_(estimators.SOURCES[args.variant]),
                                      unit_note=_(UNIT_NOTE[args.unit]))
    if args.variant == estimators.MEGATRON_DISTOPT:
        print(head + "\n" + _(DISTOPT_GROUP).format(group=group, local=local))
        for r in estimators.megatron_distopt(local, group):
            print(f"  {r.options:<24} {r.gpu_formula:<16} {_fmt(args, r.gpu_bytes, 10)}")
        return
    if args.tp * args.pp * args.cp > 1:
        raise ValueError(_(DEEPSPEED_SPLIT).format(tp=args.tp, pp=args.pp, cp=args.cp))
    if args.k is not None or recipe.name not in ("zero", "deepspeed-fp16", "deepspeed-bf16"):
        raise ValueError(_(DEEPSPEED_RECIPE).format(recipe=recipe.name))
    n = args.gpus_per_node or args.dp
    if args.dp % n:
        raise ValueError(_(NODES).format(dp=args.dp, n=n))
    nodes = args.dp // n
    largest = _(LARGEST_LAYER).format(largest=args.largest_layer) if args.largest_layer else ""
    node_count = ngettext("{n} node(s)", "{n} node(s)", nodes).format(n=nodes)
    print(head + "\n" + _(DEEPSPEED_CLUSTER).format(psi=args.params, largest=largest, nodes=node_count, n=n,
                                                    dp=args.dp))
    rows = [("ZeRO-2", r) for r in estimators.deepspeed_zero2(args.params, n, nodes, args.variant)]
    if args.largest_layer:
        rows += [("ZeRO-3", r) for r in estimators.deepspeed_zero3(args.params, args.largest_layer, n, nodes,
                                                                    variant=args.variant)]
    u = UNITS[args.unit]
    for stage, r in rows:
        print(f"  {stage} {r.options:<61} " + _(DEEPSPEED_ROW).format(
            gpu=f"{r.gpu_bytes / u:7.2f} {args.unit}", gpu_formula=r.gpu_formula,
            host=f"{r.host_bytes / u:7.2f} {args.unit}", host_formula=r.host_formula))
    if not args.largest_layer:
        print(_(ZERO3_NEEDS_LAYER))


def _node_group(args: argparse.Namespace, group: int) -> int:
    """G, the data-parallel ranks inside one node: GPUs per node / (TP x CP) (TP and CP stay in the node)."""
    inner = args.tp * args.cp
    if args.gpus_per_node % inner:
        raise ValueError(_(HYBRID_NODE).format(n=args.gpus_per_node, inner=inner))
    g = args.gpus_per_node // inner
    if group % g:
        raise ValueError(_(HYBRID_GROUP).format(group=group, g=g))
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
    print("\n" + _(ACTIVATIONS_HEADER).format(s=s, b=b, h=h, a=a, t=t, L=L))
    table = _(TABLE_2)
    configs = [
        (_(NO_RECOMPUTATION) + (", TP" if t > 1 else ""), False, "none",
         "sbh(10 + 24/t + 5as/(ht))" if t > 1 else "sbh(34 + 5as/h)", "Eq. (2)" if t > 1 else "Eq. (1)"),
        (_(TP_SEQUENCE_PARALLEL), True, "none", "(sbh/t)(34 + 5as/h)", "Eq. (4)"),
        (_(TP_SELECTIVE), False, "selective", "sbh(10 + 24/t)", table),
        (_(TP_SP_SELECTIVE), True, "selective", "34 sbh/t", table),
        (_(FULL_RECOMPUTATION), False, "full", "2 sbh", table),
    ]
    width = max(30, *(len(name) for name, *_rest in configs))
    for name, sp, rc, formula, where in configs:
        per_layer = memory.activation_bytes_per_layer(s, b, h, a, t, sp, rc)
        row = _(ACTIVATIONS_ROW).format(per_layer=_fmt(args, per_layer, 9), total=_fmt(args, per_layer * L, 9))
        print(f"  {name:<{width}} {formula:<26} {row}  {where}")
    print(_(FIRST_STAGE))


def _plan(args: argparse.Namespace, memory, precision, states, k: float) -> None:
    hybrid = args.zero == "HYBRID_SHARD"
    if hybrid and not args.gpus_per_node:
        raise ValueError(_(HYBRID_NEEDS_NODE))
    if args.k is not None and precision.scheme(args.zero) == "megatron-distopt":
        raise ValueError(_(K_WITH_DISTOPT))
    group = _node_group(args, args.dp * args.cp) if hybrid else None
    pm = memory.plan_memory(
        args.params, recipe=args.recipe, sharding=args.zero, dp=args.dp, tp=args.tp, pp=args.pp, cp=args.cp,
        shard_group=group, layers=args.layers, hidden=args.hidden, heads=args.heads, seq_len=args.seq_len,
        micro_batch=args.micro_batch, recompute=args.recompute, largest_layer=args.largest_layer)
    offload = args.offload_optimizer != "none" or args.offload_param != "none"
    gathered = pm.gathered_bytes
    if offload:  # the placement's GPU share already holds the gathered largest layer
        st, gathered = _placement(args, k, precision.recipe(args.recipe)).gpu_bytes, 0.0
    else:
        st = states(args.zero, group).total_bytes
    total = st + pm.activation_bytes + gathered + args.margin_gb * 1e9
    print("\n" + _(PLAN_TOTAL).format(
        tp=args.tp, pp=args.pp, cp=args.cp, dp=args.dp, zero=args.zero, recompute=args.recompute,
        total=_fmt(args, total), states=_fmt(args, st), activations=_fmt(args, pm.activation_bytes),
        gathered=_fmt(args, gathered), margin=_fmt(args, args.margin_gb * 1e9)))
    if args.variant != "zero-paper":
        print(_(PLAN_VARIANT).format(variant=args.variant))
    notes = list(pm.assumptions)
    if args.k is not None:
        notes[0] = _(K_NOTE).format(k=k)
    if offload:
        notes.append(_(OFFLOAD_NOTE).format(optimizer=args.offload_optimizer, param=args.offload_param))
    notes.append(_(NOT_COUNTED))
    print(_(ASSUMED))
    for note in notes:
        print(f"  - {note}")
