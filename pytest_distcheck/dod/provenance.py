"""Where evidence comes from: the kit's own fixtures are never evidence, and every piece of evidence is
either *confirmed* or only *self-reported* (issue 13, point 3).

- The kit's synthetic fixtures (``fixtures/**``: results, ledgers) carry the marker ``SYNTHETIC`` and
  their fingerprints ship in ``pytest_distcheck/data/kit-fixtures.json`` (run ids, file hashes, the hash
  of each result's measurements), so a copy is recognised even with the marker and its source hashes
  edited (tests/test_gate_bypasses.py, bypass 6). Regenerate with
  ``python -m pytest_distcheck.dod.manifest checks/distcheck.toml`` (tests/test_dod_manifest.py).
- *confirmed*: the check re-established the evidence in this run (a live run, a citation resolved in
  the installed sources, a diagram compared with the plan) or a provider confirmed it.
  *self-reported*: the check can only verify that files typed or copied by the learner agree with each
  other (the quiz log, the spend ledger, a GPU result tied to ledger rows by run id and pod).
- Provider confirmation belongs to the spend-integrity work (issue 18): a run whose ledger rows the
  provider's bill confirms (:func:`pytest_distcheck.budget.accounting.provider_confirmed`, after
  ``distcheck budget --reconcile``) is *confirmed*; :func:`label` turns that answer into the table's word.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

CONFIRMED, SELF_REPORTED = "confirmed", "self-reported"
MARKER = "SYNTHETIC"


def measurements_hash(result: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a result's measurements (canonical JSON), to recognise copied numbers."""
    text = json.dumps(result.get("measurements"), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# The fixtures that could pose as evidence of a paid run: results and spend ledgers.
EVIDENCE_LIKE = ("tp_inference", "budget")


def fingerprints_of(fixtures_dir: Path, root: Path) -> dict[str, Any]:
    """The fingerprints of the kit's evidence-like fixtures (:data:`EVIDENCE_LIKE` under ``fixtures_dir``):
    run ids, file hashes, measurement hashes."""
    run_ids, files, measured = set(), {}, {}
    paths = sorted(p for sub in EVIDENCE_LIKE for p in (fixtures_dir / sub).rglob("*"))
    for path in paths:
        if path.suffix not in (".json", ".md") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        files["sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()] = rel
        if path.suffix == ".md":
            for line in path.read_text(encoding="utf-8").splitlines():
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 12 and cells[1] not in ("run_id", "") and not set(cells[1]) <= {"-"}:
                    run_ids.add(cells[1])
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("run_id"), str):
            run_ids.add(data["run_id"])
        if isinstance(data, dict) and data.get("measurements"):
            measured[measurements_hash(data)] = rel
    return {"marker": MARKER, "run_ids": sorted(run_ids), "files": files, "measurements": measured}


def shipped_fingerprints() -> dict[str, Any]:
    """The fingerprints the kit ships (``data/kit-fixtures.json``)."""
    ref = resources.files("pytest_distcheck.data").joinpath("kit-fixtures.json")
    return json.loads(ref.read_text(encoding="utf-8"))


def fixture_result(path: Path, result: Mapping[str, Any]) -> str | None:
    """Why the result at ``path`` is one of the kit's own fixtures; ``None`` when it is not."""
    fp = shipped_fingerprints()
    digest = "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest in fp["files"]:
        return f"it is the kit's own synthetic fixture {fp['files'][digest]}"
    measured = fp["measurements"].get(measurements_hash(result))
    if measured:
        return f"its measurements are those of the kit's own synthetic fixture {measured}"
    if result.get("run_id") in fp["run_ids"]:
        return f"its run id {result['run_id']!r} is one of the kit's own synthetic fixtures"
    text = json.dumps(result)
    if MARKER in text:
        return f"it carries the marker {MARKER!r} of the kit's own synthetic fixtures"
    return None


def fixture_rows(rows: Iterable[Any]) -> list[Any]:
    """Ledger rows that come from the kit's own fixtures (their run ids, or the marker in resource or pod)."""
    fp = shipped_fingerprints()
    return [r for r in rows if r.run_id in fp["run_ids"] or MARKER in f"{r.resource} {r.resource_id}".upper()]


def label(confirmed: bool | None) -> str:
    """The table's word for evidence: ``confirmed`` only when a provider (or a live run) confirmed it."""
    return CONFIRMED if confirmed else SELF_REPORTED
