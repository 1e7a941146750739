"""pytest-distcheck: a pytest plugin and self-check kit for learning distributed PyTorch on a budget.

The top-level package stays import-light (no torch): ``pytest --help`` and the CLI must be fast.
DoD checks report their state with :func:`pending`, :func:`broken` and :func:`stale`.
"""

from pytest_distcheck.dod.outcome import Broken, Pending, Stale, broken, pending, stale

__version__ = "0.1.0"
__all__ = ["Broken", "Pending", "Stale", "broken", "pending", "stale", "__version__"]
