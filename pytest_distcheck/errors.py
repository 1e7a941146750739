"""Errors the kit raises for bad input: each names the file, the field or line, and what is wrong."""

from __future__ import annotations

from pathlib import Path


class DistcheckError(Exception):
    """Base class of the kit's own errors; the message is meant for a person."""


class ConfigError(DistcheckError):
    """A workspace file (config, ledger, result, note) is malformed.

    Attributes:
        path: the file.
        where: the field path (``items[2].id``) or ``line N``, or ``""`` when the whole file is wrong.
        problem: what is wrong, in words.
    """

    def __init__(self, path: Path | str, where: str, problem: str) -> None:
        self.path = Path(path)
        self.where = where
        self.problem = problem
        loc = f"{self.path}" + (f", {where}" if where else "")
        super().__init__(f"{loc}: {problem}")
