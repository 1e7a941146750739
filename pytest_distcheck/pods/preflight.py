"""Pod preflight: is this pod fit for the experiment? Asked over the pod's own SSH session, before
anything is run there, so a pod that cannot do the work costs a minute, not the whole reservation.

One probe script (:meth:`Pod.run`) prints one JSON line of facts: GPUs, driver and its CUDA, free
memory; torch, its CUDA, ``torch.cuda.is_available()``; NCCL and a 2-rank all-reduce. :func:`problems`
judges them against :class:`Expect` (pure, tested on synthetic facts); any miss raises
:class:`PreflightFailed` naming every miss (a rehearsal records them instead). The facts are saved into
the result (``preflight``). Why each check: docs/design/pods.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import Pod, PodError

MARKER = "DISTCHECK-PREFLIGHT "
TIMEOUT_S = 120.0  # the probe imports torch, then 2 more processes do for the all-reduce
GIB = 1024**3
# The probe's own words in its facts: recorded in English, spoken through the catalog (:func:`_probe_said`).
NO_SMI = N_("nvidia-smi not found")
NO_CUDA_DEVICE = N_("no CUDA device usable by torch")
RANK_TIMED_OUT = N_("timed out after 90 s")  # the probe's wait for each all-reduce rank
PROBE_SAID = (NO_SMI, NO_CUDA_DEVICE, RANK_TIMED_OUT)

# Runs in a child process per rank: NCCL init with device_id (guarded: added in torch 2.3), an
# all-reduce of 4 floats, checked. argv: rank, world size, TCP port.
_CHILD = r"""
import datetime, inspect, sys
import torch, torch.distributed as dist
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dev = torch.device("cuda", rank)
torch.cuda.set_device(dev)
kw = {"device_id": dev} if "device_id" in inspect.signature(dist.init_process_group).parameters else {}
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60), **kw)
t = torch.full((4,), float(rank + 1), device=dev)
dist.all_reduce(t)
torch.cuda.synchronize(dev)
want = world * (world + 1) / 2
assert t.tolist() == [want] * 4, "all-reduce gave %r, expected %r" % (t.tolist(), [want] * 4)
dist.destroy_process_group()
"""

# The probe (argv: GPUs wanted). Every step catches its own failure, so one missing piece never hides
# the others. NCCL runs before this process touches CUDA (children get clean devices).
PROBE = r"""
import json, os, re, shutil, socket, subprocess, sys
MARKER, CHILD = %(marker)r, %(child)r
NO_SMI, NO_CUDA_DEVICE, RANK_TIMED_OUT = %(no_smi)r, %(no_cuda)r, %(timed_out)r
wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 1
facts = {"python": sys.version.split()[0], "host": socket.gethostname()}
smi = shutil.which("nvidia-smi")
if smi is None:
    facts["nvidia_smi"] = {"error": NO_SMI}
else:
    try:
        q = subprocess.run([smi, "--query-gpu=index,name,driver_version,memory.total,memory.free",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        if q.returncode:
            facts["nvidia_smi"] = {"error": (q.stderr or q.stdout).strip()[-300:] or "exit %%d" %% q.returncode}
        else:
            gpus = []
            for line in q.stdout.strip().splitlines():
                i, name, driver, total, free = [c.strip() for c in line.split(",")]
                gpus.append({"index": int(i), "name": name, "driver": driver,
                             "total_bytes": int(float(total)) * 2**20, "free_bytes": int(float(free)) * 2**20})
            head = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"CUDA Version:\s*([0-9.]+)", head)
            facts["nvidia_smi"] = {"gpus": gpus, "driver_cuda": m.group(1) if m else None}
    except Exception as exc:
        facts["nvidia_smi"] = {"error": repr(exc)[-300:]}
try:
    import torch
    t = {"version": torch.__version__, "cuda": torch.version.cuda, "available": bool(torch.cuda.is_available())}
    t["count"] = torch.cuda.device_count() if t["available"] else 0
    try:
        v = torch.cuda.nccl.version() if t["available"] else None
        t["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else (str(v) if v is not None else None)
    except Exception as exc:
        t["nccl"] = None
        t["nccl_error"] = repr(exc)[-300:]
    facts["torch"] = t
except Exception as exc:
    facts["torch"] = {"error": repr(exc)[-300:]}
    t = {}
world = min(2, wanted, t.get("count", 0))
if world < 1:
    facts["allreduce"] = {"skipped": NO_CUDA_DEVICE}
else:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
    s.close()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(r), str(world), port], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outs, codes = [], []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=90)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(RANK_TIMED_OUT)
        codes.append(p.returncode)
    ok = all(c == 0 for c in codes)
    facts["allreduce"] = {"backend": "nccl", "ranks": world, "ok": ok}
    if not ok:
        facts["allreduce"]["error"] = " | ".join(o.strip().splitlines()[-1] if o.strip() else "exit %%s" %% c
                                                 for o, c in zip(outs, codes))[-600:]
if t.get("available"):
    devices = []
    for i in range(t["count"]):
        try:
            free, total = torch.cuda.mem_get_info(i)
            devices.append({"index": i, "name": torch.cuda.get_device_name(i), "free_bytes": int(free),
                            "total_bytes": int(total)})
        except Exception as exc:
            devices.append({"index": i, "error": repr(exc)[-300:]})
    t["devices"] = devices
print(MARKER + json.dumps(facts), flush=True)
""" % {"marker": MARKER, "child": _CHILD, "no_smi": NO_SMI, "no_cuda": NO_CUDA_DEVICE, "timed_out": RANK_TIMED_OUT}


# The misses, in the language in use: raised (a paid run stops at the first miss, so its result records none) or,
# in a rehearsal, recorded in the result (``preflight.problems``) for its summary to show.
FAILED_PREFLIGHT = N_("pod {pod} failed its preflight, so the experiment was not started; the pod is terminated and "
                      "its ledger row settled now:\n{misses}\nThese are facts about the pod's host or image, not "
                      "about your code.")
MISS = "  - {miss}"
NOT_REPORTED = N_("not reported")
NO_GPU_VISIBLE = N_("no GPU visible: nvidia-smi: {error}")
TOO_FEW_GPUS = N_("{n} GPU(s) visible ({names}); the experiment needs {gpus}")
NO_GPU_NAMES = N_("none")
TORCH_NOT_IMPORTED = N_("torch does not import on the pod: {error}")
TORCH_TOO_OLD = N_("torch {version} on the pod; the experiment needs torch >= {min} (an image whose pip install fell "
                   "back can ship an older torch than its tag says: runpod/containers#114)")
CUDA_NOT_AVAILABLE = N_("torch.cuda.is_available() is False (torch {version} built for CUDA {cuda}{driver}): a run "
                        "here would not use the GPUs")
DRIVER_SUPPORTS = N_("; the driver supports CUDA {cuda}")
TORCH_DEVICES = N_("torch sees {n} CUDA device(s); the experiment needs {gpus}")
NO_ALLREDUCE = N_("no NCCL all-reduce was tried: {why}")
ALLREDUCE_FAILED = N_("a {ranks}-rank NCCL all-reduce of 4 floats failed (NCCL {nccl}): {error}")
FREE_UNKNOWN = N_("GPU {index}: free memory unknown ({error})")
TOO_LITTLE_FREE = N_("GPU {index} ({name}) has {free:.1f} GiB free; the experiment needs about {need_gib:.1f} GiB "
                     "({need})")
ITS_ESTIMATE = N_("its estimate")
NO_FACTS = N_("the probe gave no facts (exit {status}): {tail}")
NO_OUTPUT = N_("no output")
# summary()'s pieces.
SUMMARY_GPUS = N_("{n} x {name}, driver {driver} (CUDA {cuda})")
SUMMARY_NO_GPU = N_("no GPU visible")
SUMMARY_TORCH = N_("torch {version} (CUDA {cuda}, {usable})")
AVAILABLE = N_("available")
NOT_AVAILABLE = N_("NOT available")
ALLREDUCE_OK = N_("all-reduce ok")
ALLREDUCE_SKIPPED = N_("all-reduce skipped")
ALLREDUCE_NOT_OK = N_("all-reduce FAILED")
# The probe command's comment, which the status line shows translated (progress.label); the command stays English.
PROBE_LABEL = N_("preflight: GPUs, driver, torch, NCCL all-reduce, free memory")


@dataclass(frozen=True)
class Expect:
    """What the experiment needs of the pod.

    Attributes:
        gpus: GPUs it uses (all must be visible, usable by torch and in the all-reduce when >= 2).
        min_free_bytes: free memory each GPU must have (bytes); 0 to skip.
        need: what ``min_free_bytes`` is for, in words (shown when it does not fit).
        min_torch: the oldest torch the experiment runs with, "MAJOR.MINOR".
    """

    gpus: int
    min_free_bytes: float = 0.0
    need: str = ""
    min_torch: str = "2.5"


class PreflightFailed(PodError):
    """The pod is not fit for the experiment; the message lists every miss. Attributes: facts, problems."""

    def __init__(self, pod_id: str, problems: list[str], facts: dict[str, Any]) -> None:
        self.facts = facts
        self.problems = problems
        misses = "\n".join(MISS.format(miss=p) for p in problems)
        super().__init__(_(FAILED_PREFLIGHT).format(pod=pod_id, misses=misses))


def _probe_said(text: str) -> str:
    """What the probe wrote (a fact's error or reason): its own words (:data:`PROBE_SAID`, and
    :data:`NOT_REPORTED` for a missing fact) in the language in use, anything else (a rank's last line, a
    Python repr) as it is."""
    known = (*PROBE_SAID, NOT_REPORTED)
    return " | ".join(_(part) if part in known else part for part in str(text).split(" | "))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:2])


def problems(facts: dict[str, Any], expect: Expect) -> list[str]:
    """What about the pod does not fit ``expect``, one sentence each in the language in use; ``[]`` when it fits.

    Args:
        facts: the probe's JSON (see :data:`PROBE`); missing parts count as misses.
    """
    out: list[str] = []
    smi = facts.get("nvidia_smi") or {"error": NOT_REPORTED}
    gpus = smi.get("gpus") or []
    if "error" in smi:
        out.append(_(NO_GPU_VISIBLE).format(error=_probe_said(smi["error"])))
    elif len(gpus) < expect.gpus:
        names = ", ".join(g["name"] for g in gpus) or _(NO_GPU_NAMES)
        out.append(_(TOO_FEW_GPUS).format(n=len(gpus), names=names, gpus=expect.gpus))
    t = facts.get("torch") or {"error": NOT_REPORTED}
    if "error" in t:
        out.append(_(TORCH_NOT_IMPORTED).format(error=_probe_said(t["error"])))
        return out
    if _version(t["version"]) < _version(expect.min_torch):
        out.append(_(TORCH_TOO_OLD).format(version=t["version"], min=expect.min_torch))
    if not t.get("available"):
        driver = _(DRIVER_SUPPORTS).format(cuda=smi["driver_cuda"]) if smi.get("driver_cuda") else ""
        out.append(_(CUDA_NOT_AVAILABLE).format(version=t["version"], cuda=t.get("cuda"), driver=driver))
        return out
    if t.get("count", 0) < expect.gpus:
        out.append(_(TORCH_DEVICES).format(n=t.get("count", 0), gpus=expect.gpus))
    ar = facts.get("allreduce") or {}
    if ar.get("skipped"):
        out.append(_(NO_ALLREDUCE).format(why=_probe_said(ar["skipped"])))
    elif not ar.get("ok"):
        out.append(_(ALLREDUCE_FAILED).format(ranks=ar.get("ranks", "?"), nccl=t.get("nccl"),
                                              error=_probe_said(ar.get("error", NOT_REPORTED))))
    if expect.min_free_bytes > 0:
        for d in (t.get("devices") or [])[:expect.gpus]:
            if "error" in d:
                out.append(_(FREE_UNKNOWN).format(index=d["index"], error=d["error"]))
            elif d["free_bytes"] < expect.min_free_bytes:
                out.append(_(TOO_LITTLE_FREE).format(index=d["index"], name=d["name"], free=d["free_bytes"] / GIB,
                                                     need_gib=expect.min_free_bytes / GIB,
                                                     need=expect.need or _(ITS_ESTIMATE)))
    return out


def summary(facts: dict[str, Any]) -> str:
    """One line of what the pod has, e.g. ``2 x NVIDIA GeForce RTX 4090, driver 570.1 (CUDA 12.8), torch
    2.8.0+cu128 (CUDA 12.8, available), NCCL 2.27.3, all-reduce ok``."""
    smi, t, ar = facts.get("nvidia_smi") or {}, facts.get("torch") or {}, facts.get("allreduce") or {}
    gpus = smi.get("gpus") or []
    parts = [_(SUMMARY_GPUS).format(n=len(gpus), name=gpus[0]["name"], driver=gpus[0]["driver"],
                                    cuda=smi.get("driver_cuda")) if gpus else _(SUMMARY_NO_GPU)]
    if "version" in t:
        usable = _(AVAILABLE if t.get("available") else NOT_AVAILABLE)
        parts.append(_(SUMMARY_TORCH).format(version=t["version"], cuda=t.get("cuda"), usable=usable))
        if t.get("nccl"):
            parts.append(f"NCCL {t['nccl']}")
    parts.append(_(ALLREDUCE_OK if ar.get("ok") else ALLREDUCE_SKIPPED if ar.get("skipped") else ALLREDUCE_NOT_OK))
    return ", ".join(parts)


def probe_command(gpus: int) -> str:
    """The shell command that runs the probe with the pod's ``python3`` (or ``python``)."""
    return (f"# {PROBE_LABEL}\n"
            f"PY=$(command -v python3 || command -v python) && \"$PY\" - {int(gpus)} <<'DISTCHECK_PROBE'\n"
            f"{PROBE}\nDISTCHECK_PROBE")


def parse(lines: list[str]) -> dict[str, Any] | None:
    """The facts from the probe's output lines (the last line starting with :data:`MARKER`), or None."""
    for line in reversed(lines):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                return None
    return None


def run_preflight(pod: Pod, expect: Expect, rehearsal: bool = False) -> dict[str, Any]:
    """Probe ``pod`` and judge it against ``expect``.

    Returns:
        The facts, with ``problems`` (list of str; empty unless ``rehearsal``) and ``rehearsal`` (bool).
    Raises:
        PreflightFailed: a miss (and not a rehearsal), or the probe gave no facts (always).
        RunTimeout, PodLost: from :meth:`Pod.run`.
    """
    lines: list[str] = []
    result = pod.run(probe_command(expect.gpus), TIMEOUT_S, on_output=lines.append)
    facts = parse([ln.rstrip("\n") for ln in lines])
    if facts is None:
        tail = "".join(lines[-5:]).strip() or _(NO_OUTPUT)
        raise PreflightFailed(pod.id, [_(NO_FACTS).format(status=result.exit_status, tail=tail)], {})
    found = problems(facts, expect)
    facts["problems"], facts["rehearsal"] = found, rehearsal
    if found and not rehearsal:
        raise PreflightFailed(pod.id, found, facts)
    return facts
