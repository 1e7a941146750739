#!/usr/bin/env bash
# Single-GPU smoke run of the TP lab's CUDA path (issue 20, point 6). PREPARED, NOT YET RUN: no machine
# with a GPU was available when it was written, and no result of it is committed.
#
#   bash experiments/tp_inference/gpu_smoke.sh        # from the repository root, on a machine with 1 GPU
#
# Needs a CUDA build of torch >= 2.5 and the kit (pip install -e .). What it checks, in order, stopping
# at the first failure:
#   1. the pod preflight (pytest_distcheck.pods.preflight) for 1 GPU: nvidia-smi sees it (name, driver,
#      the CUDA the driver supports), torch's version and torch.cuda.is_available(), NCCL initialised
#      with device_id and a 1-rank all-reduce of 4 floats, free GPU memory against the gpu preset's
#      estimate at TP 1 (checks/test_tp_speedup_gpu.py::gpu_preset_bytes, from pytest_distcheck.calc);
#   2. speedup.py at TP 1 with the gpu preset under torchrun, --backend nccl --device cuda: NCCL init
#      with device_id, CUDA-event timing (settings.timer must be "cuda-events"), and whether the gpu
#      preset fits (nvidia-smi samples memory.used every second meanwhile).
# Everything goes to $OUT (default experiments/tp_inference/smoke/<UTC time>/): gpu-smoke.log,
# preflight.json, memory.csv and the result JSON + PNG. It is a smoke result, never DoD evidence
# (one GPU, TP 1 only, not tied to the ledger); it stays out of [tp_inference] results_dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
OUT=${OUT:-experiments/tp_inference/smoke/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-smoke.log") 2>&1
echo "gpu_smoke: $(date -u +%FT%TZ) on $(hostname), output in $OUT"

echo "== 1. preflight (1 GPU)"
OUT="$OUT" "$PY" - <<'PREFLIGHT'
import importlib.util, json, os, subprocess, sys
from pytest_distcheck.pods.preflight import Expect, parse, probe_command, problems, summary
spec = importlib.util.spec_from_file_location("gpu_check", "checks/test_tp_speedup_gpu.py")
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
need, how = check.gpu_preset_bytes()
proc = subprocess.run(["bash", "-c", probe_command(1)], capture_output=True, text=True, timeout=180)
facts = parse(proc.stdout.splitlines())
if facts is None:
    sys.exit(f"gpu_smoke: the probe gave no facts (exit {proc.returncode}): {proc.stdout[-500:]}{proc.stderr[-500:]}")
found = problems(facts, Expect(gpus=1, min_free_bytes=need, need=how))
facts["problems"], facts["rehearsal"] = found, False
with open(os.path.join(os.environ["OUT"], "preflight.json"), "w") as fh:
    json.dump(facts, fh, indent=1)
print(json.dumps(facts, indent=1))
print("preflight:", summary(facts))
print("estimate:", how, f"= {need / 1e9:.1f} GB")
if found:
    sys.exit("gpu_smoke: preflight FAILED:\n" + "\n".join("  - " + p for p in found))
print("preflight: ok")
PREFLIGHT

echo "== 2. speedup.py at TP 1, gpu preset, nccl on cuda"
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -l 1 > "$OUT/memory.csv" &
SMI=$!
trap 'kill $SMI 2>/dev/null || true' EXIT
RUN_ID="smoke-$(date -u +%Y%m%dT%H%M%SZ)"
"$PY" -m torch.distributed.run --standalone --nproc_per_node 1 -m experiments.tp_inference.speedup \
    --run-id "$RUN_ID" --backend nccl --device cuda --preset gpu --tp-degrees 1 \
    --preflight "$OUT/preflight.json" --out "$OUT/speedup-cuda-nccl-1-$RUN_ID.json" \
    --notes "single-GPU smoke run (experiments/tp_inference/gpu_smoke.sh); not DoD evidence"
"$PY" - "$OUT/speedup-cuda-nccl-1-$RUN_ID.json" <<'VERIFY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["device"]["type"] == "cuda" and r["backend"] == "nccl", (r["device"], r["backend"])
assert r["settings"]["timer"] == "cuda-events", r["settings"]["timer"]
print("result:", sys.argv[1], "device", r["device"]["name"], "torch", r["versions"]["torch"], "CUDA",
      r["versions"]["cuda"], "NCCL", r["versions"]["nccl"], "timer", r["settings"]["timer"])
for m in r["measurements"]:
    print(f"  batch {m['batch_size']:>2} prompt {m['prompt_len']:>3}: prefill {m['prefill_s']['median'] * 1e3:.2f} ms, "
          f"decode {m['decode_step_s']['median'] * 1e3:.3f} ms/step")
VERIFY
echo "peak memory.used (MiB) sampled by nvidia-smi: $(awk -F', ' 'NR > 1 {gsub(/ MiB/, "", $2); if ($2 > m) m = $2} END {print m}' "$OUT/memory.csv")"
echo "gpu_smoke: done $(date -u +%FT%TZ)"
