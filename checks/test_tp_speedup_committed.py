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
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m

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
        pytest_distcheck.broken(_(m.TP_NOT_EVIDENCE).format(rel=rel, why=fixture, how=how))
    for key in ("started_utc", "finished_utc"):
        if in_the_future(result.get(key)):
            pytest_distcheck.broken(_(m.TP_IN_THE_FUTURE).format(rel=rel, key=key, when=result[key]))
    degrees = sorted({m["tp"] for m in result["measurements"]})
    if not {1, 2} <= set(degrees):
        pytest_distcheck.broken(_(m.TP_DEGREES).format(rel=rel, degrees=degrees))
    if not any(s["tp"] == 2 for s in result["speedups"]):
        pytest_distcheck.broken(_(m.TP_NO_SPEEDUP).format(rel=rel))
    bad = problems(result)
    if bad:
        more = _(m.TP_MORE_PROBLEMS).format(n=len(bad) - 3) if len(bad) > 3 else ""
        pytest_distcheck.broken(f"{rel}: " + "; ".join(bad[:3]) + more)
    png = path.parent / result["plot"]
    if not png.is_file():
        pytest_distcheck.broken(_(m.TP_NO_PLOT).format(rel=rel, plot=result["plot"], png=_rel(png, ws.root)))
    if png.read_bytes()[:8] != PNG_MAGIC:
        pytest_distcheck.broken(_(m.TP_NOT_PNG).format(rel=rel, png=_rel(png, ws.root)))
    experiment = ws.section("tp_inference").get("experiment", "tp-inference")
    try:
        cfg = budget_config(ws)
    except ConfigError as exc:
        pytest_distcheck.broken(str(exc))
    if cfg is None or experiment not in cfg.experiment_ceilings_usd:
        pytest_distcheck.broken(_(m.TP_NEEDS_BUDGET).format(path=_rel(ws.path, ws.root), experiment=experiment))
    ceiling = cfg.experiment_ceilings_usd[experiment]
    ledger_rel = cfg.ledger_rel
    try:
        rows = cfg.open_ledger().read()
    except ConfigError as exc:
        pytest_distcheck.broken(_(m.TP_LEDGER_UNPARSED).format(error=exc))
    run_id = result["run_id"]
    mine = [c for c in charges(rows) if c.run_id == run_id]
    if not mine:
        pytest_distcheck.broken(_(m.TP_NO_LEDGER_ROW).format(rel=rel, run=run_id, ledger=ledger_rel, how=how))
    fake = provenance.fixture_rows([c.row for c in mine])
    if fake:
        pytest_distcheck.broken(_(m.TP_FIXTURE_ROW).format(ledger=ledger_rel, line=fake[0].line, run=run_id))
    charge = mine[0]
    pod = result.get("pod")
    if not pod:
        pytest_distcheck.broken(_(m.TP_NO_POD).format(rel=rel, run=run_id, how=how))
    if pod["provider"] == "local":  # the DoD item says 2 *cloud* GPUs (red-team A05)
        pytest_distcheck.broken(_(m.TP_LOCAL_POD).format(rel=rel, how=how))
    named = {(c.row.provider, c.row.resource_id) for c in mine}
    if named != {(pod["provider"], pod["id"])}:
        pods = ", ".join(_(m.TP_POD).format(provider=p, pod=i) for p, i in sorted(named))
        pytest_distcheck.broken(_(m.TP_OTHER_POD).format(rel=rel, provider=pod["provider"], pod=pod["id"], run=run_id,
                                                         named=pods))
    if charge.row.experiment != experiment:
        pytest_distcheck.broken(_(m.TP_OTHER_EXPERIMENT).format(ledger=ledger_rel, line=charge.row.line, run=run_id,
                                                                actual=charge.row.experiment or "-",
                                                                experiment=experiment))
    if charge.usd > ceiling:
        pytest_distcheck.broken(_(m.TP_OVER_CEILING).format(ledger=ledger_rel, line=charge.row.line, run=run_id,
                                                            cost=f"{charge.usd:.4f}", experiment=experiment,
                                                            ceiling=ceiling))
    code = ws.section("tp_inference").get("code")
    if code:  # the result must record every code file of the lab, unchanged since it ran
        required = [f"{code}/{p.name}" for p in sorted(ws.resolve(code).glob("*.py"))]
        require_fresh(result, required, root=ws.root, where=rel, command=how)
    require_committed([path, png], ws.root)
    best = max(result["speedups"], key=lambda s: s["decode"])
    from pytest_distcheck.budget.accounting import provider_confirmed

    label = provenance.ledger_label(provider_confirmed(rows, run_id))
    return _(m.TP_SUMMARY).format(
        label=label, rel=rel, count=result["device"]["count"], device=result["device"]["name"],
        backend=result["backend"], run=run_id, cost=f"{charge.usd:.4f}", ceiling=ceiling,
        settled=_(m.SETTLED if charge.settled else m.OPEN), speedup=f"{best['decode']:.2f}", tp=best["tp"],
        batch=best["batch_size"], prompt=best["prompt_len"])


@pytest.mark.local
@pytest.mark.dod(ITEM)
def test_tp_speedup_committed(distcheck_workspace, distcheck_log, distcheck_evidence):
    from pytest_distcheck.dod import provenance
    from pytest_distcheck.phase35.tp_result import load_result

    ws = distcheck_workspace
    how = ws.item(ITEM).how
    section = ws.section("tp_inference")
    if "results_dir" not in section:
        pytest_distcheck.broken(_(m.NEEDS_RESULTS_DIR).format(path=_rel(ws.path, ws.root)))
    results_dir = ws.resolve(section["results_dir"])
    files = sorted(results_dir.glob("*.json"))
    if not files:
        pytest_distcheck.pending(_(m.NO_TP_RESULT).format(dir=section["results_dir"]), how)
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
        found = ", ".join(_(m.FOUND_RESULT).format(path=_rel(p, ws.root), ranks=r["world_size"],
                                                   count=r["device"]["count"], device=r["device"]["type"],
                                                   backend=r["backend"]) for p, r in results)
        pytest_distcheck.pending(_(m.NO_GPU_RESULT).format(found=found), how)
    summaries = [_check_gpu_result(p, r, ws, how) for p, r in gpu]
    distcheck_log(_(m.TP_TITLE), "\n".join(summaries))
    labels = sorted({s.split(":", 1)[0] for s in summaries})
    distcheck_evidence(flags=[provenance.SELF_REPORTED])
    pytest_distcheck.done(_(m.TP_DONE).format(labels=f" {_(m.AND)} ".join(labels),
                                               results=m.gpu_results(len(summaries))))
