"""DoD item tp-speedup-committed: TP inference ran on 2 cloud GPUs within its ceiling; the curve is committed.

Done only when a committed result in ``[tp_inference] results_dir`` was produced on CUDA with at least
2 GPUs, measures TP 1 and TP 2, has speedups that agree with its own latencies, has its PNG beside it,
and its run id has ledger rows (``[budget] ledger``) counted against ``[tp_inference] experiment``
whose cost is within ``[budget.experiment_ceilings_usd]`` for it, and names the pod (provider, id) those
rows name. The kit's own synthetic fixtures are never evidence. The result and the ledger are typed or
copied on the learner's machine, so a pass is *self-reported*, a reconciled row in the ledger included
(it is read, not asked of the provider in this run; :mod:`pytest_distcheck.dod.provenance`). It is stale
when a code file of the lab (``[tp_inference] code``, ``*.py``) changed since the result was produced (or
the result does not record it). CPU results are read (and must be valid) but are not evidence for this item.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed
from pytest_distcheck.errors import ConfigError

ITEM = "tp-speedup-committed"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _check_gpu_result(path: Path, result: dict, ws, how: str) -> str:
    """Return a one-line summary, or stop the check with broken/pending naming what is wrong."""
    from pytest_distcheck.budget.accounting import charges
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.dod import provenance
    from pytest_distcheck.evidence import in_the_future, require_fresh
    from pytest_distcheck.phase35.tp_result import problems

    rel = _rel(path, ws.root)
    fixture = provenance.fixture_result(path, result)
    if fixture:
        pytest_distcheck.broken(f"{rel}: not evidence: {fixture}; a GPU result must come from your own paid run "
                                f"({how})")
    for key in ("started_utc", "finished_utc"):
        if in_the_future(result.get(key)):
            pytest_distcheck.broken(f"{rel}: dated in the future ({key} {result[key]}); a result is stamped when "
                                    "it is measured")
    degrees = sorted({m["tp"] for m in result["measurements"]})
    if not {1, 2} <= set(degrees):
        pytest_distcheck.broken(f"{rel}: measures TP degrees {degrees}; expected at least 1 and 2")
    if not any(s["tp"] == 2 for s in result["speedups"]):
        pytest_distcheck.broken(f"{rel}: no speedup at TP 2 (no batch size and prompt length measured at both "
                                "TP 1 and TP 2)")
    bad = problems(result)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        pytest_distcheck.broken(f"{rel}: " + "; ".join(bad[:3]) + more)
    png = path.parent / result["plot"]
    if not png.is_file():
        pytest_distcheck.broken(f"{rel}: plot {result['plot']!r} not found at {_rel(png, ws.root)}")
    if png.read_bytes()[:8] != PNG_MAGIC:
        pytest_distcheck.broken(f"{rel}: plot {_rel(png, ws.root)} is not a PNG file")
    experiment = ws.section("tp_inference").get("experiment", "tp-inference")
    try:
        cfg = budget_config(ws)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    if cfg is None or experiment not in cfg.experiment_ceilings_usd:
        pytest_distcheck.broken(f"{_rel(ws.path, ws.root)}: needs [budget] ledger and "
                                f"[budget.experiment_ceilings_usd] {experiment} to check the run's cost")
    ceiling = cfg.experiment_ceilings_usd[experiment]
    ledger_rel = cfg.ledger_rel
    try:
        rows = cfg.open_ledger().read()
    except ConfigError as exc:
        pytest_distcheck.broken(f"the ledger does not parse: {exc}")
    run_id = result["run_id"]
    mine = [c for c in charges(rows) if c.run_id == run_id]
    if not mine:
        pytest_distcheck.broken(
            f"{rel}: run_id {run_id!r} has no row in the ledger {ledger_rel}; a paid result must come "
            f"from a run under the budget guard ({how})"
        )
    fake = provenance.fixture_rows([c.row for c in mine])
    if fake:
        pytest_distcheck.broken(f"{ledger_rel} line {fake[0].line}: run {run_id!r} is a row of the kit's own "
                                "synthetic fixtures, never evidence of a paid run")
    charge = mine[0]
    pod = result.get("pod")
    if not pod:
        pytest_distcheck.broken(f"{rel}: names no pod (provider, id), so it cannot be tied to the ledger rows of "
                                f"run {run_id!r}; results written by {how} record it")
    if pod["provider"] == "local":  # the DoD item says 2 *cloud* GPUs (red-team A05)
        pytest_distcheck.broken(f"{rel}: ran on provider local, not a cloud pod; the item needs 2 cloud GPUs ({how})")
    named = {(c.row.provider, c.row.resource_id) for c in mine}
    if named != {(pod["provider"], pod["id"])}:
        pytest_distcheck.broken(f"{rel}: ran on {pod['provider']} pod {pod['id']!r}, but the ledger rows of run "
                                f"{run_id!r} name {', '.join(f'{p} pod {i!r}' for p, i in sorted(named))}")
    if charge.row.experiment != experiment:
        pytest_distcheck.broken(
            f"{ledger_rel} line {charge.row.line}: run {run_id!r} is counted against experiment "
            f"{charge.row.experiment or '-'!r}, expected {experiment!r}"
        )
    if charge.usd > ceiling:
        pytest_distcheck.broken(
            f"{ledger_rel} line {charge.row.line}: run {run_id!r} cost ${charge.usd:.4f}, above the "
            f"{experiment} ceiling ${ceiling}"
        )
    code = ws.section("tp_inference").get("code")
    if code:  # the result must record every code file of the lab, unchanged since it ran
        required = [f"{code}/{p.name}" for p in sorted(ws.resolve(code).glob("*.py"))]
        require_fresh(result, required, root=ws.root, where=rel, command=how)
    require_committed([path, png], ws.root)
    best = max(result["speedups"], key=lambda s: s["decode"])
    from pytest_distcheck.budget.accounting import provider_confirmed

    label = provenance.ledger_label(provider_confirmed(rows, run_id))
    return (f"{label}: {rel}: {result['device']['count']} x {result['device']['name']} ({result['backend']}), "
            f"run {run_id} cost ${charge.usd:.4f} of ${ceiling} ({'settled' if charge.settled else 'open'}); "
            f"best decode speedup {best['decode']:.2f}x at TP {best['tp']}, batch {best['batch_size']}, "
            f"prompt {best['prompt_len']}")


@pytest.mark.local
@pytest.mark.dod(ITEM)
def test_tp_speedup_committed(distcheck_workspace, distcheck_log, distcheck_evidence):
    from pytest_distcheck.dod import provenance
    from pytest_distcheck.phase35.tp_result import load_result

    ws = distcheck_workspace
    how = ws.item(ITEM).how
    section = ws.section("tp_inference")
    if "results_dir" not in section:
        pytest_distcheck.broken(f"{_rel(ws.path, ws.root)}: [tp_inference] needs results_dir")
    results_dir = ws.resolve(section["results_dir"])
    files = sorted(results_dir.glob("*.json"))
    if not files:
        pytest_distcheck.pending(f"no result in {section['results_dir']}", how)
    distcheck_evidence(*files, *(p.with_suffix(".png") for p in files))
    results = []
    for path in files:
        try:
            results.append((path, load_result(path)))
        except ConfigError as exc:
            pytest_distcheck.broken(str(exc))
    gpu = [(p, r) for p, r in results
           if r["device"]["type"] == "cuda" and r["device"]["count"] >= 2 and r["world_size"] >= 2]
    if not gpu:
        found = ", ".join(f"{_rel(p, ws.root)} ({r['world_size']} ranks on {r['device']['count']} x "
                          f"{r['device']['type']}, {r['backend']})" for p, r in results)
        pytest_distcheck.pending(f"no result produced on CUDA with >= 2 GPUs yet (found: {found})", how)
    summaries = [_check_gpu_result(p, r, ws, how) for p, r in gpu]
    distcheck_log("TP inference speedup, committed GPU result(s)", "\n".join(summaries))
    labels = sorted({s.split(":", 1)[0] for s in summaries})
    distcheck_evidence(flags=[provenance.SELF_REPORTED])
    pytest_distcheck.done(f"evidence checked, {' and '.join(labels)}: {len(summaries)} GPU result(s) tied to "
                          "their ledger rows by run id and pod")
