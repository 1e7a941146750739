"""The canonical DoD of a phase, shipped with the kit: what a workspace declaring that phase must match.

``pytest_distcheck/data/dod-<phase>.json`` (format :data:`FORMAT`) records the kit version, every item (id,
prerequisites, registered checks), the sha256 of each registered check file and of the quiz bank, and the settings
the checks read (all sections but ``[phase]``, ``[[items]]`` and :data:`FREE_SECTIONS`). A workspace that declares
the phase but differs in any of them is untrusted and never passes ``--gate``. Written by
``python -m pytest_distcheck.data.build checks/distcheck.toml``.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

FORMAT = "pytest-distcheck/dod-manifest"
# Sections a learner may change without changing what "done" means: which GPU to rent.
FREE_SECTIONS = frozenset({"pods"})


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes with CRLF line endings read as LF (a clone with ``core.autocrlf``)."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def settings_of(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in {"phase", "items"} | FREE_SECTIONS}


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
    _diff("", settings_of(raw), canon["settings"], problems)
    return {"phase": canon["phase"], "kit_version": canon["kit_version"], "trusted": not problems,
            "problems": problems, "items": [it["id"] for it in canon["items"]], "check_files": checks}


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
