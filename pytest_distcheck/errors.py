"""Errors the kit raises for bad input: each names the file, the field or line, and what is wrong."""

from __future__ import annotations

from pathlib import Path

from pytest_distcheck.i18n import N_, _

LINE = N_("line {n}")


def at_line(n: int, field: str = "") -> str:
    """A ``where`` for line ``n`` of a file, in the language in use: ``line 3``, or ``line 3, FIELD`` (the
    field path stays as it is)."""
    line = _(LINE).format(n=n)
    return f"{line}, {field}" if field else line


class DistcheckError(Exception):
    """Base class of the kit's own errors; the message is meant for a person."""


class ConfigError(DistcheckError):
    """A workspace file (config, ledger, result, note) is malformed.

    Attributes:
        path: the file.
        where: the field path (``items[2].id``) or ``line N`` (:func:`at_line`, in the language in use), or ``""``
            when the whole file is wrong.
        problem: what is wrong, in words.
    """

    def __init__(self, path: Path | str, where: str, problem: str) -> None:
        self.path = Path(path)
        self.where = where
        self.problem = problem
        loc = f"{self.path}" + (f", {where}" if where else "")
        super().__init__(f"{loc}: {problem}")
