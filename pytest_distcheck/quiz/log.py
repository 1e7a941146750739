"""The quiz log: an append-only JSON Lines file, one attempt per line (``quiz-log.schema.json``).

A bad line is never repaired by the kit: the error names the file and line and says to fix or remove it by
hand (see :func:`bad_line`); ``distcheck quiz`` checks the log before it asks anything.

A line: ``{"bank", "seed", "mode", "status", "started", "finished", "answers": [{"item", "params", "given",
"seconds"}], "reported_score"}`` with ISO-8601 UTC times; ``mode`` is graded (the kit drew the seed) or
practice (``--seed``), ``status`` complete or abandoned (see :mod:`pytest_distcheck.quiz.session`); an optional
``lang`` says the language its items were shown in (older lines have none; grading ignores it).
Lines are only ever appended, each with one write; nothing is rewritten.
``reported_score`` is for people reading the file; the DoD check re-grades and ignores it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.schemas import validate

FIX_BY_HAND = N_("fix or remove that line by hand (the quiz only appends to its log, it never rewrites it)")
INCOMPLETE = N_("last line is incomplete (no newline)")
CANNOT_APPEND = N_("cannot append to the quiz log: {reason}")
NOT_JSON = N_("not valid JSON: {error} (column {column})")
# A line whose JSON stops before its end: cut short (an editor's paste, a truncated copy), not a typo inside it.
CUT_SHORT = N_("the line is cut short: its JSON ends at column {column} before the record is complete")


def bad_line(path: Path, where: str, problem: str) -> ConfigError:
    """The error for a bad log line: ``where`` starts with ``line N`` (:func:`~pytest_distcheck.errors.at_line`);
    the message ends saying to fix it by hand."""
    return ConfigError(path, where, f"{problem}; {_(FIX_BY_HAND)}")


def check_appendable(path: Path) -> None:
    """Raise when an attempt cannot be appended to the log at ``path``: its last line has no newline.

    Raises:
        ConfigError: naming the file and ``line N``, saying to fix or remove that line by hand.
    """
    existing = path.read_bytes() if path.is_file() else b""
    if existing and not existing.endswith(b"\n"):
        last = existing.count(b"\n") + 1
        raise bad_line(path, at_line(last), _(INCOMPLETE))


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
        check_appendable(path)
        lines = path.read_bytes().count(b"\n") if path.is_file() else 0
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise ConfigError(path, "", _(CANNOT_APPEND).format(reason=exc.strerror)) from None
    return lines + 1


def read_attempts(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The attempts in the log as (line number, record); blank lines and a byte-order mark are skipped; [] if the
    file is absent.

    Raises:
        ConfigError: naming the file and ``line N`` (and the field) for a line that is not JSON or does
            not fit the schema, and saying to fix or remove that line by hand.
    """
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8-sig") as fh:
        for n, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            line = text.rstrip("\r\n")
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if exc.pos >= len(line.rstrip()) or exc.msg.startswith("Unterminated string"):  # ran off the end
                    raise bad_line(path, at_line(n), _(CUT_SHORT).format(column=exc.colno)) from None
                raise bad_line(path, at_line(n), _(NOT_JSON).format(error=exc.msg, column=exc.colno)) from None
            try:
                validate(record, "quiz-log.schema.json", path)
            except ConfigError as exc:
                raise bad_line(path, at_line(n, exc.where), exc.problem) from None
            out.append((n, record))
    return out
