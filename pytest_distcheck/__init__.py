"""pytest-distcheck: a pytest plugin and self-check kit for learning distributed PyTorch on a budget.

The top-level package stays import-light (no torch): ``pytest --help`` and the CLI must be fast.
DoD checks report their state with :func:`pending`, :func:`broken` and :func:`stale` (or :func:`done`
with a reason of their own).
"""

from pytest_distcheck.dod.outcome import Broken, Done, Pending, Stale, broken, done, pending, stale

__version__ = "0.1.0"
__all__ = ["Broken", "Done", "Pending", "Stale", "broken", "done", "pending", "stale", "__version__"]
