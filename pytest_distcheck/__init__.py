"""pytest-distcheck: a pytest plugin and self-check kit for learning distributed PyTorch on a budget.

The top-level package stays import-light (no torch): ``pytest --help`` and the CLI must be fast.
DoD checks report their state with :func:`pending`, :func:`broken` and :func:`stale` (or :func:`done`
with a reason of their own). Tests of the ``dist_world`` fixture catch :class:`RankError`,
:class:`RankTimeout`, :class:`PicklingError` and :class:`RanksOutOfStepWarning` (from
:mod:`pytest_distcheck.ranks.errors`, which imports no torch). Each name is imported on first use, so
importing one area of the kit (``pytest_distcheck.budget``) does not import another (``dod``).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

# pytest rewrites the asserts of every module in a plugin's package; the kit's hold only internal invariants,
# and rewriting them (never cached under PYTHONDONTWRITEBYTECODE) costs about 0.1 s of CPU per pytest process.
# Checks are still rewritten: pytest matches test files by name, not by package.
for _finder in sys.meta_path:
    if isinstance(getattr(_finder, "_must_rewrite", None), set):
        _finder._must_rewrite.discard(__name__)

if TYPE_CHECKING:
    from pytest_distcheck.dod.outcome import Broken, Done, Pending, Stale, broken, done, pending, stale
    from pytest_distcheck.ranks.errors import PicklingError, RankError, RanksOutOfStepWarning, RankTimeout

__version__ = "0.1.0"
__all__ = ["Broken", "Done", "Pending", "Stale", "broken", "done", "pending", "stale",
           "PicklingError", "RankError", "RankTimeout", "RanksOutOfStepWarning", "__version__"]
# Each public name -> the module that defines it.
_HOMES = {**dict.fromkeys(__all__[:8], "pytest_distcheck.dod.outcome"),
          **dict.fromkeys(__all__[8:12], "pytest_distcheck.ranks.errors")}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
