"""DoD item ddp-allreduce-logged: DDP runs on CPU with 2 gloo processes and its all-reduce time is logged.

The log at ``[ddp] committed_log`` must also be committed as it is (pytest_distcheck.committed asks git).
"""

from __future__ import annotations

import json

import pytest

import pytest_distcheck
from pytest_distcheck.bandwidth import check_sanity, format_sweep, load_result
from pytest_distcheck.committed import require_committed
from pytest_distcheck.errors import ConfigError

SIZES = [4096 * 4**k for k in range(8)]  # 4 KiB .. 64 MiB, as the lab's LabConfig
WORLD_SIZE = 2


@pytest.mark.local
@pytest.mark.dod("ddp-allreduce-logged")
@pytest.mark.world_size(WORLD_SIZE)
def test_ddp_lab_runs_live_on_two_gloo_ranks(dist_world, distcheck_workspace, distcheck_log, distcheck_evidence):
    from experiments.ddp_cpu import lab  # imports torch: only when the live run is selected

    assert list(lab.LabConfig.sizes_bytes) == SIZES, "the lab's sweep sizes changed; update SIZES"
    fresh = dist_world.run(lab.run, lab.LabConfig(reps=3), timeout=300)[0]
    # The live log is kept (not committed) so a learner can compare it with the committed one.
    path = distcheck_workspace.resolve(distcheck_workspace.section("ddp")["live_log"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fresh, indent=2) + "\n")
    try:
        check_sanity(load_result(path), path, WORLD_SIZE, SIZES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    distcheck_log(f"DDP lab, live on {WORLD_SIZE} gloo ranks (log: {path})", lab.format_table(fresh))
    distcheck_evidence(path, flags=["confirmed"])
    pytest_distcheck.done(f"evidence checked, confirmed: the lab ran live on {WORLD_SIZE} gloo ranks in this run")


@pytest.mark.local
@pytest.mark.dod("ddp-allreduce-logged")
def test_committed_allreduce_log_is_valid(distcheck_workspace, distcheck_log, distcheck_evidence):
    rel = distcheck_workspace.section("ddp")["committed_log"]
    path = distcheck_workspace.resolve(rel)
    item = distcheck_workspace.item("ddp-allreduce-logged")
    if not path.is_file():
        pytest_distcheck.pending(f"no committed all-reduce log at {rel}", item.how)
    distcheck_evidence(path, path.with_suffix(".png"))
    try:
        data = load_result(path)
        check_sanity(data, rel, WORLD_SIZE, SIZES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    require_committed([path], distcheck_workspace.root)
    distcheck_log(f"DDP lab, committed log {rel} (ran on {data['host']['cpu']}, {data['backend']})",
                  format_sweep(data["allreduce_sweep"]))
