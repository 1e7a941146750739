"""The canonical DoD of a phase, shipped with the kit: what a workspace declaring that phase must match.

``pytest_distcheck/data/dod-<phase>.json`` (format ``pytest-distcheck/dod-manifest``) records the kit
version, the workspace file's place, every item (id, prerequisites, registered checks), the sha256 of
each registered check file and of the quiz bank, and the settings the checks read (every section of
the workspace file but ``[phase]``, ``[[items]]`` and :data:`FREE_SECTIONS`). Issue 13: a workspace
that declares the phase but drops or renames an item, registers other checks, runs edited check
files, draws from another quiz bank or changes a setting (a pass mark, a ceiling, a log path) is
untrusted and never passes ``--gate``.

Regenerate after changing the phase's files or ``fixtures/`` (tests/test_dod_manifest.py fails until
then); it also writes the fingerprints of the kit's fixtures and reference solutions
(:mod:`~pytest_distcheck.dod.provenance`)::

    python -m pytest_distcheck.dod.manifest checks/distcheck.toml
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

FORMAT = "pytest-distcheck/dod-manifest"
# Sections a learner may change without changing what "done" means: which GPU to rent.
FREE_SECTIONS = frozenset({"pods"})


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes with CRLF line endings read as LF (a clone with ``core.autocrlf``)."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def _settings(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in {"phase", "items"} | FREE_SECTIONS}


def build(workspace_file: Path, root: Path) -> dict[str, Any]:
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
        "settings": _settings(raw),
    }


def shipped(phase_id: str) -> dict[str, Any] | None:
    """The manifest the kit ships for ``phase_id``; ``None`` when it ships none."""
    name = f"dod-{phase_id}.json"
    if not name.replace("-", "").replace(".", "").isalnum():
        return None
    ref = resources.files("pytest_distcheck.data").joinpath(name)
    return json.loads(ref.read_text(encoding="utf-8")) if ref.is_file() else None


def shipped_phases() -> list[str]:
    """The phase ids whose DoD the kit ships (``data/dod-<phase>.json``), sorted."""
    names = (ref.name for ref in resources.files("pytest_distcheck.data").iterdir())
    return sorted(n.removeprefix("dod-").removesuffix(".json") for n in names
                  if n.startswith("dod-") and n.endswith(".json"))


def _diff(path: str, mine: Any, canon: Any, out: list[str]) -> None:
    if isinstance(mine, dict) and isinstance(canon, dict):
        for key in sorted(set(mine) | set(canon)):
            _diff(f"{path}.{key}" if path else key, mine.get(key, "<missing>"), canon.get(key, "<missing>"), out)
    elif mine != canon:
        out.append(f"[{path.split('.', 1)[0]}] {path} is {mine!r}, the shipped DoD has {canon!r}")


def compare(ws_path: Path, root: Path, raw: dict[str, Any], canon: dict[str, Any]) -> dict[str, Any]:
    """How the workspace (file ``ws_path``, parsed ``raw``, under ``root``) stands against ``canon``.

    Returns the report's ``canonical`` section: ``trusted`` (no problem), ``problems`` (one sentence
    each: what differs, what was expected), the ``items`` as shipped, and each shipped check file's
    ``sha256`` in the workspace beside the ``shipped`` one.
    """
    problems: list[str] = []
    rel = _rel(ws_path, root)
    if rel != canon["workspace"]:
        problems.append(f"the workspace file is {rel}, the shipped DoD's is {canon['workspace']}")
    mine = {it["id"]: it for it in raw.get("items", []) if isinstance(it, dict) and "id" in it}
    for it in canon["items"]:
        got = mine.get(it["id"])
        if got is None:
            problems.append(f"item {it['id']!r} of the shipped DoD is missing")
            continue
        for key in ("requires", "checks"):
            if list(got.get(key, [])) != it[key]:
                problems.append(f"item {it['id']!r} {key} {list(got.get(key, []))} differ from the shipped {it[key]}")
    extra = sorted(set(mine) - {it["id"] for it in canon["items"]})
    if extra:
        problems.append(f"items not in the shipped DoD: {', '.join(extra)}")
    checks = []
    for f, want in canon["check_files"].items():
        path = root / f
        got_hash = sha256_file(path) if path.is_file() else None
        checks.append({"path": f, "sha256": got_hash, "shipped": want})
        if got_hash != want:
            problems.append(f"check file {f} {'is missing' if got_hash is None else 'differs from the shipped one'}")
    bank = canon.get("quiz_bank")
    if bank:
        path = root / bank["path"]
        if not path.is_file() or sha256_file(path) != bank["sha256"]:
            how = "is missing" if not path.is_file() else "differs from the shipped one"
            problems.append(f"quiz bank {bank['path']} {how}")
    _diff("", _settings(raw), canon["settings"], problems)
    return {"phase": canon["phase"], "kit_version": canon["kit_version"], "trusted": not problems,
            "problems": problems, "items": [it["id"] for it in canon["items"]], "check_files": checks}


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    """Write ``pytest_distcheck/data/dod-<phase>.json`` for the workspace file given and
    ``data/kit-fixtures.json`` from ``fixtures/`` and ``solutions/`` (run from the repository root)."""
    from pytest_distcheck.dod.provenance import kit_fingerprints

    args = sys.argv[1:] if argv is None else argv
    ws = Path(args[0] if args else "checks/distcheck.toml")
    data = Path(str(resources.files("pytest_distcheck.data")))
    doc = build(ws, Path.cwd())
    for name, content in ((f"dod-{doc['phase']}.json", doc), ("kit-fixtures.json", kit_fingerprints(Path.cwd()))):
        (data / name).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        sys.stdout.write(f"wrote {data / name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
