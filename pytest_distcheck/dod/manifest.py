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

from pytest_distcheck.i18n import N_, _

FORMAT = "pytest-distcheck/dod-manifest"
# Sections a learner may change without changing what "done" means: which GPU to rent.
FREE_SECTIONS = frozenset({"pods"})
# The problems, one sentence each (the report's ``canonical.problems``, the gate's reasons).
SETTING_DIFFERS = N_("[{section}] {path} is {mine!r}, the shipped DoD has {canon!r}")
MISSING = N_("<missing>")
WORKSPACE_FILE = N_("the workspace file is {file}, the shipped DoD's is {shipped}")
ITEM_MISSING = N_("item {item!r} of the shipped DoD is missing")
ITEM_DIFFERS = N_("item {item!r} {key} {mine} differ from the shipped {canon}")
EXTRA_ITEMS = N_("items not in the shipped DoD: {items}")
CHECK_FILE_MISSING = N_("check file {file} is missing")
CHECK_FILE_DIFFERS = N_("check file {file} differs from the shipped one")
QUIZ_BANK_MISSING = N_("quiz bank {file} is missing")
QUIZ_BANK_DIFFERS = N_("quiz bank {file} differs from the shipped one")


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
        missing = _(MISSING)
        for key in sorted(set(mine) | set(canon)):
            _diff(f"{path}.{key}" if path else key, mine.get(key, missing), canon.get(key, missing), out)
    elif mine != canon:
        out.append(_(SETTING_DIFFERS).format(section=path.split(".", 1)[0], path=path, mine=mine, canon=canon))


def compare(ws_path: Path, root: Path, raw: dict[str, Any], canon: dict[str, Any]) -> dict[str, Any]:
    """How the workspace (file ``ws_path``, parsed ``raw``, under ``root``) stands against ``canon``.

    Returns the report's ``canonical`` section: ``trusted`` (no problem), ``problems`` (one sentence
    each: what differs, what was expected), the ``items`` as shipped, and each shipped check file's
    ``sha256`` in the workspace beside the ``shipped`` one.
    """
    problems: list[str] = []
    rel = _rel(ws_path, root)
    if rel != canon["workspace"]:
        problems.append(_(WORKSPACE_FILE).format(file=rel, shipped=canon["workspace"]))
    mine = {it["id"]: it for it in raw.get("items", []) if isinstance(it, dict) and "id" in it}
    for it in canon["items"]:
        got = mine.get(it["id"])
        if got is None:
            problems.append(_(ITEM_MISSING).format(item=it["id"]))
            continue
        for key in ("requires", "checks"):
            if list(got.get(key, [])) != it[key]:
                problems.append(_(ITEM_DIFFERS).format(item=it["id"], key=key, mine=list(got.get(key, [])),
                                                       canon=it[key]))
    extra = sorted(set(mine) - {it["id"] for it in canon["items"]})
    if extra:
        problems.append(_(EXTRA_ITEMS).format(items=", ".join(extra)))
    checks = []
    for f, want in canon["check_files"].items():
        path = root / f
        got_hash = sha256_file(path) if path.is_file() else None
        checks.append({"path": f, "sha256": got_hash, "shipped": want})
        if got_hash != want:
            problems.append(_(CHECK_FILE_MISSING if got_hash is None else CHECK_FILE_DIFFERS).format(file=f))
    bank = canon.get("quiz_bank")
    if bank:
        path = root / bank["path"]
        if not path.is_file() or sha256_file(path) != bank["sha256"]:
            problems.append(_(QUIZ_BANK_MISSING if not path.is_file() else QUIZ_BANK_DIFFERS).format(file=bank["path"]))
    _diff("", settings_of(raw), canon["settings"], problems)
    return {"phase": canon["phase"], "kit_version": canon["kit_version"], "trusted": not problems,
            "problems": problems, "items": [it["id"] for it in canon["items"]], "check_files": checks}


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
