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
- Reference solutions (``solutions/``) are teaching material, never the learner's evidence (red-team R3):
  their fingerprints ship in the same file (``solutions``: file hashes, and the drawing of each Mermaid
  block: :func:`drawings`; the right diagram pages of the kit's tests are fingerprinted the same way), and
  a check names the files it judged with the ``distcheck_evidence`` fixture; a file that is a copy
  (:func:`copied_from`) makes its check untrusted. Files that ship identical in the learner's starting
  workspace (the empty ledger) are not fingerprinted.
- Prose is matched by similarity, not identity (red-team 05 and 11b: a word appended to each paragraph of a
  reference note; notes pieced together from the course pages with code fences dropped): the hashed 4-word
  shingles (:func:`shingles`) of the Markdown of ``solutions/`` and of the course pages ``distcheck init``
  ships (``docs/theory``, ``docs/lab``, ``docs/README.md``) ship under ``shingles``, per file, less those of
  the learner's own starting files (the note skeleton). A paragraph is taken from a source when over a third
  of its shingles are that source's (:func:`taken_from`), and a note is a copy when at least 3 and more than
  half of its paragraphs are taken, from one source or several; a word added, dropped or changed costs at
  most 4 shingles, while prose written apart rarely shares a third (measured: 3 of the 64 paragraphs of this
  repository's README, by the lab pages' authors, one of them a lab paragraph quoted whole; none of the 47
  of docs/ci/threat-model.md, benchmarks/README.md, fixtures/diagrams/README.md).
- Provider confirmation belongs to the spend-integrity work (issue 18). A ``reconciled`` row in the
  ledger (written by ``distcheck budget --reconcile``) is read from the learner's file, not asked of the
  provider in this run, so it never makes ledger evidence *confirmed* (red-team A03);
  :func:`ledger_label` says self-reported and notes the reconciled row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
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
# The diagram pages of the kit's tests that pass the diagram check (fixtures/diagrams/README.md); the wrong
# ones fail it on their own.
RIGHT_DIAGRAMS = "diagrams/ok-*.md"


def fingerprints_of(fixtures_dir: Path, root: Path) -> dict[str, Any]:
    """The fingerprints of the kit's evidence-like fixtures (:data:`EVIDENCE_LIKE` under ``fixtures_dir``):
    run ids, file hashes, measurement hashes; and the :func:`drawings` of the right diagram pages
    (:data:`RIGHT_DIAGRAMS`)."""
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
    drawn = {_digest(key.encode()): path.relative_to(root).as_posix()
             for path in sorted(fixtures_dir.glob(RIGHT_DIAGRAMS))
             for key in drawings(path.read_text(encoding="utf-8"))}
    return {"marker": MARKER, "run_ids": sorted(run_ids), "files": files, "measurements": measured,
            "drawings": drawn}


SOLUTIONS = "solutions"
# A paragraph shorter than this (a heading, a label) may well be written the same way twice.
MIN_PARAGRAPH = 80


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a text (blocks between blank or whitespace-only lines), whitespace collapsed, of at least
    :data:`MIN_PARAGRAPH` characters. Invisible changes are undone first (red-team A19): Unicode NFKC,
    format characters (category Cf, e.g. zero-width spaces) dropped, Mermaid comment lines (``%%``) dropped."""
    text = _visible(text)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("%%"))
    blocks = (" ".join(b.split()) for b in re.split(r"\n[ \t\r]*\n", text))
    return [b for b in blocks if len(b) >= MIN_PARAGRAPH]


def _visible(text: str) -> str:
    """``text`` with invisible changes undone: Unicode NFKC, format characters (category Cf) dropped."""
    return "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")


def drawings(text: str) -> list[str]:
    """The :func:`~pytest_distcheck.diagram.markdown.drawing_key` of each Mermaid block of a Markdown text
    (invisible characters dropped first) that is at least :data:`MIN_PARAGRAPH` long."""
    from pytest_distcheck.diagram.markdown import drawing_key, mermaid_blocks

    keys = (drawing_key(b.source) for b in mermaid_blocks(_visible(text)))
    return [k for k in keys if len(k) >= MIN_PARAGRAPH]


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json_digest(data: bytes) -> str | None:
    """The digest of a JSON file's parsed content (canonical form), so that other bytes with the same
    content (a trailing newline, indentation: red-team A19) match; ``None`` when it is not JSON."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return "json:" + _digest(json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode())


def _starting_texts(rel: Path, root: Path) -> list[Path]:
    """The learner's starting files a reference file ``solutions/<rel>`` may share text with: the file at
    ``<rel>`` and the Markdown files beside it (``docs/notes/TEMPLATE.md``)."""
    here = root / rel
    beside = sorted(p for p in here.parent.glob("*.md") if p != here) if here.parent.is_dir() else []
    return ([here] if here.is_file() else []) + beside


def solutions_fingerprints(solutions_dir: Path, root: Path) -> dict[str, Any]:
    """The fingerprints of the reference solutions under ``solutions_dir`` (its README aside): file hashes
    and Mermaid drawings (:func:`drawings`), each naming its file. A file or drawing that ships identical in
    the learner's starting workspace is left out. Their prose is fingerprinted by :func:`text_fingerprints`."""
    files: dict[str, str] = {}
    drawn: dict[str, str] = {}
    for path in sorted(solutions_dir.rglob("*")):
        if not path.is_file() or path.name == "README.md" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
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


# Word shingles: k-word windows of a paragraph, each hashed to SHINGLE_HEX hex digits (32 bits: among the
# ~30 000 shingles of the sources a chance collision is rare, and the manifest stays small).
SHINGLE_WORDS, SHINGLE_HEX = 4, 8
# A paragraph is taken from a source when more than this share of its shingles are the source's.
TAKEN = 1 / 3
_WORD = re.compile(r"\w+")


def shingles(paragraph: str) -> set[str]:
    """The hashed word shingles of a paragraph: its words (``\\w+``, lower case; citations ``[cite: ...]``
    left out, since two readers citing one place quote the same installed source) in windows of
    :data:`SHINGLE_WORDS`, each the first :data:`SHINGLE_HEX` hex digits of its sha256. Punctuation,
    Markdown marks and code fences do not count, so neither does adding or dropping them; a word added,
    dropped or changed alters at most :data:`SHINGLE_WORDS` shingles. Empty under that many words."""
    from pytest_distcheck.citations.syntax import CITATION

    words = _WORD.findall(CITATION.sub(" ", paragraph).lower())
    return {hashlib.sha256(" ".join(words[i:i + SHINGLE_WORDS]).encode()).hexdigest()[:SHINGLE_HEX]
            for i in range(len(words) - SHINGLE_WORDS + 1)}


def prose_paragraphs(text: str) -> list[str]:
    """The :func:`paragraphs` of a Markdown text but its Mermaid blocks (diagrams are compared by what they
    draw, :func:`drawings`: a wrong diagram made from the reference one is judged by the diagram check)."""
    from pytest_distcheck.diagram.markdown import without_mermaid

    return paragraphs(without_mermaid(text))


def _text_shingles(paths: Iterable[Path]) -> set[str]:
    return {s for p in paths for para in prose_paragraphs(p.read_text(encoding="utf-8")) for s in shingles(para)}


def text_sources(root: Path) -> dict[Path, set[Path]]:
    """The Markdown a learner's note must not be made of, under ``root``, each with the learner's own starting
    files whose text it may share: the reference solutions' (``solutions/**/*.md``, README aside) with
    :func:`_starting_texts`, and the course pages ``distcheck init`` ships (the phase pack's Markdown,
    :data:`pytest_distcheck.phase_pack.PACK_GLOBS`, but the note skeletons under ``docs/notes/`` and
    ``docs/es/notes/``, which are the learner's to fill) with those skeletons, and a Spanish twin also with its
    English page."""
    from pytest_distcheck.phase_pack import PACK_GLOBS

    own = [g for g in PACK_GLOBS if g.startswith(("docs/notes/", "docs/es/notes/"))]
    skeleton = {p for g in own for p in root.glob(g) if p.is_file()}
    solutions = root / SOLUTIONS
    out = {p: set(_starting_texts(p.relative_to(solutions), root))
           for p in sorted(solutions.rglob("*.md")) if p.name != "README.md"}
    pages = sorted({p for g in PACK_GLOBS if g.endswith(".md") and g not in own for p in root.glob(g) if p.is_file()})
    return out | {p: skeleton | _english_twin(p, root) for p in pages}


def _english_twin(page: Path, root: Path) -> set[Path]:
    """A Spanish page's English twin (docs/es/X -> docs/X), whose code and numbers it shares: only the twin's own
    prose is its fingerprint, so a copied code block is the English page's."""
    spanish = root / "docs" / "es"
    twin = root / "docs" / page.relative_to(spanish) if page.is_relative_to(spanish) else None
    return {twin} if twin is not None and twin.is_file() else set()


def text_fingerprints(root: Path) -> dict[str, Any]:
    """The word shingles (:func:`shingles`) of each of :func:`text_sources`, but those of its starting files:
    ``{"words": SHINGLE_WORDS, "hex": SHINGLE_HEX, "sources": {path: sorted shingles, concatenated}}``."""
    sources = {}
    for path, starts in text_sources(root).items():
        mine = _text_shingles([path]) - _text_shingles(starts)
        if mine:
            sources[path.relative_to(root).as_posix()] = "".join(sorted(mine))
    return {"words": SHINGLE_WORDS, "hex": SHINGLE_HEX, "sources": sources}


@functools.lru_cache(maxsize=64)
def _unpack(hexes: str) -> frozenset[str]:
    return frozenset(hexes[i:i + SHINGLE_HEX] for i in range(0, len(hexes), SHINGLE_HEX))


def taken_from(paragraph: str, sources: Mapping[str, str]) -> str | None:
    """The source (a path of :func:`text_fingerprints`' ``sources``) that holds the most of ``paragraph``'s
    shingles, when that is more than :data:`TAKEN` of them; ``None`` otherwise (or when the paragraph has
    fewer than :data:`SHINGLE_WORDS` words)."""
    mine = shingles(paragraph)
    if not mine:
        return None
    best, n = max(((src, len(mine & _unpack(hexes))) for src, hexes in sources.items()),
                  key=lambda kv: kv[1], default=("", 0))
    return best if n > TAKEN * len(mine) else None


def _in_place(path: Path, ref: str) -> bool:
    """Whether ``path`` is the reference file ``ref`` (``solutions/...``) where it lives (the reference
    workspace, checks/solutions.toml, reads it there), not a copy elsewhere. The path as named, not
    resolved: a learner's path linking into ``solutions/`` is not the reference in place (red-team A09)."""
    return Path(path).absolute().as_posix().endswith("/" + ref)


def copied_from(path: Path) -> str | None:
    """Why the evidence file ``path`` is a copy of the kit's material (a reference solution, a course page, a
    diagram of its fixtures); ``None`` when it is not (or it is that file itself, in its place). A copy: a
    link to a reference file, the same bytes, a JSON file of the same parsed content, a Markdown file at
    least 3 and more than half of whose paragraphs (:func:`prose_paragraphs`, Mermaid blocks aside) are
    taken (:func:`taken_from`: a few words added, dropped or changed per paragraph do not matter) from the
    reference files and course pages, one or several (the reason names each, with its count), or one with
    a Mermaid block that draws what a reference page or a right diagram of the kit's fixtures draws
    (:func:`drawings`). Cost: one sha256 per word of the file and set look-ups against the ~24 500 shipped
    shingles (about 4 ms for a 36-paragraph note)."""
    path = Path(path)
    if not path.is_file():
        return None
    kit = shipped_fingerprints()
    fp = kit.get(SOLUTIONS, {"files": {}})
    data = path.read_bytes()
    same = fp["files"].get(_digest(data))
    if same:
        if _in_place(path, same):
            return None
        if path.resolve().as_posix().endswith("/" + same):
            return f"it links to the reference solution {same}"
        return f"it is the reference solution {same}, byte for byte"
    same = fp["files"].get(_json_digest(data) or "") if path.suffix == ".json" else None
    if same and not _in_place(path, same):
        return f"it is the reference solution {same}, parsed"
    if path.suffix != ".md":
        return None
    text = data.decode("utf-8", errors="replace")
    mine = prose_paragraphs(text)
    hits: dict[str, int] = {}
    for para in mine:
        src = taken_from(para, kit.get("shingles", {}).get("sources", {}))
        if src and not _in_place(path, src):
            hits[src] = hits.get(src, 0) + 1
    n = sum(hits.values())
    if n >= 3 and 2 * n > len(mine):
        named = [f"{'the reference solution' if src.startswith(SOLUTIONS + '/') else 'the course page'} {src}"
                 for src in sorted(hits, key=lambda s: (-hits[s], s))]
        if len(hits) == 1:
            return f"{n} of its {len(mine)} paragraphs are those of {named[0]}"
        counts = sorted(hits.values(), reverse=True)
        return f"{n} of its {len(mine)} paragraphs are those of the kit: " + ", ".join(
            f"{k} of {what}" for k, what in zip(counts, named, strict=True))
    for key in drawings(text):
        digest = _digest(key.encode())
        for ref, whose in ((fp.get("drawings", {}).get(digest), "the reference solution"),
                           (kit.get("drawings", {}).get(digest), "the kit's own fixture")):
            if ref and not _in_place(path, ref):
                return f"its Mermaid diagram is that of {whose} {ref} (comments, blank lines and spacing aside)"
    return None


def evidence_entry(paths: Iterable[Path], root: Path, flags: Iterable[str] = ()) -> dict[str, Any]:
    """What the ``distcheck_evidence`` fixture records for a check: each existing file (path relative to
    ``root``, sha256, and ``copied``: :func:`copied_from` or ``None``) and the check's ``flags`` (e.g.
    ``self-reported``, ``confirmed``, ``fast-quiz``), plus ``copied`` when a file is a copy."""
    files = []
    for path in paths:
        path = Path(path)
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
    flags = list(dict.fromkeys(flags)) + (["copied"] if any(f["copied"] for f in files) else [])
    return {"files": files, "flags": list(dict.fromkeys(flags))}


def kit_fingerprints(root: Path) -> dict[str, Any]:
    """What ``data/kit-fixtures.json`` holds for the repository at ``root``: the fixtures'
    (:func:`fingerprints_of`) and the reference solutions' (:func:`solutions_fingerprints`)."""
    return {**fingerprints_of(root / "fixtures", root),
            SOLUTIONS: solutions_fingerprints(root / SOLUTIONS, root), "shingles": text_fingerprints(root)}


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


def ledger_label(reconciled: bool | None) -> str:
    """The table's word for evidence read from the spend ledger: always *self-reported*; ``reconciled``
    (the ledger holds the provider's bill for it, :mod:`pytest_distcheck.budget.accounting`) adds that this
    row was not re-checked in this run (red-team A03: such a row can be typed by hand)."""
    return SELF_REPORTED + (" (reconciled row in the ledger, not re-checked in this run)" if reconciled else "")
