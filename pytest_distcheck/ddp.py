"""DDP against one process: a lab's model trained a few steps under ``DistributedDataParallel`` on every
rank, and the same steps on the full batch in one process, compared with ``torch.testing.assert_close``.

With a mean-reduced loss and equal shards, the average of the shards' gradients is the full batch's
gradient, so every replica takes the single process's step (Li et al. 2020, "PyTorch Distributed",
VLDB, sec. 3). :func:`against_one_process` runs on the ranks and returns plain data; :func:`problem`
judges it wherever the verdict is made (no torch needed there).
"""

from __future__ import annotations

from typing import Any

from pytest_distcheck.i18n import N_, _

# What a lab module must offer the live check: LabConfig() with defaults, build_model(cfg) -> nn.Module,
# batch(cfg, step) -> (inputs, targets) of the global batch, loss(output, target) -> scalar tensor.
LAB_API = ("LabConfig", "build_model", "batch", "loss")
LR = 0.05  # plain SGD, the lab's own optimiser
# torch.testing.assert_close's float32 defaults: DDP only reorders the sums of the gradient average.
RTOL, ATOL = 1.3e-6, 1e-5

LIVE_DONE = N_("evidence checked, confirmed: DDP equals one process and all-reduce was timed live on {n} gloo "
               "ranks")
MISSING_API = N_("the lab module {module} lacks {names}: the live check builds the lab's model and data through "
                 "LabConfig(), build_model(cfg), batch(cfg, step) and loss(output, target)")
UNEVEN_BATCH = "the lab's batch(cfg, step) has {n} samples, which do not split into {world} equal shards"
RANKS_DIFFER = N_("after {steps} DDP steps the replicas differ across ranks (rank {ranks} against rank 0): DDP "
                  "broadcasts the initial weights and averages every gradient, so they must be identical")
NOT_ONE_PROCESS = N_("after {steps} steps, rank {rank}'s DDP model differs from one process training the same model "
                     "on the full batch (torch.testing.assert_close, rtol={rtol:g}, atol={atol:g}): {detail} -- with "
                     "equal shards DDP's averaged gradient is the full batch's only for a loss that averages over "
                     "the samples (not a sum) and a model without batch statistics (BatchNorm needs SyncBatchNorm)")
NOT_TRAINED = N_("the lab's model did not change in {steps} SGD steps (largest parameter change {change:.3g}, "
                 "lr {lr:g}): nothing was trained, so DDP's agreement with one process shows nothing")


def against_one_process(lab: Any, steps: int) -> dict[str, Any]:
    """On every rank of the default group: train ``lab.build_model(cfg)`` for ``steps`` SGD steps (lr
    :data:`LR`) under DDP, each rank on its shard of ``lab.batch(cfg, step)``, and a copy of the same initial
    weights on the whole batch; compare the two with ``torch.testing.assert_close`` (:data:`RTOL`,
    :data:`ATOL`) and the replicas across ranks with ``torch.equal``.

    Args:
        lab: an object with the names of :data:`LAB_API` (the lab module).
        steps: training steps, >= 1.

    Returns:
        plain data: ``steps``, ``global_batch``, ``parameters``, ``ranks_differing`` (ranks whose replica is
        not identical to rank 0's),
        ``max_abs_diff_vs_single_process``, ``max_abs_change`` (largest change of a weight), ``rtol``,
        ``atol``, ``mismatch`` (assert_close's message, or None); or ``{"error": text}`` for an uneven batch.
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = lab.LabConfig()
    model = DDP(lab.build_model(cfg))  # broadcasts rank 0's initial weights
    single = lab.build_model(cfg)
    single.load_state_dict(model.module.state_dict())  # one process starts from the same weights
    start = _flat(single)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    single_opt = torch.optim.SGD(single.parameters(), lr=LR)
    n = 0
    for step in range(steps):
        x, y = lab.batch(cfg, step)
        n = len(x)
        if n % world:
            return {"error": UNEVEN_BATCH.format(n=n, world=world)}
        shard = slice(rank * n // world, (rank + 1) * n // world)
        opt.zero_grad()
        lab.loss(model(x[shard]), y[shard]).backward()
        opt.step()
        single_opt.zero_grad()
        lab.loss(single(x), y).backward()
        single_opt.step()
    flat, ref = _flat(model.module), _flat(single)
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    mismatch = None
    try:
        torch.testing.assert_close(flat, ref, rtol=RTOL, atol=ATOL)
    except AssertionError as exc:
        mismatch = " ".join(str(exc).split())
    return {"steps": steps, "global_batch": n, "parameters": flat.numel(),
            "ranks_differing": [i for i, g in enumerate(gathered) if not torch.equal(gathered[0], g)],
            "max_abs_diff_vs_single_process": float((flat - ref).abs().max()) if flat.numel() else 0.0,
            "max_abs_change": float((ref - start).abs().max()) if flat.numel() else 0.0,
            "rtol": RTOL, "atol": ATOL, "mismatch": mismatch}


def _flat(module):
    import torch

    params = [p.detach().flatten() for p in module.parameters()]
    return torch.cat(params) if params else torch.zeros(0)


def problem(runs: list[dict[str, Any]]) -> str | None:
    """Why the ranks' :func:`against_one_process` results (rank order) do not show DDP equal to one process
    that trained; ``None`` when they do."""
    for rank, r in enumerate(runs):
        if "error" in r:
            return r["error"]
        if r["ranks_differing"]:
            return _(RANKS_DIFFER).format(steps=r["steps"], ranks=", ".join(map(str, r["ranks_differing"])))
        if r["mismatch"]:
            return _(NOT_ONE_PROCESS).format(steps=r["steps"], rank=rank, rtol=r["rtol"], atol=r["atol"],
                                          detail=r["mismatch"])
        if not r["max_abs_change"] > r["atol"]:
            return _(NOT_TRAINED).format(steps=r["steps"], change=r["max_abs_change"], lr=LR)
    return None
