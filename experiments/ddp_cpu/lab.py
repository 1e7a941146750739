"""DDP on CPU: train with DistributedDataParallel on gloo, then time all-reduce over message sizes.

Run by hand (prints a table; writes the JSON result and, next to it, a bandwidth-vs-size PNG, then prints
the git line that commits both)::

    python -m experiments.ddp_cpu.lab --out experiments/ddp_cpu/results/allreduce-cpu.json

(on 2 ranks of pytest-distcheck's rank pool; ``--world-size`` for more), or the same under torchrun::

    torchrun --nproc_per_node 2 -m experiments.ddp_cpu.lab --out experiments/ddp_cpu/results/allreduce-cpu.json

or from a test through the ``dist_world`` fixture: ``dist_world.run(lab.run, LabConfig(...))``. Redraw
the plot of a committed result: ``python -m experiments.ddp_cpu.lab --replot RESULT.json``.

What it does, on every rank of an initialised process group:
1. trains a small MLP with ``DistributedDataParallel`` for a few steps on seeded synthetic data, each
   rank on its shard of the global batch, timing every gradient bucket's all-reduce with a comm hook;
   then checks the DDP property: parameters are identical on every rank and equal (within tolerance)
   to one process training the same model on the full global batch (Li et al. 2020, "PyTorch
   Distributed", VLDB, sec. 3: gradients are averaged so each replica takes the same step);
2. times a standalone ``all_reduce`` sweep from 4 KiB to 64 MiB (float32), with warm-up and
   repetitions, and reports time, algbw and busbw as nccl-tests defines them (doc/PERFORMANCE.md:
   algbw = S / t, busbw = algbw * 2(n-1)/n for all-reduce, GB = 1e9 bytes).

The DoD check's live run builds the model and data through :func:`build_model`, :func:`batch` and
:func:`loss` (with a default :class:`LabConfig`) and compares DDP with one process itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import torch
import torch.distributed as dist
import torch.nn as nn

from pytest_distcheck import bandwidth
from pytest_distcheck.phase35.hostinfo import describe_host


@dataclass(frozen=True)
class LabConfig:
    """Sizes of the lab. Defaults are what the committed result used.

    Attributes:
        steps: DDP training steps.
        global_batch: samples per step over all ranks (must divide by the world size).
        hidden: hidden width of the MLP.
        bucket_cap_mb: DDP bucket size in MiB (small, so the comm hook sees several buckets).
        sizes_bytes: all-reduce message sizes in bytes.
        warmup, reps: untimed and timed all-reduces per size.
        first_warmup: untimed all-reduces of the first size before the sweep: without them the first size
            after training was timed several times slower than its neighbours (issue 28).
        seed: seed of weights and data.
    """

    steps: int = 5
    global_batch: int = 64
    hidden: int = 256
    bucket_cap_mb: float = 0.25
    sizes_bytes: tuple[int, ...] = tuple(4096 * 4**k for k in range(8))  # 4 KiB .. 64 MiB
    warmup: int = 2
    reps: int = 5
    first_warmup: int = 20
    seed: int = 0
    extra: dict = field(default_factory=dict)


def build_model(cfg: LabConfig) -> nn.Module:
    """The MLP, seeded by ``cfg.seed``: 32 inputs, two hidden layers of ``cfg.hidden``, 1 output."""
    torch.manual_seed(cfg.seed)
    return nn.Sequential(nn.Linear(32, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
                         nn.Linear(cfg.hidden, 1))


def batch(cfg: LabConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``, the same on every rank: inputs ``(cfg.global_batch, 32)`` and targets
    ``(cfg.global_batch, 1)``, float32; each rank trains on its shard."""
    g = torch.Generator().manual_seed(cfg.seed * 1000 + step)
    x = torch.randn(cfg.global_batch, 32, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error: a mean over the samples, so the average of equal shards' gradients is the full
    batch's gradient, which DDP's averaging relies on."""
    return nn.functional.mse_loss(output, target)


def _timing_hook(records: list[dict], step_ref: list[int]):
    """A DDP comm hook that all-reduces each bucket synchronously and records its time.

    Synchronous on purpose: the time is not overlapped with backward. No barrier precedes it, so it also holds
    the wait for the other rank's backward to reach this bucket (the all-reduce plus the ranks' skew).
    """

    def hook(state, bucket):
        buf = bucket.buffer()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        seconds = time.perf_counter() - t0
        buf.div_(dist.get_world_size())
        records.append({"step": step_ref[0], "bucket": bucket.index(),
                        "bytes": buf.numel() * buf.element_size(), "seconds": seconds})
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    return hook


def train_ddp(cfg: LabConfig) -> dict:
    """Train with DDP and check the DDP property. Returns the ``ddp`` section of the result.

    Raises:
        ValueError: the global batch does not divide by the world size.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    if cfg.global_batch % world:
        raise ValueError(f"global_batch {cfg.global_batch} must divide by world size {world}")
    local = cfg.global_batch // world
    model = DDP(build_model(cfg), bucket_cap_mb=cfg.bucket_cap_mb)
    records: list[dict] = []
    step_ref = [0]
    model.register_comm_hook(None, _timing_hook(records, step_ref))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    reference = build_model(cfg)  # one process, full global batch: what DDP must reproduce
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        step_ref[0] = step
        x, y = batch(cfg, step)
        opt.zero_grad()
        loss(model(x[rank * local:(rank + 1) * local]), y[rank * local:(rank + 1) * local]).backward()
        opt.step()
        ref_opt.zero_grad()
        loss(reference(x), y).backward()
        ref_opt.step()
    train_s = time.perf_counter() - t0

    flat = torch.cat([p.detach().flatten() for p in model.module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    equal_across_ranks = all(torch.equal(gathered[0], g) for g in gathered[1:])
    ref_flat = torch.cat([p.detach().flatten() for p in reference.parameters()])
    max_diff = (flat - ref_flat).abs().max().item()
    return {
        "steps": cfg.steps,
        "global_batch": cfg.global_batch,
        "parameters": flat.numel(),
        "bucket_cap_mb": cfg.bucket_cap_mb,
        "train_seconds": train_s,
        "params_equal_across_ranks": equal_across_ranks,
        "max_abs_diff_vs_single_process": max_diff,
        "tolerance": 1e-5,
        "bucket_allreduce": records,
    }


def allreduce_sweep(cfg: LabConfig) -> list[dict]:
    """Time ``all_reduce`` of float32 tensors of each size in ``cfg.sizes_bytes``.

    Returns one row per size: size_bytes, count, dtype, reps, time_s_median/min/max, algbw_gbps,
    busbw_gbps (from the median time); see :func:`pytest_distcheck.bandwidth.allreduce_sweep`. Before
    the sweep the first size is all-reduced ``cfg.first_warmup`` times, untimed.
    """
    first = torch.ones(cfg.sizes_bytes[0] // 4, dtype=torch.float32)
    for _ in range(cfg.first_warmup):
        dist.all_reduce(first)
    return bandwidth.allreduce_sweep(cfg.sizes_bytes, cfg.warmup, cfg.reps)


def run(cfg: LabConfig | None = None) -> dict:
    """Run the whole lab on the current process group; every rank returns the same result dict.

    Needs ``torch.distributed`` initialised (gloo). The dict validates against
    ``pytest_distcheck/schemas/allreduce-result.schema.json``.
    """
    cfg = cfg or LabConfig()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    ddp = train_ddp(cfg)
    sweep = allreduce_sweep(cfg)
    return {
        "schema": "distcheck/allreduce-result/1",
        "experiment": "ddp-cpu-allreduce",
        "started_utc": started,
        "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": "cpu",
        "device_count": dist.get_world_size(),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "torch_version": torch.__version__,
        "host": describe_host(),
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
        "ddp": ddp,
        "allreduce_sweep": sweep,
    }


def format_table(result: dict) -> str:
    """The sweep as an nccl-tests-style text table, plus the DDP summary."""
    from pytest_distcheck.bandwidth import format_sweep

    d = result["ddp"]
    per_bucket = [r["seconds"] for r in d["bucket_allreduce"]]
    head = (
        f"DDP: {d['steps']} steps, {d['parameters']} parameters, world size {result['world_size']} "
        f"({result['backend']}); params equal across ranks: {d['params_equal_across_ranks']}; "
        f"max |DDP - single process| = {d['max_abs_diff_vs_single_process']:.2e}\n"
        f"DDP bucket all-reduce: {len(per_bucket)} calls, median {statistics.median(per_bucket) * 1e6:.1f} us\n"
    )
    return head + format_sweep(result["allreduce_sweep"])


def plot_title(result: dict) -> str:
    """The plot's title: collective, ranks, backend, host and torch version of a result."""
    host = result["host"]
    load = f", load average {host['load_avg_1m']:.2f}" if "load_avg_1m" in host else ""
    return (f"all_reduce on {result['world_size']} {result['backend']} ranks ({result['device']}), "
            f"torch {result['torch_version']}, {result['started_utc']}\n"
            f"{host['cpu']}, {host['logical_cpus']} logical CPUs{load}")


def save_plot(result: dict, json_path: str) -> str:
    """Write the sweep's bandwidth-vs-size plot next to the JSON result (same name, ``.png``)."""
    png = os.path.splitext(json_path)[0] + ".png"
    bandwidth.plot_sweep(result["allreduce_sweep"], png, plot_title(result))
    return png


def commit_step(json_path: str, png: str) -> str:
    """The next step after ``--out``: the git line that commits the log, which the DoD check reads as
    committed, and its plot, which the check records as evidence beside it (checks/test_ddp_allreduce_logged.py);
    run in the current folder, or from the subfolder whose shell started the lab as ``(cd ../.. && torchrun ...)``."""
    from pytest_distcheck.committed import commit_command
    from pytest_distcheck.workspace import for_the_shell

    line = for_the_shell(commit_command([json_path, png], "DDP lab: all-reduce log and plot"))
    return f"commit both (the DoD check reads the log as committed and records the plot beside it as evidence): {line}"


def run_on_pool(cfg: LabConfig, pool) -> dict:
    """Run the lab on every rank of a :class:`pytest_distcheck.ranks.pool.RankPool`; rank 0's result."""
    from experiments.ddp_cpu import lab  # by name, so the ranks import it rather than unpickle __main__

    return pool.run(lab.run, (lab.LabConfig(**asdict(cfg)),), {}, timeout=600)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the JSON result here, and its plot next to it (rank 0)")
    parser.add_argument("--reps", type=int, default=LabConfig.reps)
    parser.add_argument("--world-size", type=int, default=2, help="ranks of the rank pool (not under torchrun)")
    parser.add_argument("--replot", metavar="RESULT_JSON", help="only redraw the plot of this result file")
    args = parser.parse_args()
    if args.replot:
        print(f"wrote {save_plot(bandwidth.load_result(args.replot), args.replot)}")
        return
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
        try:
            result = run(LabConfig(reps=args.reps))
        finally:
            dist.destroy_process_group()
        if int(os.environ["RANK"]) != 0:
            return
    else:
        from pytest_distcheck.ranks.pool import RankPool

        pool = RankPool(args.world_size)
        try:
            result = run_on_pool(LabConfig(reps=args.reps), pool)
        finally:
            pool.close()
    print(format_table(result))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        png = save_plot(result, args.out)
        print(f"wrote {args.out} and {png}")
        print(commit_step(args.out, png))


if __name__ == "__main__":
    main()
