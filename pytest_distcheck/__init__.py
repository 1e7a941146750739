"""pytest-distcheck: a pytest plugin and self-check kit for learning distributed PyTorch on a budget.

The top-level package stays import-light (no torch): ``pytest --help`` and the CLI must be fast.
DoD checks report their state with :func:`pending`, :func:`broken` and :func:`stale` (or :func:`done`
with a reason of their own). Tests of the ``dist_world`` fixture catch :class:`RankError`,
:class:`RankTimeout`, :class:`PicklingError` and :class:`RanksOutOfStepWarning` (from
:mod:`pytest_distcheck.ranks.errors`, which imports no torch).
"""

from pytest_distcheck.dod.outcome import Broken, Done, Pending, Stale, broken, done, pending, stale
from pytest_distcheck.ranks.errors import PicklingError, RankError, RanksOutOfStepWarning, RankTimeout

__version__ = "0.1.0"
__all__ = ["Broken", "Done", "Pending", "Stale", "broken", "done", "pending", "stale",
           "PicklingError", "RankError", "RankTimeout", "RanksOutOfStepWarning", "__version__"]
