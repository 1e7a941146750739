"""TP inference speedup: prefill latency and decode tokens/s at TP degree 1, 2 (and more, given ranks).

Run from the repository root, on CPU with gloo (2 processes; how the committed CPU result was made)::

    torchrun --nproc_per_node 2 -m experiments.tp_inference.speedup

and, unchanged, on 2 GPUs with NCCL (without arguments the backend follows ``torch.cuda.is_available()``;
the paid run passes the budget reservation's run id, so the result ties to its ledger rows, and then
must name the backend and device: a run that cannot use CUDA stops instead of falling back to gloo)::

    torchrun --nproc_per_node 2 -m experiments.tp_inference.speedup --run-id <run id> --backend nccl --device cuda

Results are written under a new name per run (``speedup-<device>-<backend>-<world>-<run id>.json``)
and an existing file is never overwritten.

What it does: every rank builds the same seeded dense model (``model.py``; preset ``cpu`` or ``gpu``
by backend), then for each TP degree ``t`` ranks ``0..t-1`` shard it with the plan (``shard.py``)
and time, for each batch size ``b`` and prompt length ``s``: one prefill of ``b x s`` tokens and
``new_tokens`` greedy decode steps with the KV cache, ``warmup`` untimed then ``reps`` timed times
(CUDA events + synchronisation on GPU, wall clock on CPU), then ``reps`` more with every all-reduce
timed (kept apart so that timing them does not slow the latency figures). Ranks ``>= t`` wait.
Rank 0's figures are reported (every rank of a TP group finishes each layer together, at the
all-reduce). Rank 0 writes the JSON (schema ``tp-inference-result``, validated and self-checked
before writing) and the speedup-curve PNG beside it.

With ``--torch-tp`` it also times PyTorch's own TP of the same model and plan (``shard_with_torch``:
DTensor ``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel``) at each TP degree > 1,
its repetitions interleaved with the lab model's (so load on a shared machine hits both alike), and
records per configuration ``torch_tp_prefill_s``, ``torch_tp_decode_step_s`` and
``torch_tp_decode_ratio`` = median torch decode step / median lab decode step (> 1: the lab's is
faster). The CPU reference result was made with::

    torchrun --nproc_per_node 2 -m experiments.tp_inference.speedup --torch-tp \
        --out solutions/experiments/tp_inference/results/speedup-cpu-gloo-2.json

The speedup at TP ``t`` is latency at TP 1 over latency at TP ``t``, for the same ``b`` and ``s``
(``pytest_distcheck.phase35.tp_result``). On CPU, TP 1 runs on one core and TP 2 on two (torchrun sets one
thread per process), so the CPU curve shows work split over cores, not over GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from experiments.tp_inference.comm import AllReduceTimer, TPGroup
from experiments.tp_inference.generate import decode_step, prefill
from experiments.tp_inference.model import GPT, GPTConfig, build_model
from experiments.tp_inference.plan import BLOCK_PLAN
from experiments.tp_inference.plot import plot_speedups
from experiments.tp_inference.shard import shard_model, shard_with_torch, tp_degree_problems
from experiments.tp_inference.timing import Stopwatch, device_for
from pytest_distcheck.evidence import record_sources
from pytest_distcheck.phase35.tp_result import SCHEMA, SCHEMA_ID, compute_speedups, problems, summarize
from pytest_distcheck.schemas import validate
from pytest_distcheck.tp.plan import does_not_fit

EXPERIMENT = "tp-inference"
RESULTS_DIR = Path("experiments/tp_inference/results")
ROOT = Path(__file__).resolve().parents[2]  # the repository (workspace) root


def code_sources() -> list[str]:
    """The lab's code files, relative to the root: a result records their hashes, so a check can tell
    whether the code changed since (``pytest_distcheck.evidence``)."""
    here = Path(__file__).resolve().parent
    return [p.relative_to(ROOT).as_posix() for p in sorted(here.glob("*.py"))]

# "gpu": ~1.9 B parameters in bf16 (3.7 GB), big enough that a decode step reads far more weight
# bytes than an all-reduce moves, small enough (with its KV cache and activations, ~12 GB at TP 1)
# for a 24 GB card; "cpu": ~3.7 M parameters, a sweep of about a minute on 2 cores.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": dict(model=GPTConfig(vocab_size=1024, n_layers=4, d_model=256, n_heads=8, max_seq_len=160),
                dtype=torch.float32, batch_sizes=[1, 4, 16], prompt_lens=[32, 128], new_tokens=16,
                warmup=2, reps=5),
    "gpu": dict(model=GPTConfig(vocab_size=32000, n_layers=8, d_model=4096, n_heads=32, max_seq_len=544),
                dtype=torch.bfloat16, batch_sizes=[1, 4, 16, 32], prompt_lens=[128, 512], new_tokens=32,
                warmup=3, reps=10),
}


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["gloo", "nccl"],
                   help="default: nccl when CUDA is available, else gloo (given explicitly with --run-id)")
    p.add_argument("--device", choices=["cpu", "cuda"],
                   help="default: cuda under nccl, else cpu (given explicitly with --run-id); never falls back")
    p.add_argument("--preset", choices=sorted(PRESETS), help="model and sweep (default: gpu under nccl, else cpu)")
    p.add_argument("--tp-degrees", type=_ints, help="default: 1, 2, 4, ... up to the world size")
    p.add_argument("--batch-sizes", type=_ints, help="override the preset's batch sizes")
    p.add_argument("--prompt-lens", type=_ints, help="override the preset's prompt lengths (tokens)")
    p.add_argument("--new-tokens", type=int, help="decode steps timed per repetition")
    p.add_argument("--warmup", type=int, help="untimed repetitions per configuration")
    p.add_argument("--reps", type=int, help="timed repetitions per configuration")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and prompts")
    p.add_argument("--run-id", default=os.environ.get("DISTCHECK_RUN_ID"),
                   help="the budget reservation's run id (env DISTCHECK_RUN_ID); default local-<UTC time>")
    p.add_argument("--out", type=Path, help="result JSON, never overwritten "
                   "(default: results/speedup-<device>-<backend>-<world>-<run id>.json)")
    p.add_argument("--preflight", type=Path,
                   help="JSON facts of the pod's preflight (pytest_distcheck.pods.preflight), stored in the result")
    p.add_argument("--torch-tp", action="store_true",
                   help="also time PyTorch's parallelize_module (DTensor) on the same model and plan, at TP > 1")
    p.add_argument("--notes", default="", help="free text stored in the result")
    return p.parse_args(argv)


def _settings(args: argparse.Namespace, backend: str, world: int) -> dict[str, Any]:
    name = args.preset or ("gpu" if backend == "nccl" else "cpu")
    preset = PRESETS[name]
    cfg: GPTConfig = preset["model"]
    degrees = args.tp_degrees or [t for t in (1, 2, 4, 8, 16) if t <= world and not tp_degree_problems(cfg, t)]
    s = dict(
        model=cfg, dtype=preset["dtype"], tp_degrees=degrees,
        batch_sizes=args.batch_sizes or preset["batch_sizes"], prompt_lens=args.prompt_lens or preset["prompt_lens"],
        new_tokens=args.new_tokens or preset["new_tokens"],
        warmup=preset["warmup"] if args.warmup is None else args.warmup, reps=args.reps or preset["reps"],
    )
    if max(degrees) > world or 1 not in degrees:
        raise SystemExit(f"--tp-degrees {degrees}: need TP 1 and degrees <= the world size {world}")
    for t in degrees:  # all checked before TP 1 is timed: a sweep never fails half-way
        why = tp_degree_problems(cfg, t)
        if why:
            raise SystemExit(f"--tp-degrees {degrees} ({name} preset): {does_not_fit(t, why)}")
    if max(s["prompt_lens"]) + s["new_tokens"] > cfg.max_seq_len:
        raise SystemExit(f"prompt length {max(s['prompt_lens'])} + {s['new_tokens']} new tokens exceed "
                         f"the model's max_seq_len {cfg.max_seq_len}")
    return s


def _rep(model: GPT, prompt: torch.Tensor, new_tokens: int, watch: Stopwatch) -> tuple[float, float]:
    """One prefill and ``new_tokens`` decode steps; (prefill seconds, seconds per decode step)."""
    cache = model.new_cache()
    watch.start()
    logits = prefill(model, prompt, cache)
    t_prefill = watch.stop()
    token = logits[:, -1].argmax(-1, keepdim=True)
    watch.start()
    for _ in range(new_tokens):
        token = decode_step(model, token, cache).argmax(-1, keepdim=True)
    return t_prefill, watch.stop() / new_tokens


def _allreduce_rep(model: GPT, prompt: torch.Tensor, new_tokens: int,
                   timer: AllReduceTimer) -> tuple[float, float, int]:
    """The same work with every all-reduce timed; (seconds per prefill, per decode step, calls per prefill)."""
    cache = model.new_cache()
    timer.reset()
    logits = prefill(model, prompt, cache)
    prefill_s, calls = timer.total_s(), timer.calls
    timer.reset()
    token = logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(new_tokens):
        token = decode_step(model, token, cache).argmax(-1, keepdim=True)
    return prefill_s, timer.total_s() / new_tokens, calls


def measure(model: GPT, tp: TPGroup, device: torch.device, b: int, s: int, st: dict[str, Any],
            seed: int, torch_model: GPT | None = None) -> dict[str, Any]:
    """Time one (TP degree, batch size, prompt length) configuration on this rank; a measurement dict.

    Latencies come from ``st["reps"]`` repetitions after ``st["warmup"]``; all-reduce time from
    ``st["reps"]`` further repetitions with the all-reduce timer on (medians). With ``torch_model``
    (PyTorch's TP of the same model), each repetition of the lab model is followed by one of it.
    """
    prompt = torch.randint(0, model.cfg.vocab_size, (b, s), generator=torch.Generator().manual_seed(seed))
    prompt = prompt.to(device)
    watch, align = Stopwatch(device), torch.zeros(1, device=device)
    pre, dec, t_pre_s, t_dec_s = [], [], [], []
    for i in range(st["warmup"] + st["reps"]):
        tp.all_reduce(align)  # start each repetition together
        t_pre, t_dec = _rep(model, prompt, st["new_tokens"], watch)
        if i >= st["warmup"]:
            pre.append(t_pre)
            dec.append(t_dec)
        if torch_model is not None:
            tp.all_reduce(align)
            t_pre, t_dec = _rep(torch_model, prompt, st["new_tokens"], watch)
            if i >= st["warmup"]:
                t_pre_s.append(t_pre)
                t_dec_s.append(t_dec)
    ar_pre, ar_dec, calls = [], [], 0
    tp.timer = timer = AllReduceTimer(device)
    try:
        for _ in range(st["reps"]):
            tp.all_reduce(align)
            a_pre, a_dec, calls = _allreduce_rep(model, prompt, st["new_tokens"], timer)
            ar_pre.append(a_pre)
            ar_dec.append(a_dec)
    finally:
        tp.timer = None
    prefill_s, decode_s = summarize(pre), summarize(dec)
    out = {
        "tp": tp.size, "batch_size": b, "prompt_len": s, "new_tokens": st["new_tokens"],
        "prefill_s": prefill_s, "decode_step_s": decode_s,
        "decode_tokens_per_s": b / decode_s["median"],
        "prefill_allreduce_s": summarize(ar_pre)["median"],
        "decode_allreduce_s_per_step": summarize(ar_dec)["median"],
        "allreduces_per_forward": calls,
    }
    if torch_model is not None:
        out["torch_tp_prefill_s"], out["torch_tp_decode_step_s"] = summarize(t_pre_s), summarize(t_dec_s)
        out["torch_tp_decode_ratio"] = out["torch_tp_decode_step_s"]["median"] / decode_s["median"]
    return out


def _environment(backend: str, device: torch.device, world: int) -> dict[str, Any]:
    cuda = device.type == "cuda"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    nccl = None
    if cuda:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return {
        "host": {"name": socket.gethostname(), "cpu": cpu, "logical_cpus": os.cpu_count() or 1,
                 "platform": platform.platform(), "python": platform.python_version()},
        "device": {"type": device.type, "name": torch.cuda.get_device_name(device) if cuda else cpu,
                   "count": torch.cuda.device_count() if cuda else 1},
        "backend": backend, "world_size": world,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda if cuda else None, "nccl": nccl},
    }


def _model_info(model: GPT, cfg: GPTConfig, dtype: torch.dtype, seed: int) -> dict[str, Any]:
    n = sum(p.numel() for p in model.parameters())
    return {"vocab_size": cfg.vocab_size, "n_layers": cfg.n_layers, "d_model": cfg.d_model,
            "n_heads": cfg.n_heads, "d_ff": cfg.d_ff, "max_seq_len": cfg.max_seq_len, "parameters": n,
            "parameter_bytes": n * dtype.itemsize, "dtype": str(dtype).removeprefix("torch."), "seed": seed}


def run(args: argparse.Namespace, device: torch.device) -> Path | None:
    """The experiment on this rank, computing on ``device``, with ``torch.distributed`` initialised.

    Returns:
        On rank 0 the path of the JSON written (the PNG is beside it); ``None`` on other ranks.
    Raises:
        SystemExit: the settings do not fit the world size or the model (with the figures).
        RuntimeError: the result failed its own consistency check (nothing is written then).
    """
    backend = dist.get_backend()
    rank, world = dist.get_rank(), dist.get_world_size()
    st = _settings(args, backend, world)
    started, load = datetime.now(UTC), os.getloadavg()[0]
    run_id = args.run_id or "local-" + started.strftime("%Y%m%dT%H%M%SZ")
    preflight = json.loads(args.preflight.read_text(encoding="utf-8")) if args.preflight else None
    groups = {t: dist.new_group(list(range(t))) for t in st["tp_degrees"] if t > 1}  # every rank, same order
    dense = build_model(st["model"], seed=args.seed, device=device, dtype=st["dtype"])
    world_sync = torch.zeros(1, device=device)
    measurements = []
    for t in st["tp_degrees"]:
        tp = TPGroup(groups.get(t), rank, t) if rank < t else None
        model = shard_model(dense, tp) if tp is not None else None
        theirs = None
        if args.torch_tp and tp is not None and t > 1:
            from torch.distributed.device_mesh import DeviceMesh

            theirs = shard_with_torch(dense, DeviceMesh.from_group(groups[t], device.type))
        for b in st["batch_sizes"]:
            for s in st["prompt_lens"]:
                if model is not None:
                    m = measure(model, tp, device, b, s, st, args.seed, theirs)
                    if rank == 0:
                        measurements.append(m)
                        print(f"tp={t} batch={b} prompt={s}: prefill {m['prefill_s']['median'] * 1e3:.2f} ms, "
                              f"decode {m['decode_step_s']['median'] * 1e3:.3f} ms/step "
                              f"({m['decode_tokens_per_s']:.0f} tok/s), all-reduce "
                              f"{m['prefill_allreduce_s'] * 1e3:.2f} ms/prefill "
                              f"{m['decode_allreduce_s_per_step'] * 1e3:.3f} ms/step"
                              + (f"; torch TP decode {m['torch_tp_decode_step_s']['median'] * 1e3:.3f} ms/step "
                                 f"({m['torch_tp_decode_ratio']:.2f}x the lab's)" if theirs is not None else ""),
                              flush=True)
                dist.all_reduce(world_sync)  # ranks outside this TP group wait here
        del model, theirs
    if rank != 0:
        return None
    env = _environment(backend, device, world)
    out = args.out or RESULTS_DIR / result_name(device.type, backend, world, run_id)
    result = {
        "schema": SCHEMA_ID, "experiment": EXPERIMENT,
        "run_id": run_id,
        "started_utc": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "finished_utc": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        **env,
        "model": _model_info(dense, st["model"], st["dtype"], args.seed),
        "plan": dict(BLOCK_PLAN),
        "settings": {k: st[k] for k in ("tp_degrees", "batch_sizes", "prompt_lens", "new_tokens", "warmup", "reps")}
        | {"timer": Stopwatch(device).timer, "torch_tp": bool(args.torch_tp)},
        "measurements": measurements,
        "speedups": compute_speedups(measurements),
        "plot": out.with_suffix(".png").name,
        "sources": record_sources(code_sources(), ROOT),
        "notes": (args.notes + "; " if args.notes else "")
        + f"measured on {env['device']['count']} x {env['device']['name']} with {backend}, {world} ranks, "
        f"host {env['host']['name']} ({env['host']['logical_cpus']} logical CPUs, load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at the end)",
    } | ({"preflight": preflight} if preflight is not None else {})
    validate(result, SCHEMA, out)
    bad = problems(result)
    if bad:
        raise RuntimeError("the result disagrees with itself: " + "; ".join(bad))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("x", encoding="utf-8") as fh:  # "x": an existing (committed) result is never overwritten
        fh.write(json.dumps(result, indent=1) + "\n")
    plot_speedups(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}", flush=True)
    return out


def result_name(device: str, backend: str, world: int, run_id: str) -> str:
    """``speedup-<device>-<backend>-<world>-<run id>.json``: a new name per run (unsafe characters -> ``_``)."""
    return f"speedup-{device}-{backend}-{world}-{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}.json"


def backend_and_device(args: argparse.Namespace) -> tuple[str, str]:
    """(backend, device type) of this run. With ``--run-id`` (a run tied to a budget reservation) both
    must be given: a paid run never infers them. ``cuda`` must be usable: nothing falls back to the CPU.

    Raises:
        SystemExit: naming the missing argument, the mismatch or why CUDA is not usable.
    """
    if args.run_id and (args.backend is None or args.device is None):
        raise SystemExit("--run-id ties this run to a budget reservation: give --backend and --device "
                         "explicitly (a paid run never infers them)")
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    device = args.device or ("cuda" if backend == "nccl" else "cpu")
    if (backend == "nccl") != (device == "cuda"):
        raise SystemExit(f"--backend {backend} with --device {device}: nccl runs on cuda, gloo on cpu here")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device cuda, but CUDA is not usable here: torch {torch.__version__} (built for CUDA "
                         f"{torch.version.cuda}), torch.cuda.is_available() is False; not falling back to the CPU")
    if args.out is not None and args.out.exists():
        raise SystemExit(f"{args.out} exists; results are never overwritten: give another --out")
    return backend, device


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        print("run under torchrun, e.g. torchrun --nproc_per_node 2 -m experiments.tp_inference.speedup",
              file=sys.stderr)
        return 2
    backend, _ = backend_and_device(args)
    device = device_for(backend, int(os.environ["LOCAL_RANK"]))
    if device.type == "cuda":
        if torch.cuda.device_count() <= device.index:
            print(f"local rank {device.index} needs a GPU but only {torch.cuda.device_count()} are visible",
                  file=sys.stderr)
            return 2
        torch.cuda.set_device(device)
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    try:
        run(args, device)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
