"""The paid run behind DoD item tp-speedup-committed: the TP inference lab on 2 GPUs, for at most $3.

    pytest -m gpu --max-usd 3                          # rents 2 GPUs on RunPod (RUNPOD_API_KEY)
    pytest -m gpu --max-usd 3 --gpu-provider local     # this machine's 2 GPUs, $0

What it does: the ``gpu_pod`` fixture reserves the worst case with the budget guard, creates a pod
(``[pods]`` in checks/distcheck.toml: GPU type, image, cloud), records it in the ledger
(``[budget] ledger``), and waits for SSH. This test copies the lab (``experiments/tp_inference``) and
the kit's package to the pod, runs the preflight there (``pytest_distcheck.pods.preflight``: 2 GPUs
visible, torch >= 2.5 with CUDA usable, a 2-rank NCCL all-reduce, free memory for the gpu preset as
the kit's memory calculator counts it; any miss stops the run before the experiment), then ``torchrun
--nproc_per_node 2 -m experiments.tp_inference.speedup --run-id <the reservation's run id> --backend
nccl --device cuda --preset gpu`` (the backend and device are given, never inferred: a pod that cannot
use CUDA fails instead of falling back to gloo), and copies the result JSON and its PNG back into
``[tp_inference] results_dir`` under a name of their own (it contains the run id; an existing file is
never overwritten, and a result that is not CUDA/NCCL on 2 GPUs is refused). Then the fixture
terminates the pod until RunPod confirms and settles the ledger row. Commit the two files; the check
``test_tp_speedup_committed.py`` then finds them tied by run id to the ledger.

In a rehearsal (``distcheck rehearse``: the bundled fake RunPod API, a scratch copy of the workspace,
nothing paid) the same path runs with ``--backend gloo --device cpu --preset cpu``, and the
preflight's misses are recorded (what the rehearsal could not cover) instead of stopping the run.

Not marked ``dod``: when it is skipped (no ``--max-usd``) it says nothing about committed evidence,
which the committed-result check judges. Extra arguments for ``speedup.py`` may be given as
``[tp_inference] pod_args`` (the kit's own tests use it for a tiny run against the fake RunPod); they may
not name ``--backend``, ``--device``, ``--preset``, ``--run-id``, ``--out`` or ``--preflight``.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import pytest_distcheck
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m
from pytest_distcheck.phase35.messages import PAID_TITLE, PAID_WROTE, REHEARSAL_TITLE, REHEARSAL_WROTE

EXPERIMENT = "tp-inference"
RUN_SECONDS = 20 * 60  # the sweep's time limit on the pod (the gpu preset takes a few minutes)
GPUS = 2
FIXED = ("--backend", "--device", "--preset", "--run-id", "--out", "--preflight")  # set here, per mode
MODES = {False: ("cuda", "nccl", "gpu"), True: ("cpu", "gloo", "cpu")}  # rehearsal -> device, backend, preset
DEPS = "'jsonschema>=4.20' 'matplotlib>=3.8'"  # what speedup.py needs beyond torch (in RunPod's image)


def _stage(root: Path, to: Path) -> Path:
    """The lab and the kit's package (as imported here), without results or caches."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "results")
    lab = root / "experiments" / "tp_inference"
    if not (lab / "speedup.py").is_file():
        pytest.fail(_(m.NO_TP_LAB).format(path=lab / "speedup.py"))
    shutil.copytree(lab, to / "experiments" / "tp_inference", ignore=skip)
    shutil.copy2(root / "experiments" / "__init__.py", to / "experiments" / "__init__.py")
    shutil.copytree(Path(pytest_distcheck.__file__).parent, to / "pytest_distcheck", ignore=skip)
    return to


def gpu_preset_bytes() -> tuple[float, str]:
    """Bytes rank 0 needs on its GPU for speedup.py's gpu preset, and how they were counted.

    At TP 1 rank 0 holds the dense model and its TP-1 copy (2 x weights), the KV cache of the largest
    batch at the full context (``pytest_distcheck.calc.inference.serving_bytes_per_gpu``: Pope et al.
    2022 sec. 2), the logits of the largest prefill (batch x prompt x vocab) and 1 GiB for the CUDA
    context and NCCL buffers (an allowance, not a measurement).
    """
    import torch

    from experiments.tp_inference.model import GPT
    from experiments.tp_inference.speedup import PRESETS
    from pytest_distcheck.calc.inference import serving_bytes_per_gpu

    preset = PRESETS["gpu"]
    cfg, b, s = preset["model"], max(preset["batch_sizes"]), max(preset["prompt_lens"])
    # Counted on the meta device, initialising nothing: torch's normal_ on a meta tensor imports torch._dynamo
    # (about 2 s), for values a count never reads.
    with torch.device("meta"), mock.patch.object(torch.nn.init, "normal_", lambda tensor, *a, **k: tensor):
        params = sum(p.numel() for p in GPT(cfg).parameters())
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[preset["dtype"]]
    weights, cache = serving_bytes_per_gpu(params, cfg.n_layers, b, cfg.max_seq_len, cfg.d_model, cfg.n_heads,
                                           weight_dtype=dtype, kv_dtype=dtype)
    logits = b * s * cfg.vocab_size * preset["dtype"].itemsize
    total = 2 * weights + cache + logits + 1024**3
    gb = lambda x: f"{x / 1e9:.1f} GB"  # noqa: E731
    return total, (f"gpu preset at TP 1: 2 x {gb(weights)} weights + {gb(cache)} KV cache (batch {b}, context "
                   f"{cfg.max_seq_len}) + {gb(logits)} logits + 1 GiB CUDA context")


def pod_arguments(text: str) -> str:
    """``[tp_inference] pod_args``, refused when it names an argument this check sets itself."""
    args = shlex.split(text)
    bad = sorted({a.split("=", 1)[0] for a in args} & set(FIXED))
    if bad:
        pytest.fail(_(m.FIXED_POD_ARGS).format(args=", ".join(bad)))
    return " ".join(shlex.quote(a) for a in args)


def accept(data: dict[str, Any], name: str, run_id: str, rehearsal: bool) -> None:
    """Fail unless the result is what this run had to produce: its run id, and CUDA/NCCL on 2 GPUs (a
    rehearsal: CPU/gloo, marked as a rehearsal)."""
    if data["run_id"] != run_id:
        pytest.fail(_(m.OTHER_RUN_ID).format(name=name, got=data["run_id"], want=run_id))
    device, backend, _preset = MODES[rehearsal]
    got = (data["device"]["type"], data["backend"], data["world_size"])
    if got != (device, backend, GPUS) or (not rehearsal and data["device"]["count"] < GPUS):
        pytest.fail(_(m.WRONG_DEVICE).format(name=name, device=got[0], backend=got[1], count=data["device"]["count"],
                                             ranks=got[2], want_device=device, want_backend=backend, gpus=GPUS))
    if bool((data.get("preflight") or {}).get("rehearsal")) != rehearsal:
        pytest.fail(_(m.NOT_MARKED_REHEARSAL).format(name=name, rehearsal=rehearsal))


def write_new(dst: Path, content: bytes) -> None:
    """Write ``dst``, which must not exist: a committed result is never overwritten."""
    try:
        with dst.open("xb") as fh:
            fh.write(content)
    except FileExistsError:
        pytest.fail(_(m.NEVER_OVERWRITTEN).format(path=dst))


@pytest.mark.gpu
@pytest.mark.budget(usd=3)
@pytest.mark.pod(gpus=GPUS, minutes=25, experiment=EXPERIMENT)
def test_tp_speedup_on_two_gpus(gpu_pod, distcheck_workspace, distcheck_log, distcheck_rehearsal, tmp_path):
    from pytest_distcheck.phase35.tp_result import load_result
    from pytest_distcheck.pods.preflight import Expect, run_preflight, summary

    ws, rehearsal = distcheck_workspace, distcheck_rehearsal
    section = ws.section("tp_inference")
    results_dir = ws.resolve(section.get("results_dir", "experiments/tp_inference/results"))
    extra = pod_arguments(str(section.get("pod_args", "")))
    need, how = gpu_preset_bytes()
    gpu_pod.put(_stage(ws.root, tmp_path / "stage"), "code")
    facts = run_preflight(gpu_pod, Expect(gpus=GPUS, min_free_bytes=need, need=how), rehearsal=rehearsal)
    (tmp_path / "preflight.json").write_text(json.dumps(facts), encoding="utf-8")
    gpu_pod.put(tmp_path / "preflight.json", "code/preflight.json")
    device, backend, preset = MODES[rehearsal]
    name = f"speedup-{device}-{backend}-{GPUS}-{gpu_pod.run_id}.json"
    # The status line says it in the language in use; the command (and its comment) is the same in every one.
    shown = _(m.SPEEDUP_RUN).format(ranks=m.ranks(GPUS), backend=backend, device=device)
    command = (f"# speedup.py: torchrun, {GPUS} ranks, {backend} on {device}\n"
               f"cd code && (python -c 'import jsonschema, matplotlib' 2>/dev/null || python -m pip install -q {DEPS})"
               f" && torchrun --nproc_per_node {GPUS} -m experiments.tp_inference.speedup "
               f"--run-id {shlex.quote(gpu_pod.run_id)} --backend {backend} --device {device} --preset {preset} "
               f"--preflight preflight.json --out experiments/tp_inference/results/{shlex.quote(name)} {extra}")
    result = gpu_pod.run(command, timeout=RUN_SECONDS, shown=shown)
    assert result.ok, _(m.SPEEDUP_FAILED).format(pod=gpu_pod.id, status=result.exit_status, tail="\n".join(result.tail))
    back = tmp_path / "back"
    gpu_pod.get(f"code/experiments/tp_inference/results/{name}", back / name)
    data = load_result(back / name)
    accept(data, name, gpu_pod.run_id, rehearsal)
    png = back / data["plot"]
    gpu_pod.get(f"code/experiments/tp_inference/results/{data['plot']}", png)
    results_dir.mkdir(parents=True, exist_ok=True)
    # The pod, as the ledger rows of this run name it: the committed-result check ties them together.
    data["pod"] = {"provider": gpu_pod.provider, "id": gpu_pod.id}
    wrote = [results_dir / name, results_dir / png.name]
    write_new(wrote[0], (json.dumps(data, indent=2) + "\n").encode())
    write_new(wrote[1], png.read_bytes())
    rel = " ".join(str(p.relative_to(ws.root)) if p.is_relative_to(ws.root) else str(p) for p in wrote)
    if rehearsal:
        distcheck_log(_(REHEARSAL_TITLE), _(REHEARSAL_WROTE).format(run=gpu_pod.run_id, pod=gpu_pod.id, files=rel,
                                                                    preflight=summary(facts),
                                                                    problems="; ".join(facts["problems"])))
    else:
        distcheck_log(_(PAID_TITLE).format(gpus=GPUS), _(PAID_WROTE).format(
            run=gpu_pod.run_id, provider=gpu_pod.provider, pod=gpu_pod.id, files=rel, preflight=summary(facts)))
