"""Evidence a DoD check can believe: fresh (produced from the code and config as they are now) and
recomputed (derived numbers re-derived from the raw data, never read as the verdict).

A lab records ``result["sources"] = record_sources([...], root)``; a check calls :func:`require_fresh` and
:func:`require_consistent`. ``sources`` maps a source (a file or a folder relative to the workspace root, or
``file#table`` for one table of a TOML or JSON file) to ``sha256:<hex>`` of its bytes, CRLF read as LF: hashes work
without git, in shallow clones and for files not yet committed. Examples and design record: docs/design/dod.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pytest_distcheck.dod.outcome import broken, stale
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
CANNOT_READ_TABLE = N_("cannot read table {table!r}: {error}")
NO_TABLE = N_("no such table")
NO_SOURCE_FILE = N_("source file not found")
NO_SOURCE = N_("source not found")
NO_SOURCES = N_("{where} records no sources (the hashes of the code and config it came from)")
BAD_SOURCES = N_("must map each source path to 'sha256:<64 hex digits>'")
NOT_RECORDED = N_("{where} does not record {source} among its sources")
GONE = N_("{source}, recorded in {where}, no longer exists ({problem})")
CHANGED = N_("{source} changed since {where} was produced (recorded {recorded}…, now {now}…)")
AND_MORE = N_(" (and {n} more)")
DISAGREES = N_("{where}: stored {what} {stored} disagrees with {recomputed} recomputed from its evidence")


def _file_bytes(path: Path) -> bytes:
    return path.read_bytes().replace(b"\r\n", b"\n")


def _table(path: Path, table: str) -> Any:
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(path, "", _(CANNOT_READ_TABLE).format(table=table, error=exc)) from None
    for key in table.split("."):
        if not isinstance(data, dict) or key not in data:
            raise ConfigError(path, table, _(NO_TABLE))
        data = data[key]
    return data


def digest(source: str, root: Path) -> str:
    """``sha256:<hex>`` of one source (file, folder or ``file#table``) relative to ``root``.

    Raises:
        ConfigError: the source does not exist, or the table is missing (naming the file and table).
    """
    rel, _hash, table = source.partition("#")
    path = Path(root) / rel
    h = hashlib.sha256()
    if table:
        if not path.is_file():
            raise ConfigError(path, "", _(NO_SOURCE_FILE))
        h.update(json.dumps(_table(path, table), sort_keys=True, separators=(",", ":"), default=str).encode())
    elif path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            parts = file.relative_to(path).parts
            if "__pycache__" in parts or any(part.startswith(".") for part in parts):
                continue
            h.update("/".join(parts).encode() + b"\0" + hashlib.sha256(_file_bytes(file)).digest())
    elif path.is_file():
        h.update(_file_bytes(path))
    else:
        raise ConfigError(path, "", _(NO_SOURCE))
    return "sha256:" + h.hexdigest()


def record_sources(sources: Iterable[str], root: Path) -> dict[str, str]:
    """The ``sources`` field a producer stores in its result: source -> ``sha256:<hex>``.

    Args:
        sources: files, folders or ``file#table`` entries, relative to ``root`` (the workspace root).
        root: the workspace root.

    Raises:
        ConfigError: a source is missing.
    """
    return {s: digest(s, root) for s in sources}


def check_fresh(result: Mapping[str, Any], root: Path, required: Iterable[str] = (), *, where: str) -> list[str]:
    """Why ``result`` is stale, as sentences naming the source and the hashes; ``[]`` when fresh.

    Args:
        result: a loaded result with a ``sources`` field (see :func:`record_sources`).
        root: the workspace root the sources are relative to.
        required: sources the check needs covered; each must be recorded in ``result``.
        where: the result's name for messages (its path).

    Raises:
        ConfigError: ``sources`` is present but malformed (not a mapping of source to ``sha256:<hex>``).
    """
    sources = result.get("sources")
    if sources is None:
        return [_(NO_SOURCES).format(where=where)]
    if not isinstance(sources, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and _DIGEST.match(v) for k, v in sources.items()):
        raise ConfigError(where, "sources", _(BAD_SOURCES))
    problems = [_(NOT_RECORDED).format(where=where, source=s) for s in required if s not in sources]
    for source, recorded in sources.items():
        try:
            now = digest(source, root)
        except ConfigError as exc:
            problems.append(_(GONE).format(source=source, where=where, problem=exc.problem))
            continue
        if now != recorded:
            problems.append(_(CHANGED).format(source=source, where=where, recorded=recorded[:19], now=now[:19]))
    return problems


def require_fresh(result: Mapping[str, Any], required: Iterable[str] = (), *, root: Path, where: str,
                  command: str | None = None) -> None:
    """Stop the current DoD check as *stale* unless every recorded source of ``result`` is unchanged.

    Args:
        result: a loaded result with a ``sources`` field.
        required: sources the check needs covered (e.g. the lab's code folder).
        root: the workspace root (``distcheck_workspace.root``).
        where: the result's path, for the message.
        command: the command that produces the result again.

    Raises:
        pytest_distcheck.Stale: through :func:`pytest_distcheck.stale`, naming the first changed
            sources (what was recorded, what is there now).
        pytest_distcheck.Broken: ``sources`` is malformed.
    """
    __tracebackhide__ = True
    try:
        problems = check_fresh(result, root, required, where=where)
    except ConfigError as exc:
        broken(str(exc))
    if problems:
        more = _(AND_MORE).format(n=len(problems) - 2) if len(problems) > 2 else ""
        stale("; ".join(problems[:2]) + more, command)


def _show(value: Any, unit: str) -> str:
    return f"{unit}{value}" if unit == "$" else f"{value}{unit}"


def require_consistent(what: str, stored: Any, recomputed: Any, *, where: str, tolerance: float = 0.0,
                       unit: str = "") -> None:
    """Stop the current DoD check as *broken* when a stored derived value disagrees with its recomputation.

    Use it for every score, total, speedup or count a result stores next to the raw data it came
    from: recompute from the raw data, compare here, then judge the *recomputed* value against the
    threshold. Never judge the stored one.

    Args:
        what: the value's name (``"score"``, ``"total"``).
        stored: the value written in the evidence.
        recomputed: the value derived again from the evidence's raw data.
        where: file and field (``"quiz.json, attempts[2].score"``).
        tolerance: largest absolute difference accepted for numbers (0: exact).
        unit: shown with both values (``"%"``, ``" s"``, ``"$"`` as a prefix).

    Raises:
        pytest_distcheck.Broken: they differ (names both values and ``where``).
    """
    __tracebackhide__ = True
    numbers = (int, float, Decimal)
    if isinstance(stored, numbers) and isinstance(recomputed, numbers) and not isinstance(stored, bool):
        diff = abs(Decimal(str(stored)) - Decimal(str(recomputed)))
        ok = not (isinstance(stored, float) and math.isnan(stored)) and diff <= Decimal(str(tolerance))
    else:
        ok = stored == recomputed
    if not ok:
        broken(_(DISAGREES).format(where=where, what=what, stored=_show(stored, unit),
                                   recomputed=_show(recomputed, unit)))


# Clock skew allowed between the machine that wrote a time stamp and the one checking it.
FUTURE_SLACK_S = 300.0


def in_the_future(stamp: object, now: datetime | None = None) -> bool:
    """Whether an ISO 8601 time stamp (``2026-11-30T12:00:00Z``; no zone: UTC) lies more than
    :data:`FUTURE_SLACK_S` seconds after ``now`` (default: the current time). Evidence dated in the future
    was typed, not produced. A value that is not such a stamp is not in the future (its
    schema check names it)."""
    from datetime import UTC

    if not isinstance(stamp, str):
        return False
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - (now or datetime.now(UTC))).total_seconds() > FUTURE_SLACK_S
