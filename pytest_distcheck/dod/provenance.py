"""Where evidence comes from: the kit's own material is never the learner's evidence, and every piece of
evidence is *confirmed* (re-established in this run) or only *self-reported* (typed or copied by the learner).

The kit's synthetic fixtures (``fixtures/**``) and the outputs of its bundled fake RunPod (pod ids
:data:`FAKE_POD_ID`) are never evidence of a paid run; reference solutions (``solutions/``) and the course pages
are teaching material, never the learner's work. Their fingerprints ship in ``pytest_distcheck/data/kit-fixtures.json``
(written by :mod:`pytest_distcheck.data.build`); :mod:`pytest_distcheck.copies` finds copies of them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _

CONFIRMED, SELF_REPORTED = "confirmed", "self-reported"
# Their words in a reason (the report keeps the flags above as identifiers).
SELF_REPORTED_WORD = N_("self-reported")
RECONCILED_ROW = N_("self-reported (reconciled row in the ledger, not re-checked in this run)")
FAST_QUIZ = "fast-quiz"
# How far an item's evidence can be believed; any other flag of an item (copied) fails the gate.
LABELS = (CONFIRMED, SELF_REPORTED)
# Flags for a grader to look at that never fail the gate: a fast quiz attempt (an honest learner can be fast;
# answers computed from the shipped bank and typed at reading pace pass anyway: docs/ci/known-limitations.md).
NOTES = (FAST_QUIZ,)
MARKER = "SYNTHETIC"
# The bundled fake RunPod's pod ids (pytest_distcheck/pods/fake/state.py): "fake" + 4 digits + 6 hex digits.
FAKE_POD_ID = re.compile(r"fake\d{4}[0-9a-f]{6}")
SOLUTIONS = "solutions"
# The fixtures that could pose as evidence of a paid run, and the diagram pages of the kit's tests that pass
# the diagram check (fixtures/diagrams/README.md).
EVIDENCE_LIKE = ("tp_inference", "budget")
RIGHT_DIAGRAMS = "diagrams/ok-*.md"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def measurements_hash(result: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a result's measurements (canonical JSON), to recognise copied numbers."""
    return digest(json.dumps(result.get("measurements"), sort_keys=True, separators=(",", ":")).encode())


def json_digest(data: bytes) -> str | None:
    """The digest of a JSON file's parsed content, so other bytes of the same content match; ``None``: not JSON."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return "json:" + digest(json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode())


@functools.cache
def shipped_fingerprints() -> dict[str, Any]:
    """The fingerprints the kit ships (``data/kit-fixtures.json``), read once."""
    return json.loads(resources.files("pytest_distcheck.data").joinpath("kit-fixtures.json").read_text("utf-8"))


def fixture_result(path: Path, result: Mapping[str, Any]) -> str | None:
    """Why the result at ``path`` is not the learner's paid run: one of the kit's synthetic fixtures, or an
    output of a rehearsal or of the bundled fake provider; ``None`` when it is neither."""
    fp = shipped_fingerprints()
    file_hash = digest(Path(path).read_bytes())
    if file_hash in fp["files"]:
        return f"it is the kit's own synthetic fixture {fp['files'][file_hash]}"
    measured = fp["measurements"].get(measurements_hash(result))
    if measured:
        return f"its measurements are those of the kit's own synthetic fixture {measured}"
    if result.get("run_id") in fp["run_ids"]:
        return f"its run id {result['run_id']!r} is one of the kit's own synthetic fixtures"
    if MARKER in json.dumps(result):
        return f"it carries the marker {MARKER!r} of the kit's own synthetic fixtures"
    pod = result.get("pod") if isinstance(result.get("pod"), dict) else {}
    if FAKE_POD_ID.fullmatch(str(pod.get("id", ""))):
        return f"its pod {pod['id']!r} is one of the bundled fake RunPod's (a rehearsal), never a paid GPU"
    if (result.get("preflight") or {}).get("rehearsal"):
        return "its preflight record says it came from a rehearsal (`distcheck rehearse`), never a paid GPU"
    device, timer = result.get("device") or {}, (result.get("settings") or {}).get("timer")
    cuda = (result.get("versions") or {}).get("cuda")
    if device.get("type") == "cuda" and (timer != "cuda-events" or not cuda):
        return (f"it says CUDA but was timed with {timer!r} and records CUDA {cuda!r} (a CPU run relabelled): a GPU "
                "run records cuda-events and its CUDA version")
    return None


def fixture_rows(rows: Iterable[Any]) -> list[Any]:
    """Ledger rows that come from the kit's own fixtures (their run ids, or the marker in resource or pod) or from
    the bundled fake provider (a fake pod id)."""
    fp = shipped_fingerprints()
    return [r for r in rows if r.run_id in fp["run_ids"] or MARKER in f"{r.resource} {r.resource_id}".upper()
            or FAKE_POD_ID.fullmatch(str(r.resource_id))]


def ledger_label(reconciled: bool | None) -> str:
    """The table's word for evidence read from the spend ledger: always *self-reported*; ``reconciled`` adds
    that the provider's bill in the ledger was not re-checked in this run (such a row can be typed by hand)."""
    return _(RECONCILED_ROW if reconciled else SELF_REPORTED_WORD)
