"""DoD item ddp-allreduce-logged: DDP runs on CPU with 2 gloo processes and its all-reduce time is logged.

The live check does the kit's own work on 2 gloo ranks: it builds the lab's model and data through the lab's
API, trains a few steps under DDP against the same steps in one process (:mod:`pytest_distcheck.ddp`) and
times a short all-reduce sweep (:func:`pytest_distcheck.bandwidth.allreduce_sweep`); the full sweep is the
committed log's, made by the lab command. The lab is imported by name on the ranks only, never in this
process (under ``--gate`` it decides the verdict): only JSON text comes back. Outside the gate a passing live
run is reused while the kit, this check, the lab's package and the workspace file are unchanged
(:mod:`pytest_distcheck.live_cache`). The log at ``[ddp] committed_log`` must be committed as it is.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

import pytest_distcheck
from pytest_distcheck import ddp, live_cache
from pytest_distcheck.bandwidth import check_sanity, format_sweep, load_result
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m

ITEM = "ddp-allreduce-logged"
LAB = "experiments.ddp_cpu.lab"
WORLD_SIZE = 2
SIZES = [4096 * 4**k for k in range(8)]  # the committed log's sweep: 4 KiB .. 64 MiB, as the lab's LabConfig
# The live run: enough to show DDP equal to one process and to time small and large messages.
LIVE_STEPS = 3
LIVE_SIZES = (4096, 256 * 1024, 4 * 2**20)  # 4 KiB, 256 KiB, 4 MiB
LIVE_WARMUP, LIVE_REPS = 3, 5


def _live_run_on_rank(root: str, module: str) -> str:
    """On a rank: import the lab ``module`` by name from the workspace ``root`` (last on ``sys.path``: the
    gate's sub-session never has it), compare DDP with one process on its model and data, and time the
    live sweep. Returns JSON text (plain data whatever the lab returns): ``{"missing": [names]}`` when the
    lab lacks part of :data:`pytest_distcheck.ddp.LAB_API`, else the live log."""
    import importlib
    import json
    import sys

    import torch
    import torch.distributed as dist

    from pytest_distcheck.bandwidth import allreduce_sweep
    from pytest_distcheck.phase35.hostinfo import describe_host

    if root not in sys.path:
        sys.path.append(root)
        importlib.invalidate_caches()
    lab = importlib.import_module(module)
    missing = [name for name in ddp.LAB_API if not callable(getattr(lab, name, None))]
    if missing:
        return json.dumps({"missing": missing})
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result = ddp.against_one_process(lab, LIVE_STEPS)
    sweep = allreduce_sweep(LIVE_SIZES, LIVE_WARMUP, LIVE_REPS) if "error" not in result else []
    return json.dumps({"schema": "distcheck/ddp-live/1", "lab": module, "started_utc": started,
                       "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       "world_size": dist.get_world_size(), "backend": dist.get_backend(),
                       "torch_version": torch.__version__, "host": describe_host(), "ddp": result,
                       "allreduce_sweep": sweep}, indent=2)


def _table(log: dict) -> str:
    d = log["ddp"]
    return _(m.DDP_AGAINST_ONE).format(
        steps=d["steps"], parameters=d["parameters"], batch=d["global_batch"], n=log["world_size"],
        backend=log["backend"], diff=f"{d['max_abs_diff_vs_single_process']:.2e}", rtol=f"{d['rtol']:g}",
        atol=f"{d['atol']:g}") + "\n" + format_sweep(log["allreduce_sweep"])


@pytest.mark.local
@pytest.mark.dod(ITEM)
@pytest.mark.world_size(WORLD_SIZE)
def test_ddp_lab_runs_live_on_two_gloo_ranks(dist_world, distcheck_workspace, distcheck_log, distcheck_evidence,
                                             pytestconfig):
    import json

    root = distcheck_workspace.root
    path = distcheck_workspace.resolve(distcheck_workspace.section("ddp")["live_log"])
    title = _(m.DDP_LIVE_TITLE).format(n=WORLD_SIZE, path=path)
    key = None
    if not live_cache.gate_on(pytestconfig):
        lab_code = live_cache.python_files(root / LAB.split(".")[0])
        key = live_cache.content_key([Path(__file__), distcheck_workspace.path, *lab_code])
        record = live_cache.lookup(root, ITEM, key)
        if record is not None:  # the live log it wrote is unchanged: its table, in this run's language
            title = _(m.DDP_REUSED_TITLE).format(n=WORLD_SIZE, path=path, when=record["passed_utc"])
            distcheck_log(title, _table(json.loads(path.read_text(encoding="utf-8"))))
            distcheck_evidence(path, flags=[live_cache.CACHED])
            pytest_distcheck.done(_(live_cache.CACHED_DONE).format(when=record["passed_utc"], cache=live_cache.FOLDER))
    runs = [json.loads(text) for text in dist_world.run(_live_run_on_rank, str(root), LAB, timeout=300)]
    if "missing" in runs[0]:
        pytest_distcheck.broken(_(ddp.MISSING_API).format(module=LAB, names=", ".join(runs[0]["missing"])))
    why = ddp.problem([run["ddp"] for run in runs])
    if why:
        pytest_distcheck.broken(why)
    # The live log is kept (not committed) so a learner can compare it with the committed one.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(runs[0], indent=2) + "\n")
    table = _table(runs[0])
    distcheck_log(title, table)
    distcheck_evidence(path, flags=[provenance.CONFIRMED])
    if key is not None:
        live_cache.remember(root, ITEM, key, {"passed_utc": runs[0]["finished_utc"]}, [path])
    pytest_distcheck.done(_(ddp.LIVE_DONE).format(n=WORLD_SIZE))


@pytest.mark.local
@pytest.mark.dod(ITEM)
def test_committed_allreduce_log_is_valid(distcheck_workspace, distcheck_log, distcheck_evidence):
    rel = distcheck_workspace.section("ddp")["committed_log"]
    path = distcheck_workspace.resolve(rel)
    item = distcheck_workspace.item(ITEM)
    if not path.is_file():
        pytest_distcheck.pending(_(m.NO_DDP_LOG).format(rel=rel), item.how)
    distcheck_evidence(path, path.with_suffix(".png"))
    try:
        data = load_result(path)
        check_sanity(data, rel, WORLD_SIZE, SIZES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    # The plot is recorded as evidence beside the log, so it is committed with it (the lab says commit both).
    plot = path.with_suffix(".png")
    require_committed([path, *([plot] if plot.is_file() else [])], distcheck_workspace.root)
    distcheck_log(_(m.DDP_COMMITTED_TITLE).format(rel=rel, cpu=data["host"]["cpu"], backend=data["backend"]),
                  format_sweep(data["allreduce_sweep"]))
