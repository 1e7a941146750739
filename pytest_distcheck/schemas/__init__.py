"""JSON Schemas shipped with the kit, and validation whose errors name the file and the field."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _

NEEDS_TIME = N_("needs a date and a time, e.g. 2026-11-29T18:52:10+00:00")
NEEDS_OFFSET = N_("needs a UTC offset, e.g. +00:00 or Z")
TOP_LEVEL = N_("(top level)")  # the field path of the document itself
CANNOT_READ = N_("cannot read: {error}")
NOT_JSON = N_("not valid JSON: {error}")  # {error}: Python's json module's words
KNOWN_KEYS = N_("{problem} (known: {keys})")  # {problem}: jsonschema's words
WHY = N_("{problem}: {why}")  # a format check's reason after jsonschema's "... is not a 'date-time'"

# jsonschema checks "date-time" only with an optional extra installed; check it ourselves, always.
_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """RFC 3339 date-time, e.g. 2026-11-29T18:52:10+00:00 or ...Z (a date alone is not enough)."""
    if not isinstance(value, str):
        return True
    if "T" not in value.upper():
        raise ValueError(_(NEEDS_TIME))
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(_(NEEDS_OFFSET))
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
    return out or _(TOP_LEVEL)


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
    """The error's message; an unexpected key also gets the keys that are allowed there (typos show), and a
    value of the wrong format the reason the format check gave."""
    if error.validator == "format" and error.cause is not None:
        return _(WHY).format(problem=error.message, why=error.cause)
    known = error.schema.get("properties") if error.validator == "additionalProperties" else None
    if isinstance(known, dict) and known:
        return _(KNOWN_KEYS).format(problem=error.message, keys=', '.join(known))
    return error.message


def load_json(path: Path | str, schema_name: str) -> Any:
    """Read a JSON file (UTF-8; a byte-order mark, as some editors save one, is dropped) and validate it against
    a shipped schema.

    Raises:
        ConfigError: the file is missing, is not JSON (with the line), or is invalid (with the field).
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(path, "", _(CANNOT_READ).format(error=exc.strerror)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, at_line(exc.lineno), _(NOT_JSON).format(error=exc.msg)) from None
    validate(data, schema_name, path)
    return data
