"""Recommend a parallelization strategy (DDP, ZeRO, FSDP, TP x PP x DP) for a model and a cluster.

  distcheck strategy --params 7.5B --gpu-memory-gb 80 --gpus-per-node 8
  distcheck strategy --params 70B --layers 80 --hidden 8192 --heads 64 --seq-len 4096 \\
      --gpu-memory-gb 80 --gpus-per-node 8 --nodes 4 --inter slow

Prints the plan, the memory per GPU it predicts, the rules that fired with their sources, and the
candidates rejected before it. GB = 1e9 bytes.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import count, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--params", type=count, required=True, help="parameters (7.5e9, 7.5B, 350M)")
    parser.add_argument("--layers", type=positive_int, help="transformer layers (with --hidden, --heads, --seq-len: "
                                                            "activations are counted)")
    parser.add_argument("--hidden", type=positive_int, help="hidden size")
    parser.add_argument("--heads", type=positive_int, help="attention heads")
    parser.add_argument("--seq-len", type=positive_int, help="sequence length")
    parser.add_argument("--micro-batch", type=positive_int, default=1, help="micro-batch size (default 1)")
    parser.add_argument("--gpu-memory-gb", type=float, required=True, help="memory of one GPU, GB (1e9 bytes)")
    parser.add_argument("--gpus-per-node", type=positive_int, required=True)
    parser.add_argument("--nodes", type=positive_int, default=1, help="default 1")
    parser.add_argument("--intra", choices=("nvlink", "pcie"), default="nvlink",
                        help="interconnect within a node (default nvlink)")
    parser.add_argument("--inter", choices=("fast", "slow"), default="fast",
                        help="between nodes: fast = InfiniBand/RoCE class, slow = Ethernet class (default fast)")
    parser.add_argument("--usable-fraction", type=float, default=0.9,
                        help="share of GPU memory a plan may use (default 0.9)")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import DistcheckError
    from pytest_distcheck.strategy import Cluster, Model, choose

    model = Model(args.params, args.layers, args.hidden, args.heads, args.seq_len, args.micro_batch)
    cluster = Cluster(args.gpu_memory_gb, args.gpus_per_node, args.nodes, args.intra, args.inter)
    try:
        plan = choose(model, cluster, args.usable_fraction)
    except ValueError as exc:
        raise DistcheckError(str(exc)) from None
    print(f"{cluster.gpus} GPUs ({cluster.nodes} node(s) x {cluster.gpus_per_node}, {cluster.gpu_memory_gb:g} GB, "
          f"{cluster.intra_node}" + (f", {cluster.inter_node} inter-node" if cluster.nodes > 1 else "") +
          f"); model {model.params:.4g} parameters")
    print(f"\nrecommended: {plan.name}" + ("" if plan.fits else "   (DOES NOT FIT)"))
    zero = f", ZeRO-{plan.zero[-1]}" if plan.zero != "ddp" else ""
    print(f"  TP = {plan.tp}, PP = {plan.pp}, DP = {plan.dp}{zero}"
          + (f", FSDP {plan.fsdp}" if plan.fsdp else "") + (", sequence parallel" if plan.sequence_parallel else "")
          + (f", {plan.recompute} recomputation" if plan.recompute != "none" else "")
          + (f", m >= {plan.microbatches} micro-batches" if plan.microbatches else ""))
    print(f"  memory per GPU: {plan.total_bytes / 1e9:.1f} GB = model states {plan.model_state_bytes / 1e9:.1f} GB"
          f" + activations {plan.activation_bytes / 1e9:.1f} GB (usable {plan.usable_bytes / 1e9:.1f} GB)")
    print("\nrules that fired:")
    for rule in plan.rules:
        print(f"  [{rule.id}] {rule.text}\n        source: {rule.source}")
    if plan.rejected:
        shown = list(plan.rejected)
        if len(shown) > 6:  # the simplest strategies and the nearest misses say the most
            shown = [*shown[:3], f"... {len(shown) - 6} more ...", *shown[-3:]]
        print(f"\nrejected first ({len(plan.rejected)} candidates, in the order tried):")
        for line in shown:
            print(f"  - {line}")
    return 0 if plan.fits else 1
