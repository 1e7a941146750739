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
from pathlib import Path

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import Workspace

NO_SECTION = N_("no [notes] section (paths = [...], min_cited_decisions = N)")
NOT_NAMES = N_("must be a list of non-empty strings, found {value!r}")
NOT_TEXT = N_("must be a string, found {value!r}")
NOT_A_COUNT = N_("must be a whole number >= 1, found {value!r}")


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
        raise ConfigError(ws.path, "notes", _(NO_SECTION))

    def str_list(name: str, required: bool) -> tuple[str, ...]:
        value = raw.get(name, None if required else [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (
            required and not value
        ):
            raise ConfigError(ws.path, f"notes.{name}", _(NOT_NAMES).format(value=value))
        return tuple(value)

    minimum = raw.get("min_cited_decisions", 5)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise ConfigError(ws.path, "notes.min_cited_decisions", _(NOT_A_COUNT).format(value=minimum))
    install = raw.get("install", "pip install " + " ".join(str_list("packages", False)))
    if not isinstance(install, str):
        raise ConfigError(ws.path, "notes.install", _(NOT_TEXT).format(value=install))
    return NotesConfig(str_list("paths", True), minimum, str_list("packages", False), install)


def note_template(note: Path) -> Path | None:
    """The template to start ``note`` from: ``TEMPLATE.md`` in the language in use (``docs/es/notes/`` for
    ``docs/notes/x.md`` under es, as ``distcheck init`` lays them out), else the one beside ``note``; ``None``
    when neither exists."""
    from pytest_distcheck.i18n import DEFAULT, language

    beside = note.parent / "TEMPLATE.md"
    translated = note.parent.parent / language() / note.parent.name / "TEMPLATE.md"
    for template in ([translated] if language() != DEFAULT else []) + [beside]:
        if template.is_file():
            return template
    return None
