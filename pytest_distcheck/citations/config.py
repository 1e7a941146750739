"""The ``[notes]`` section of a workspace file: which notes to verify and how many decisions each needs.

Example (``checks/distcheck.toml``)::

    [notes]
    paths = ["docs/notes/megatron.md", "docs/notes/fsdp.md"]
    min_cited_decisions = 5
    packages = ["megatron-core", "torch"]   # where `distcheck cite --find` looks by default
    install = "pip install -e '.[notes]'"   # how to install them, shown when one is missing
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.workspace import Workspace


@dataclass(frozen=True)
class NotesConfig:
    """The ``[notes]`` section, validated."""

    paths: tuple[str, ...]
    min_cited_decisions: int
    packages: tuple[str, ...]
    install: str


def notes_config(ws: Workspace) -> NotesConfig:
    """Read and check ``[notes]``.

    Raises:
        ConfigError: the section is missing, or a field has the wrong type (names ``notes.FIELD``).
    """
    raw = ws.section("notes")
    if not raw:
        raise ConfigError(ws.path, "notes", "no [notes] section (paths = [...], min_cited_decisions = N)")

    def str_list(name: str, required: bool) -> tuple[str, ...]:
        value = raw.get(name, None if required else [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (
            required and not value
        ):
            raise ConfigError(ws.path, f"notes.{name}", f"must be a list of non-empty strings, found {value!r}")
        return tuple(value)

    minimum = raw.get("min_cited_decisions", 5)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise ConfigError(ws.path, "notes.min_cited_decisions", f"must be a whole number >= 1, found {minimum!r}")
    install = raw.get("install", "pip install " + " ".join(str_list("packages", False)))
    if not isinstance(install, str):
        raise ConfigError(ws.path, "notes.install", f"must be a string, found {install!r}")
    return NotesConfig(str_list("paths", True), minimum, str_list("packages", False), install)
