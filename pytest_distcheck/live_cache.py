"""A passing live run remembered in this checkout, so ``pytest -m local`` does not redo it while nothing changed.

A record sits in ``.distcheck/live-runs/<name>.json`` under the workspace root, keyed by :func:`content_key`:
sha256 over the contents of the kit's package files, the files the caller names (the check, the lab's code, the
workspace file) and the Python and torch versions; it holds the sha256 of the files the run wrote, and is used
only while they are unchanged. The gate never reads or writes it (:func:`gate_on`): its verdict needs a live
run in its own session.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_

FOLDER = ".distcheck/live-runs"
KEEP = 8  # records per name: one per workspace file and version of the code a learner switches between
CACHED = "cached"  # the evidence flag of a check that reused a record instead of running live
CACHED_DONE = N_("evidence checked, confirmed by the live run of {when}: the kit, the check and the lab's code are "
                 "unchanged since (to run it again, delete {cache})")
_KIT = Path(__file__).resolve().parent
_KIT_SUFFIXES = (".py", ".json", ".toml")


def gate_on(config) -> bool:
    """Whether this session decides the gate (``--gate``, in the learner's process or the gate's sub-session)."""
    return bool(config.getoption("distcheck_gate", False))


def python_files(folder: Path) -> list[Path]:
    """Every ``.py`` file under ``folder``, sorted (none when it is missing)."""
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts) if folder.is_dir() else []


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def content_key(files: Iterable[Path]) -> str:
    """sha256 (hex) over the kit's package files, ``files`` (path and content; a missing one counts as
    missing), ``sys.version`` and torch's ``version.py`` (found without importing torch)."""
    h = hashlib.sha256(sys.version.encode())
    kit = sorted(p for p in _KIT.rglob("*") if p.suffix in _KIT_SUFFIXES and "__pycache__" not in p.parts)
    torch = importlib.util.find_spec("torch")
    version = [Path(torch.origin).parent / "version.py"] if torch is not None and torch.origin else []
    for path in [*kit, *version, *files]:
        h.update(b"\0" + str(path).encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"<missing>")
    return h.hexdigest()


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:  # a workspace that allows paths outside its root
        return str(path)


def _path(root: Path, name: str) -> Path:
    return root / FOLDER / f"{name}.json"


def lookup(root: Path, name: str, key: str) -> dict[str, Any] | None:
    """The record of ``name`` under ``key``, or ``None``: no record, an unreadable cache file, or a file the
    run wrote (``record["files"]``: path relative to ``root`` -> sha256) changed or gone since."""
    try:
        record = json.loads(_path(root, name).read_text(encoding="utf-8")).get(key)
        if not isinstance(record, dict):
            return None
        for rel, digest in record.get("files", {}).items():
            if _sha256(root / rel) != digest:
                return None
    except (OSError, ValueError, AttributeError):
        return None
    return record


def remember(root: Path, name: str, key: str, record: dict[str, Any], files: Iterable[Path] = ()) -> Path:
    """Store ``record`` (JSON data) for ``name`` under ``key`` with the sha256 of ``files`` (under ``root``),
    keeping the :data:`KEEP` newest keys; the cache file is replaced whole. Returns its path."""
    path = _path(root, name)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        records = records if isinstance(records, dict) else {}
    except (OSError, ValueError):
        records = {}
    records.pop(key, None)
    records[key] = {**record, "files": {_relative(Path(f), root): _sha256(Path(f)) for f in files}}
    records = dict(list(records.items())[-KEEP:])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
