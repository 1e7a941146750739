"""Warnings raised inside the ranks, handed to the test process's own warning machinery.

A rank records every warning of a call; after a call that returned, :func:`reissue` issues them in the test
process with ``warnings.warn_explicit`` (category, message, file, line kept; one per location), so the test's
filters decide and ``pytest.warns`` catches them. A category travels by name and is looked up only among modules
the test process already imported (never imported, never ``getattr``), else it becomes a ``UserWarning``.
Design record: docs/design/ranks.md.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator

# One record: (category's module, category's qualified name, message text, file name, line number).
Record = tuple[str, str, str, str, int]


@contextlib.contextmanager
def recording() -> Iterator[list[warnings.WarningMessage]]:
    """Inside a rank: record every warning the block raises (none reaches the rank's stderr)."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        yield log


def records(log: list[warnings.WarningMessage]) -> list[Record]:
    """The distinct warnings of ``log``, in the order first raised."""
    out: dict[Record, None] = {}
    for w in log:
        cat = w.category
        out.setdefault((cat.__module__, cat.__qualname__, str(w.message), w.filename, w.lineno or 0), None)
    return list(out)


def as_text(log: list[warnings.WarningMessage]) -> str:
    """``log`` as Python prints warnings (``file:line: Category: message``), for a failed call's stderr."""
    return "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno or 0, w.line)
                   for w in log)


def _category(module: str, qualname: str) -> type[Warning] | None:
    try:
        obj = sys.modules[module]
        for part in qualname.split("."):
            obj = vars(obj)[part]  # not getattr: a module's __getattr__ may run code the test never ran
    except Exception:  # noqa: BLE001 - any failure means: not findable here
        return None
    return obj if isinstance(obj, type) and issubclass(obj, Warning) else None


def reissue(per_rank: list[list[Record]], origin: str) -> None:
    """In the test process: issue each distinct warning of the ranks once, under the test's filters.

    Args:
        per_rank: each rank's records, in rank order.
        origin: the source file of the call's function; code sent by value reports ``<dynamic-code>``.

    Raises:
        Warning: the first warning the test's filters turn into an error (``-W error::...``).
    """
    __tracebackhide__ = True
    seen: set[Record] = set()
    for recs in per_rank:
        for rec in recs:
            if rec in seen:
                continue
            seen.add(rec)
            module, qualname, text, filename, lineno = rec
            category = _category(module, qualname)
            try:
                message = category(text) if category is not None else None
            except Exception:  # noqa: BLE001 - a category whose constructor wants more than a message
                message = None
            if message is None:
                message = UserWarning(f"{module}.{qualname}: {text}")
            if filename == "<dynamic-code>" and origin:
                filename = origin
            # A fresh registry each time: the ranks already reduced each location to one per call.
            warnings.warn_explicit(message, type(message), filename, lineno, registry={})
