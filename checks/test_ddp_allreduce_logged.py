"""DoD item ddp-allreduce-logged: DDP runs on CPU with 2 gloo processes and its all-reduce time is logged.

The log at ``[ddp] committed_log`` must also be committed as it is (pytest_distcheck.committed asks git).
"""

from __future__ import annotations

import json

import pytest

import pytest_distcheck
from pytest_distcheck.bandwidth import check_sanity, format_sweep, load_result
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError


def _run_counting_all_reduces(run, cfg):
    """On a rank: ``run(cfg)`` and how many ``torch.distributed.all_reduce`` calls it made (red-team A11:
    a run() returning a canned log runs none). Sent to the ranks by value."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    real, calls = c10d.all_reduce, [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    dist.all_reduce = c10d.all_reduce = counted
    try:
        return run(cfg), calls[0]
    finally:
        dist.all_reduce = c10d.all_reduce = real


def _claimed_all_reduces(log: dict) -> int:
    """The timed all-reduces a lab log reports: each sweep row's repetitions and each DDP bucket's."""
    sweep = sum(int(row.get("reps", 0)) for row in log.get("allreduce_sweep") or [] if isinstance(row, dict))
    return sweep + len((log.get("ddp") or {}).get("bucket_allreduce") or [])


SIZES = [4096 * 4**k for k in range(8)]  # 4 KiB .. 64 MiB, as the lab's LabConfig
WORLD_SIZE = 2


@pytest.mark.local
@pytest.mark.dod("ddp-allreduce-logged")
@pytest.mark.world_size(WORLD_SIZE)
def test_ddp_lab_runs_live_on_two_gloo_ranks(dist_world, distcheck_workspace, distcheck_log, distcheck_evidence):
    from experiments.ddp_cpu import lab  # imports torch: only when the live run is selected

    assert list(lab.LabConfig.sizes_bytes) == SIZES, "the lab's sweep sizes changed; update SIZES"
    runs = dist_world.run(_run_counting_all_reduces, lab.run, lab.LabConfig(reps=3), timeout=300)
    fresh, ran = runs[0][0], min(n for _, n in runs)
    # The live log is kept (not committed) so a learner can compare it with the committed one.
    path = distcheck_workspace.resolve(distcheck_workspace.section("ddp")["live_log"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fresh, indent=2) + "\n")
    try:
        check_sanity(load_result(path), path, WORLD_SIZE, SIZES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    if not isinstance(fresh, dict) or ran < _claimed_all_reduces(fresh):
        claimed = _claimed_all_reduces(fresh) if isinstance(fresh, dict) else "?"
        pytest_distcheck.broken(f"the lab's log claims {claimed} timed all-reduces (sweep and DDP buckets) but "
                                f"the ranks ran {ran}: the log must come from the run itself")
    distcheck_log(f"DDP lab, live on {WORLD_SIZE} gloo ranks (log: {path})", lab.format_table(fresh))
    distcheck_evidence(path, flags=[provenance.CONFIRMED])
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
