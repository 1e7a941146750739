"""Where evidence comes from: the kit's own material is never the learner's evidence, and every piece of
evidence is *confirmed* (re-established in this run) or only *self-reported* (typed or copied by the learner).

- The kit's synthetic fixtures (``fixtures/**``) and the outputs of its bundled fake RunPod (pod ids
  :data:`FAKE_POD_ID`) are never evidence of a paid run; reference solutions (``solutions/``) and the course
  pages are teaching material, never the learner's work. Their fingerprints ship in
  ``pytest_distcheck/data/kit-fixtures.json``; regenerate with
  ``python -m pytest_distcheck.dod.manifest checks/distcheck.toml``.
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
# Words per window; a text holds a source's window when one of the window's 4-word subsequences (the window
# with one word dropped) is also one of the text's.
WINDOW = 5
# A copy: a text holding this share of one source's windows (a source of at least MIN_WINDOWS), or this many
# windows of the kit's texts together (pieced from several).
CONTAINED, MIN_WINDOWS, PIECED = 0.5, 20, 200
COPY_OF = "it holds {pct:.0%} of {what} {src} ({n} of its {total} 5-word runs, one word in each may differ)"
PIECED_FROM = "{n} of its 5-word runs are the kit's ({parts})"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def measurements_hash(result: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a result's measurements (canonical JSON), to recognise copied numbers."""
    return _digest(json.dumps(result.get("measurements"), sort_keys=True, separators=(",", ":")).encode())


def _json_digest(data: bytes) -> str | None:
    """The digest of a JSON file's parsed content, so other bytes of the same content match; ``None``: not JSON."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return "json:" + _digest(json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode())


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


def _hash(words: list[str]) -> int:
    return int.from_bytes(hashlib.sha256(" ".join(words).encode()).digest()[:4], "little")


def windows(text: str) -> list[tuple[int, ...]]:
    """Each :data:`WINDOW`-word window of a text's prose (:func:`_prose_words`) as the hashes of its
    subsequences with one word dropped (32 bits each)."""
    w = _prose_words(text)
    return [tuple(_hash(w[i:i + j] + w[i + j + 1:i + WINDOW]) for j in range(WINDOW))
            for i in range(len(w) - WINDOW + 1)]


def _variants(texts: Iterable[str]) -> set[int]:
    return {h for t in texts for win in windows(t) for h in win}


def _starting_texts(rel: Path, root: Path) -> list[Path]:
    """The learner's starting files a reference file ``solutions/<rel>`` may share text with: the file at
    ``<rel>`` and the Markdown files beside it (``docs/notes/TEMPLATE.md``)."""
    here = root / rel
    beside = sorted(p for p in here.parent.glob("*.md") if p != here) if here.parent.is_dir() else []
    return ([here] if here.is_file() else []) + beside


def text_sources(root: Path) -> dict[Path, list[Path]]:
    """The Markdown a learner's text must not be made of, each with the learner's starting files whose text it
    may share: the reference solutions' (``solutions/**/*.md``, README aside) and the course pages ``distcheck
    init`` ships (but the note skeleton under ``docs/notes/``, the learner's to fill, shared by the pages)."""
    from pytest_distcheck.phase_pack import PACK_GLOBS

    own = [g for g in PACK_GLOBS if g.startswith("docs/notes/")]
    skeleton = sorted({p for g in own for p in root.glob(g) if p.is_file()})
    solutions = root / SOLUTIONS
    out = {p: _starting_texts(p.relative_to(solutions), root)
           for p in sorted(solutions.rglob("*.md")) if p.name != "README.md"}
    pages = sorted({p for g in PACK_GLOBS if g.endswith(".md") and g not in own for p in root.glob(g) if p.is_file()})
    return out | {p: skeleton for p in pages}


def _pack(wins: list[tuple[int, ...]]) -> str:
    data = array("I", (h for win in wins for h in win))
    if sys.byteorder == "big":
        data.byteswap()
    return base64.b64encode(data.tobytes()).decode("ascii")


@functools.lru_cache(maxsize=64)
def _unpack(text: str) -> tuple[tuple[int, ...], ...]:
    data = array("I")
    data.frombytes(base64.b64decode(text))
    if sys.byteorder == "big":
        data.byteswap()
    return tuple(tuple(data[i:i + WINDOW]) for i in range(0, len(data), WINDOW))


def text_fingerprints(root: Path) -> dict[str, Any]:
    """The windows (:func:`windows`) of each of :func:`text_sources`, less those its starting files hold:
    ``{"window": WINDOW, "sources": {path: base64 of little-endian uint32, WINDOW per window}}``."""
    sources = {}
    for path, starts in text_sources(root).items():
        theirs = _variants(p.read_text(encoding="utf-8") for p in starts)
        mine = [w for w in windows(path.read_text(encoding="utf-8")) if theirs.isdisjoint(w)]
        if mine:
            sources[path.relative_to(root).as_posix()] = _pack(mine)
    return {"window": WINDOW, "sources": sources}


def fingerprints_of(fixtures_dir: Path, root: Path) -> dict[str, Any]:
    """The fingerprints of the kit's evidence-like fixtures (:data:`EVIDENCE_LIKE` under ``fixtures_dir``): run
    ids, file hashes, measurement hashes; and the :func:`drawings` of the right diagram pages."""
    run_ids, files, measured = set(), {}, {}
    for path in sorted(p for sub in EVIDENCE_LIKE for p in (fixtures_dir / sub).rglob("*")):
        if path.suffix not in (".json", ".md") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        files[_digest(path.read_bytes())] = rel
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
    right = sorted(fixtures_dir.glob(RIGHT_DIAGRAMS))
    drawn = {_digest(k.encode()): p.relative_to(root).as_posix() for p in right for k in drawings(p.read_text("utf-8"))}
    return {"marker": MARKER, "run_ids": sorted(run_ids), "files": files, "measurements": measured, "drawings": drawn}


def solutions_fingerprints(solutions_dir: Path, root: Path) -> dict[str, Any]:
    """File hashes and Mermaid drawings of the reference solutions (README aside), each naming its file; what
    ships identical in the learner's starting workspace is left out."""
    files: dict[str, str] = {}
    drawn: dict[str, str] = {}
    for path in sorted(solutions_dir.rglob("*")):
        if not path.is_file() or path.name == "README.md" or "__pycache__" in path.parts:
            continue
        rel, data = path.relative_to(root).as_posix(), path.read_bytes()
        starts = _starting_texts(path.relative_to(solutions_dir), root)
        if any(p.read_bytes() == data for p in starts):
            continue
        files[_digest(data)] = rel
        if path.suffix == ".json" and _json_digest(data):
            files[_json_digest(data)] = rel
        if path.suffix == ".md":
            shipped = {k for p in starts for k in drawings(p.read_text(encoding="utf-8"))}
            for key in drawings(data.decode("utf-8")):
                if key not in shipped:
                    drawn.setdefault(_digest(key.encode()), rel)
    return {"files": files, "drawings": drawn}


def kit_fingerprints(root: Path) -> dict[str, Any]:
    """What ``data/kit-fixtures.json`` holds for the repository at ``root``."""
    return {**fingerprints_of(root / "fixtures", root),
            SOLUTIONS: solutions_fingerprints(root / SOLUTIONS, root), "shingles": text_fingerprints(root)}


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
    mine = windows(text)
    have = {h for win in mine for h in win}
    held, kit = {}, set()
    for src, packed in sources.items():
        wins = _unpack(packed)
        n = sum(not have.isdisjoint(w) for w in wins)
        if n:
            held[src] = (n, len(wins))
            kit |= {h for w in wins for h in w}
    return held, sum(not kit.isdisjoint(w) for w in mine)


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
    same = fp["files"].get(_digest(data)) or (fp["files"].get(_json_digest(data) or "") if path.suffix == ".json"
                                               else None)
    if same and not _in_place(path, same):
        if path.resolve().as_posix().endswith("/" + same):
            return f"it links to the reference solution {same}"
        return f"it is the reference solution {same}" + (", byte for byte" if _digest(data) in fp["files"] else
                                                         ", parsed")
    if path.suffix != ".md":
        return None
    text = data.decode("utf-8", errors="replace")
    why = _copied_text(path, text, kit["shingles"]["sources"])
    if why:
        return why
    for key in drawings(text):
        digest = _digest(key.encode())
        for ref, whose in ((fp["drawings"].get(digest), "the reference solution"),
                           (kit["drawings"].get(digest), "the kit's own fixture")):
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
        files.append({"path": rel, "sha256": _digest(path.read_bytes()), "copied": copied_from(path)})
    flags = list(flags) + (["copied"] if any(f["copied"] for f in files) else [])
    return {"files": files, "flags": list(dict.fromkeys(flags))}


def fixture_result(path: Path, result: Mapping[str, Any]) -> str | None:
    """Why the result at ``path`` is not the learner's paid run: one of the kit's synthetic fixtures, or an
    output of a rehearsal or of the bundled fake provider; ``None`` when it is neither."""
    fp = shipped_fingerprints()
    digest = _digest(Path(path).read_bytes())
    if digest in fp["files"]:
        return f"it is the kit's own synthetic fixture {fp['files'][digest]}"
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
