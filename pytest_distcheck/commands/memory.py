"""Memory per GPU: model states under DDP, ZeRO-1/2/3 and the FSDP sharding strategies; activations.

  distcheck memory --params 7.5B --dp 64                       ZeRO Fig. 1: 120 / 31.4 / 16.6 / 1.9 GB
  distcheck memory --params 70B --dp 32 --gpus-per-node 8      adds HYBRID_SHARD
  distcheck memory --params 7B --dp 8 --layers 32 --hidden 4096 --heads 32 --seq-len 2048 --tp 2
                                                               adds activations per layer (Korthikanti)
GB = 1e9 bytes. Model states assume mixed-precision Adam (K = 12); buffers and fragmentation are extra.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import count, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--params", type=count, required=True, help="parameters Psi (7.5e9, 7.5B, 350M)")
    parser.add_argument("--dp", type=positive_int, required=True, help="data-parallel degree N_d (GPUs)")
    parser.add_argument("--gpus-per-node", type=positive_int, help="shard group of HYBRID_SHARD")
    parser.add_argument("--k", type=float, default=12.0, help="optimizer bytes per parameter K (default 12)")
    arch = parser.add_argument_group("activations (Korthikanti et al. 2022), all four needed")
    arch.add_argument("--layers", type=positive_int, help="transformer layers L")
    arch.add_argument("--hidden", type=positive_int, help="hidden size h")
    arch.add_argument("--heads", type=positive_int, help="attention heads a")
    arch.add_argument("--seq-len", type=positive_int, help="sequence length s")
    arch.add_argument("--micro-batch", type=positive_int, default=1, help="micro-batch size b (default 1)")
    arch.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree t (default 1)")


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.calc import memory
    from pytest_distcheck.errors import DistcheckError

    psi, n, k = args.params, args.dp, args.k
    print(f"model states per GPU, Psi = {psi:.4g} parameters, N_d = {n}, K = {k:g} (Rajbhandari et al. 2019)")
    rows = [
        ("DDP / FSDP NO_SHARD", "(2+2+K) Psi", "ddp", "sec. 3.1"),
        ("ZeRO-1", "4 Psi + K Psi/N_d", "zero1", "sec. 5.1"),
        ("ZeRO-2 / FSDP SHARD_GRAD_OP", "2 Psi + (2+K) Psi/N_d", "zero2", "sec. 5.2"),
        ("ZeRO-3 / FSDP FULL_SHARD", "(2+2+K) Psi/N_d", "zero3", "sec. 5.3"),
    ]
    for name, formula, stage, sec in rows:
        s = memory.zero_model_states(psi, stage, n, k)
        print(f"  {name:<30} {formula:<24} {s.total_gb:>10.4g} GB   (params {s.params_bytes / 1e9:.4g}, grads "
              f"{s.grads_bytes / 1e9:.4g}, optimizer {s.optimizer_bytes / 1e9:.4g})  {sec}")
    if args.gpus_per_node:
        try:
            h = memory.fsdp_model_states(psi, "HYBRID_SHARD", n, args.gpus_per_node, k)
        except ValueError as exc:
            raise DistcheckError(str(exc)) from None
        print(f"  {'FSDP HYBRID_SHARD':<30} {'(2+2+K) Psi/G, G=' + str(args.gpus_per_node):<24} {h.total_gb:>10.4g} GB"
              "   FULL_SHARD within a node (torch fsdp/api.py)")
    arch = (args.layers, args.hidden, args.heads, args.seq_len)
    if any(a is not None for a in arch):
        if None in arch:
            raise DistcheckError("activations need all of --layers, --hidden, --heads and --seq-len")
        _activations(args)
    return 0


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
