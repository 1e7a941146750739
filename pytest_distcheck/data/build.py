"""Writes the data the gate reads: the shipped DoD of a phase and the fingerprints of the kit's own material.

Run from the repository root after changing the phase's files, ``fixtures/`` or ``solutions/``
(tests/test_dod_manifest.py fails until then)::

    python -m pytest_distcheck.data.build checks/distcheck.toml

``data/dod-<phase>.json`` (:func:`manifest`, read by :mod:`pytest_distcheck.dod.manifest`) and
``data/kit-fixtures.json`` (:func:`kit_fingerprints`, read by :mod:`pytest_distcheck.dod.provenance`).
"""

from __future__ import annotations

import base64
import json
import sys
import tomllib
from array import array
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_distcheck import textnorm
from pytest_distcheck.copies import drawings, windows
from pytest_distcheck.dod.manifest import FORMAT, settings_of, sha256_file
from pytest_distcheck.dod.provenance import (
    EVIDENCE_LIKE,
    MARKER,
    RIGHT_DIAGRAMS,
    SOLUTIONS,
    digest,
    json_digest,
    measurements_hash,
)


def _starting_texts(rel: Path, root: Path) -> list[Path]:
    """The learner's starting files a reference file ``solutions/<rel>`` may share text with: the file at
    ``<rel>`` and the Markdown files beside it (``docs/notes/TEMPLATE.md``)."""
    here = root / rel
    beside = sorted(p for p in here.parent.glob("*.md") if p != here) if here.parent.is_dir() else []
    return ([here] if here.is_file() else []) + beside


def text_sources(root: Path) -> dict[Path, list[Path]]:
    """The Markdown a learner's text must not be made of, each with the learner's starting files whose text it
    may share: the reference solutions' (``solutions/**/*.md``, README aside) and the course pages ``distcheck
    init`` ships (but the note skeletons under ``docs/notes/`` and ``docs/es/notes/``, the learner's to fill,
    shared by the pages), and a Spanish twin also with its English page."""
    from pytest_distcheck.phase_pack import PACK_GLOBS

    own = [g for g in PACK_GLOBS if g.startswith(("docs/notes/", "docs/es/notes/"))]
    skeleton = sorted({p for g in own for p in root.glob(g) if p.is_file()})
    solutions = root / SOLUTIONS
    out = {p: _starting_texts(p.relative_to(solutions), root)
           for p in sorted(solutions.rglob("*.md")) if p.name != "README.md"}
    pages = sorted({p for g in PACK_GLOBS if g.endswith(".md") and g not in own for p in root.glob(g) if p.is_file()})
    return out | {p: skeleton + _english_twin(p, root) for p in pages}


def _english_twin(page: Path, root: Path) -> list[Path]:
    """A Spanish page's English twin (docs/es/X -> docs/X), whose code and numbers it shares: only the twin's own
    prose is its fingerprint, so a copied code block is the English page's."""
    spanish = root / "docs" / "es"
    twin = root / "docs" / page.relative_to(spanish) if page.is_relative_to(spanish) else None
    return [twin] if twin is not None and twin.is_file() else []


def _pack(wins: list[tuple[int, ...]]) -> str:
    data = array("I", (h for win in wins for h in win))
    if sys.byteorder == "big":
        data.byteswap()
    return base64.b64encode(data.tobytes()).decode("ascii")


def text_fingerprints(root: Path) -> dict[str, Any]:
    """The windows (:func:`windows`) of each of :func:`text_sources`, less those its starting files hold:
    ``{"window": 5, "sources": {path: base64 of little-endian uint32, 5 per window}}``."""
    sources = {}
    for path, starts in text_sources(root).items():
        theirs = {h for p in starts for w in windows(p.read_text(encoding="utf-8")) for h in w}
        mine = [w for w in windows(path.read_text(encoding="utf-8")) if theirs.isdisjoint(w)]
        if mine:
            sources[path.relative_to(root).as_posix()] = _pack(mine)
    return {"window": textnorm.WINDOW, "sources": sources}


def fingerprints_of(fixtures_dir: Path, root: Path) -> dict[str, Any]:
    """The fingerprints of the kit's evidence-like fixtures (:data:`EVIDENCE_LIKE` under ``fixtures_dir``): run
    ids, file hashes, measurement hashes; and the :func:`drawings` of the right diagram pages."""
    run_ids, files, measured = set(), {}, {}
    for path in sorted(p for sub in EVIDENCE_LIKE for p in (fixtures_dir / sub).rglob("*")):
        if path.suffix not in (".json", ".md") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        files[digest(path.read_bytes())] = rel
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
    drawn = {digest(k.encode()): p.relative_to(root).as_posix() for p in right for k in drawings(p.read_text("utf-8"))}
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
        files[digest(data)] = rel
        if path.suffix == ".json" and json_digest(data):
            files[json_digest(data)] = rel
        if path.suffix == ".md":
            shipped = {k for p in starts for k in drawings(p.read_text(encoding="utf-8"))}
            for key in drawings(data.decode("utf-8")):
                if key not in shipped:
                    drawn.setdefault(digest(key.encode()), rel)
    return {"files": files, "drawings": drawn}


def kit_fingerprints(root: Path) -> dict[str, Any]:
    """What ``data/kit-fixtures.json`` holds for the repository at ``root``."""
    return {**fingerprints_of(root / "fixtures", root),
            SOLUTIONS: solutions_fingerprints(root / SOLUTIONS, root), "shingles": text_fingerprints(root)}


def manifest(workspace_file: Path, root: Path) -> dict[str, Any]:
    """The manifest of the workspace file at ``workspace_file`` (paths in it relative to ``root``).

    Raises:
        OSError: a file the workspace names cannot be read.
        tomllib.TOMLDecodeError: the workspace file is not TOML.
    """
    import pytest_distcheck

    raw = tomllib.loads(Path(workspace_file).read_text(encoding="utf-8"))
    items = [{"id": it["id"], "requires": list(it.get("requires", [])), "checks": list(it.get("checks", []))}
             for it in raw.get("items", [])]
    files = sorted({c.split("::", 1)[0] for it in items for c in it["checks"]})
    bank = raw.get("quiz", {}).get("bank")
    return {
        "format": FORMAT,
        "phase": str(raw["phase"]["id"]),
        "kit_version": pytest_distcheck.__version__,
        "workspace": Path(workspace_file).resolve().relative_to(Path(root).resolve()).as_posix(),
        "items": items,
        "check_files": {f: sha256_file(Path(root) / f) for f in files},
        "quiz_bank": {"path": bank, "sha256": sha256_file(Path(root) / bank)} if bank else None,
        "settings": settings_of(raw),
    }


def main(argv: list[str] | None = None) -> int:
    """Write ``pytest_distcheck/data/dod-<phase>.json`` for the workspace file given and
    ``data/kit-fixtures.json`` from ``fixtures/`` and ``solutions/`` (run from the repository root)."""
    args = sys.argv[1:] if argv is None else argv
    ws = Path(args[0] if args else "checks/distcheck.toml")
    data = Path(str(resources.files("pytest_distcheck.data")))
    doc = manifest(ws, Path.cwd())
    for name, content in ((f"dod-{doc['phase']}.json", doc), ("kit-fixtures.json", kit_fingerprints(Path.cwd()))):
        (data / name).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        sys.stdout.write(f"wrote {data / name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
