"""Where evidence comes from: the kit's own material is never the learner's evidence, and every piece of
evidence is *confirmed* (re-established in this run) or only *self-reported* (typed or copied by the learner).

- The kit's synthetic fixtures (``fixtures/**``) and the outputs of its bundled fake RunPod (pod ids
  :data:`FAKE_POD_ID`) are never evidence of a paid run; reference solutions (``solutions/``) and the course
  pages are teaching material, never the learner's work. Their fingerprints ship in
  ``pytest_distcheck/data/kit-fixtures.json`` (written by :mod:`pytest_distcheck.data.build`).
- A text is a copy when it *contains* the kit's prose (:func:`copied_from`): compared after
  :func:`pytest_distcheck.textnorm.comparable` (look-alike letters made one), in 5-word windows that match
  with one word dropped or changed in each, so filler added around a copy, look-alike letters or every 4th
  word dropped do not hide it. Design record: docs/design/gate.md.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import sys
from array import array
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_distcheck import textnorm

CONFIRMED, SELF_REPORTED = "confirmed", "self-reported"
# How far an item's evidence can be believed; any other flag of an item (copied, fast-quiz) fails the gate.
LABELS = (CONFIRMED, SELF_REPORTED)
MARKER = "SYNTHETIC"
# The bundled fake RunPod's pod ids (pytest_distcheck/pods/fake/state.py): "fake" + 4 digits + 6 hex digits.
FAKE_POD_ID = re.compile(r"fake\d{4}[0-9a-f]{6}")
SOLUTIONS = "solutions"
# The fixtures that could pose as evidence of a paid run, and the diagram pages of the kit's tests that pass
# the diagram check (fixtures/diagrams/README.md).
EVIDENCE_LIKE = ("tp_inference", "budget")
RIGHT_DIAGRAMS = "diagrams/ok-*.md"
# A Mermaid drawing shorter than this may well be drawn the same way twice.
MIN_DRAWING = 80
# A copy: a text holding this share of one source's windows (a source of at least MIN_WINDOWS), or this many
# windows of the kit's texts together (pieced from several).
CONTAINED, MIN_WINDOWS, PIECED = 0.5, 20, 200
COPY_OF = "it holds {pct:.0%} of {what} {src} ({n} of its {total} 5-word runs, one word in each may differ)"
PIECED_FROM = "{n} of its 5-word runs are the kit's ({parts})"


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


def drawings(text: str) -> list[str]:
    """The drawing of each Mermaid block of a Markdown text (``drawing_key`` of its :func:`textnorm.comparable`
    source: comments, spacing, look-alike letters and case aside) at least :data:`MIN_DRAWING` long."""
    from pytest_distcheck.diagram.markdown import drawing_key, mermaid_blocks

    keys = (drawing_key(textnorm.comparable(b.source)) for b in mermaid_blocks(text))
    return [k for k in keys if len(k) >= MIN_DRAWING]


def _prose_words(text: str) -> list[str]:
    """The comparable words of a Markdown text but its Mermaid blocks and its citations (two readers citing one
    place quote the same installed source)."""
    from pytest_distcheck.citations.syntax import CITATION
    from pytest_distcheck.diagram.markdown import without_mermaid

    return textnorm.words(CITATION.sub(" ", without_mermaid(text)))


def windows(text: str) -> list[tuple[int, ...]]:
    """:func:`textnorm.windows` of a Markdown text's prose (:func:`_prose_words`)."""
    return textnorm.windows(_prose_words(text))


@functools.lru_cache(maxsize=64)
def _unpack(text: str) -> tuple[tuple[int, ...], ...]:
    data = array("I")
    data.frombytes(base64.b64decode(text))
    if sys.byteorder == "big":
        data.byteswap()
    return tuple(tuple(data[i:i + textnorm.WINDOW]) for i in range(0, len(data), textnorm.WINDOW))


@functools.cache
def shipped_fingerprints() -> dict[str, Any]:
    """The fingerprints the kit ships (``data/kit-fixtures.json``), read once."""
    return json.loads(resources.files("pytest_distcheck.data").joinpath("kit-fixtures.json").read_text("utf-8"))


def _in_place(path: Path, ref: str) -> bool:
    """Whether ``path`` is the kit's file ``ref`` where it lives (the reference workspace reads it there), as
    named, not resolved: a learner's path linking into ``solutions/`` is not the reference in place."""
    return Path(path).absolute().as_posix().endswith("/" + ref)


def _what(src: str) -> str:
    return "the reference solution" if src.startswith(SOLUTIONS + "/") else "the course page"


def contained(text: str, sources: Mapping[str, str]) -> tuple[dict[str, tuple[int, int]], int]:
    """How much of each source (``{path: packed windows}``) ``text`` holds: ``{path: (windows held, windows)}``
    for each source it holds any of, and how many of the text's own windows are some source's."""
    mine, held, kit = windows(text), {}, []
    for src, packed in sources.items():
        wins = _unpack(packed)
        n = textnorm.held(mine, wins)
        if n:
            held[src] = (n, len(wins))
            kit += wins
    return held, textnorm.held(kit, mine)


def _copied_text(path: Path, text: str, sources: Mapping[str, str]) -> str | None:
    if any(_in_place(path, s) for s in sources):
        return None  # a course page or reference where it lives: the kit's own, sharing text with its others
    held, kit = contained(text, sources)
    best = max(held, key=lambda s: held[s][0] / held[s][1], default=None)
    if best and held[best][1] >= MIN_WINDOWS and held[best][0] >= CONTAINED * held[best][1]:
        n, total = held[best]
        return COPY_OF.format(pct=n / total, what=_what(best), src=best, n=n, total=total)
    if kit >= PIECED:
        parts = ", ".join(f"{n} of {_what(s)} {s}" for s, (n, _) in sorted(held.items(), key=lambda kv: -kv[1][0])[:3])
        return PIECED_FROM.format(n=kit, parts=parts)
    return None


def copied_from(path: Path) -> str | None:
    """Why the evidence file ``path`` is a copy of the kit's material; ``None`` when it is not (or it is that
    file itself, in its place). A copy: a link to a reference file, the same bytes or parsed JSON, a text
    holding the kit's prose (:data:`COPY_OF`, :data:`PIECED_FROM`), or a Mermaid block that draws what a
    reference page or a right diagram of the kit's fixtures draws (:func:`drawings`)."""
    path = Path(path)
    if not path.is_file():
        return None
    kit = shipped_fingerprints()
    fp = kit[SOLUTIONS]
    data = path.read_bytes()
    same = fp["files"].get(digest(data)) or (fp["files"].get(json_digest(data) or "") if path.suffix == ".json"
                                               else None)
    if same and not _in_place(path, same):
        if path.resolve().as_posix().endswith("/" + same):
            return f"it links to the reference solution {same}"
        return f"it is the reference solution {same}" + (", byte for byte" if digest(data) in fp["files"] else
                                                         ", parsed")
    if path.suffix != ".md":
        return None
    text = data.decode("utf-8", errors="replace")
    why = _copied_text(path, text, kit["shingles"]["sources"])
    if why:
        return why
    for key in drawings(text):
        drawn = digest(key.encode())
        for ref, whose in ((fp["drawings"].get(drawn), "the reference solution"),
                           (kit["drawings"].get(drawn), "the kit's own fixture")):
            if ref and not _in_place(path, ref):
                return f"its Mermaid diagram is that of {whose} {ref} (comments, spacing and look-alike letters aside)"
    return None


def evidence_entry(paths: Iterable[Path], root: Path, flags: Iterable[str] = ()) -> dict[str, Any]:
    """What the ``distcheck_evidence`` fixture records for a check: each existing file (path relative to
    ``root``, sha256, and ``copied``: :func:`copied_from` or ``None``) and the check's ``flags``, plus
    ``copied`` when a file is a copy."""
    files = []
    for path in map(Path, paths):
        if not path.is_file():
            continue
        rel = str(path)
        for named in (path.absolute(), path.resolve()):  # the learner's name for it first, not a link's target
            try:
                rel = named.relative_to(Path(root).resolve()).as_posix()
                break
            except ValueError:
                continue
        files.append({"path": rel, "sha256": digest(path.read_bytes()), "copied": copied_from(path)})
    flags = list(flags) + (["copied"] if any(f["copied"] for f in files) else [])
    return {"files": files, "flags": list(dict.fromkeys(flags))}


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
    return SELF_REPORTED + (" (reconciled row in the ledger, not re-checked in this run)" if reconciled else "")
