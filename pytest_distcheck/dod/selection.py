"""``--dod ITEM``: which DoD items a run checks, in which order, and why a check was left out.

``--dod`` (repeatable) keeps the checks of the named items and, transitively, of their
prerequisites, and drops every other test. Checks run prerequisites first, so that an item whose
prerequisite already failed in this process is skipped as blocked by it.
"""

from __future__ import annotations

import pytest

from pytest_distcheck.dod.state import topological_ids
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import NOT_FOUND_HINT, Workspace, with_prerequisites, workspace_label

NO_WORKSPACE = N_("--dod {item}: no workspace file {label!r} ({hint})")
DESELECTED_BY_HOOK = N_("deselected by a plugin or conftest hook (no -k, -m or --deselect given)")
DESELECTED = N_("deselected ({options})")


def named(config: pytest.Config) -> list[str]:
    """The item ids as given to ``--dod`` (repeated or comma-separated), without their prerequisites."""
    return [n.strip() for name in config.getoption("distcheck_dod") or [] for n in name.split(",") if n.strip()]


def requested(config: pytest.Config, ws: Workspace | None) -> list[str] | None:
    """The items named with ``--dod`` plus their prerequisites, in workspace order; ``None`` without ``--dod``.

    Raises:
        pytest.UsageError: ``--dod`` names an item the workspace does not have (the known ids are
            listed), or there is no workspace file.
    """
    wanted = named(config)
    if not wanted:
        return None
    if ws is None:
        raise pytest.UsageError(_(NO_WORKSPACE).format(item=wanted[0], label=workspace_label(config),
                                                       hint=_(NOT_FOUND_HINT)))
    for name in wanted:
        try:
            ws.item(name)
        except KeyError as exc:
            raise pytest.UsageError(f"--dod: {exc.args[0]}") from None
    return with_prerequisites(ws, wanted)


def order_prerequisites_first(ws: Workspace, items: list[pytest.Item], item_of) -> None:
    """Reorder, in place, the DoD checks among ``items`` so that every item's checks come after its
    prerequisites' checks; other tests keep their places. ``item_of(test)`` is a test's DoD item id
    or ``None``."""
    rank = {item_id: n for n, item_id in enumerate(topological_ids(ws))}
    slots = [n for n, it in enumerate(items) if item_of(it) is not None]
    checks = sorted((items[n] for n in slots), key=lambda it: rank[item_of(it)])  # stable
    for n, check in zip(slots, checks, strict=True):
        items[n] = check


def deselect_reason(config: pytest.Config) -> str:
    """Why pytest deselected a test, from the selection options in effect."""
    opts = []
    if config.getoption("keyword", ""):
        opts.append(f"-k {config.getoption('keyword')!r}")
    if config.getoption("markexpr", ""):
        opts.append(f"-m {config.getoption('markexpr')!r}")
    if config.getoption("deselect", None):
        opts.append("--deselect")
    for flag, dest in (("--lf", "lf"), ("--sw", "stepwise")):
        if config.getoption(dest, False):
            opts.append(flag)
    if not opts:
        return _(DESELECTED_BY_HOOK)
    return _(DESELECTED).format(options=" ".join(opts))
