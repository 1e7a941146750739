"""The quiz log: an append-only JSON Lines file, one finished attempt per line (``quiz-log.schema.json``).

A line: ``{"bank", "seed", "started", "finished", "answers": [{"item", "params", "given"}], "reported_score"}``
with ISO-8601 UTC times. Lines are only ever appended, each with one write; nothing is rewritten.
``reported_score`` is for people reading the file; the DoD check re-grades and ignores it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.schemas import validate


def append_attempt(path: Path, record: dict[str, Any]) -> int:
    """Append ``record`` as one line to the log at ``path`` (created with its folders); returns its line number.

    Raises:
        ConfigError: the record does not fit the log schema (a bug), or the file cannot be written.
    """
    path = Path(path)
    validate(record, "quiz-log.schema.json", path)
    line = json.dumps(record, separators=(",", ":")) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = path.read_bytes() if path.is_file() else b""
        lines = existing.count(b"\n")
        if existing and not existing.endswith(b"\n"):
            raise ConfigError(path, f"line {lines + 1}", "last line is incomplete (no newline); fix it by hand")
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise ConfigError(path, "", f"cannot append to the quiz log: {exc.strerror}") from None
    return lines + 1


def read_attempts(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The attempts in the log as (line number, record); blank lines are skipped; [] if the file is absent.

    Raises:
        ConfigError: naming the file and ``line N`` (and the field) for a line that is not JSON or does
            not fit the schema.
    """
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for n, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(path, f"line {n}", f"not valid JSON: {exc.msg} (column {exc.colno})") from None
            try:
                validate(record, "quiz-log.schema.json", path)
            except ConfigError as exc:
                raise ConfigError(path, f"line {n}, {exc.where}", exc.problem) from None
            out.append((n, record))
    return out
