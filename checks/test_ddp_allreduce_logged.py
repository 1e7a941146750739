"""DoD item ddp-allreduce-logged: DDP runs on CPU with 2 gloo processes and its all-reduce time is logged.

The live check runs the learner's lab on the ranks and believes its log only as far as the ranks back it:
the default process group ran at least as many collectives as the log times all-reduces (its sequence
number), every size the log times was all-reduced at least that many times on every rank (the kit's
wrapper records sizes), and the wrapper recorded no more all-reduces than the group ran collectives.
The lab is imported by name on the ranks only, never in this process: under ``--gate`` this process
decides the verdict, and lab code in it could reach the kit's records (red-team t3 H3, F). Only plain
data comes back: the log as JSON text, the counts, the lab's table as text. The log is judged as read
back from disk. The times themselves are the lab's. The log at ``[ddp] committed_log`` must also be
committed as it is (pytest_distcheck.committed asks git).
"""

from __future__ import annotations

import pytest

import pytest_distcheck
from pytest_distcheck.bandwidth import check_sanity, format_sweep, load_result
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.errors import ConfigError


def _run_lab_on_rank(root: str, module: str, reps: int) -> tuple[str, int | None, dict[int, int], list[int], str]:
    """On a rank: import the lab ``module`` by name from the workspace ``root`` (last on ``sys.path``: the
    gate's sub-session never has it) and run ``run(LabConfig(reps=reps))`` under
    :func:`_run_recording_all_reduces`. Returns plain data only: the log as JSON text, the collectives the
    default group ran, ``{bytes: all-reduces}``, the lab's sweep sizes (bytes) and its table (text)."""
    import importlib
    import json
    import sys

    if root not in sys.path:
        sys.path.append(root)
        importlib.invalidate_caches()
    lab = importlib.import_module(module)
    log, ran, sizes = _run_recording_all_reduces(lab.run, lab.LabConfig(reps=reps))
    return json.dumps(log, indent=2), ran, sizes, list(lab.LabConfig.sizes_bytes), str(lab.format_table(log))


def _run_recording_all_reduces(run, cfg):
    """On a rank: ``run(cfg)``, the collectives the default process group ran meanwhile and the byte size of
    every ``torch.distributed.all_reduce`` on it, ``{bytes: calls}``.

    The count is the group's own collective sequence number (red-team t2 B1b: a Python counter in the
    wrapper's closure can be bumped without any collective); ``None`` on a torch without it. The sizes come
    from the wrapper (red-team t2 B1a: one-element all-reduces as many as the log claims)."""
    from collections import Counter

    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    group = c10d._get_default_group()

    def sequence_number():
        try:
            return group._get_sequence_number_for_group()
        except (AttributeError, RuntimeError):  # torch without it, or a backend that does not keep one
            return None

    real, sizes = c10d.all_reduce, Counter()

    def recorded(tensor, *args, **kwargs):
        if kwargs.get("group", args[1] if len(args) > 1 else None) in (None, group):
            sizes[tensor.numel() * tensor.element_size()] += 1
        return real(tensor, *args, **kwargs)

    before = sequence_number()
    dist.all_reduce = c10d.all_reduce = recorded
    try:
        result = run(cfg)
    finally:
        dist.all_reduce = c10d.all_reduce = real
    after = sequence_number()
    return result, (after - before if None not in (before, after) else None), dict(sizes)


def _claimed_all_reduces(log: dict) -> dict[int, int]:
    """The timed all-reduces a lab log reports, ``{bytes: count}``: each sweep row's repetitions of its size
    and each DDP bucket's all-reduce."""
    claimed: dict[int, int] = {}
    rows = [(r.get("size_bytes"), r.get("reps", 0)) for r in log.get("allreduce_sweep") or [] if isinstance(r, dict)]
    buckets = [(b.get("bytes"), 1) for b in (log.get("ddp") or {}).get("bucket_allreduce") or [] if isinstance(b, dict)]
    for size, n in rows + buckets:
        claimed[int(size or 0)] = claimed.get(int(size or 0), 0) + int(n)
    return claimed


def _unbacked(log: dict, runs: list) -> str | None:
    """Why the ranks' records do not back the lab's log ``log`` (``None`` when they do); ``runs``: each rank's
    ``(result, collectives, {bytes: all-reduces})`` from :func:`_run_recording_all_reduces`."""
    claimed = _claimed_all_reduces(log)
    ran = min((n if n is not None else sum(sizes.values())) for _, n, sizes in runs)
    if ran < sum(claimed.values()):
        return (f"the lab's log claims {sum(claimed.values())} timed all-reduces (sweep and DDP buckets) but the "
                f"ranks ran {ran} collectives: the log must come from the run itself")
    for rank, (_, n, sizes) in enumerate(runs):
        if n is not None and sum(sizes.values()) > n:
            return (f"rank {rank}: the kit's wrapper recorded {sum(sizes.values())} all-reduces but the process "
                    f"group ran {n} collectives: its records were tampered with")
        for size, want in sorted(claimed.items()):
            if sizes.get(size, 0) < want:
                return (f"the lab's log claims {want} all-reduces of {size} B but rank {rank} all-reduced "
                        f"{sizes.get(size, 0)} tensors of that size: the log must come from the run itself")
    return None


SIZES = [4096 * 4**k for k in range(8)]  # 4 KiB .. 64 MiB, as the lab's LabConfig
WORLD_SIZE = 2


@pytest.mark.local
@pytest.mark.dod("ddp-allreduce-logged")
@pytest.mark.world_size(WORLD_SIZE)
def test_ddp_lab_runs_live_on_two_gloo_ranks(dist_world, distcheck_workspace, distcheck_log, distcheck_evidence):
    runs = dist_world.run(_run_lab_on_rank, str(distcheck_workspace.root), "experiments.ddp_cpu.lab", 3, timeout=300)
    text, _, _, sizes, table = runs[0]
    assert sizes == SIZES, "the lab's sweep sizes changed; update SIZES"
    # The live log is kept (not committed) so a learner can compare it with the committed one.
    path = distcheck_workspace.resolve(distcheck_workspace.section("ddp")["live_log"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    try:
        log = load_result(path)
        check_sanity(log, path, WORLD_SIZE, SIZES)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    unbacked = _unbacked(log, [run[:3] for run in runs])
    if unbacked:
        pytest_distcheck.broken(unbacked)
    distcheck_log(f"DDP lab, live on {WORLD_SIZE} gloo ranks (log: {path})", table)
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
