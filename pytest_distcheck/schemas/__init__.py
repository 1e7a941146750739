"""JSON Schemas shipped with the kit, and validation whose errors name the file and the field."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from pytest_distcheck.errors import ConfigError

# jsonschema checks "date-time" only with an optional extra installed; check it ourselves, always.
_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """RFC 3339 date-time, e.g. 2026-11-29T18:52:10+00:00 or ...Z (a date alone is not enough)."""
    if not isinstance(value, str):
        return True
    if "T" not in value.upper():
        raise ValueError("needs a date and a time, e.g. 2026-11-29T18:52:10+00:00")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError("needs a UTC offset, e.g. +00:00 or Z")
    return True


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The shipped schema ``pytest_distcheck/schemas/<name>`` as a dict."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def field_path(error: jsonschema.ValidationError) -> str:
    """``items[2].id`` for an error at that place; ``(top level)`` for the document itself."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate(data: Any, schema_name: str, path: Path | str) -> None:
    """Validate ``data`` (read from ``path``) against a shipped schema.

    Raises:
        ConfigError: for the first error in document order, naming ``path``, the field and the problem.
    """
    validator = jsonschema.Draft202012Validator(load_schema(schema_name), format_checker=_FORMATS)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ConfigError(path, field_path(errors[0]), _problem(errors[0]))


def _problem(error: jsonschema.ValidationError) -> str:
    """The error's message; an unexpected key also gets the keys that are allowed there (typos show)."""
    known = error.schema.get("properties") if error.validator == "additionalProperties" else None
    if isinstance(known, dict) and known:
        return f"{error.message} (known: {', '.join(known)})"
    return error.message


def load_json(path: Path | str, schema_name: str) -> Any:
    """Read a JSON file and validate it against a shipped schema.

    Raises:
        ConfigError: the file is missing, is not JSON (with the line), or is invalid (with the field).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
    validate(data, schema_name, path)
    return data
