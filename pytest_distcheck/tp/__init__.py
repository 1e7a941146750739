"""Check tensor-parallel layers against their dense originals, on the ranks of ``dist_world`` (or torchrun).

- :func:`assert_tp_matches_dense`: outputs, dL/dx and every gradient against the dense module's
  slices, with the fault named (``compare.py``, ``diagnose.py``);
- :func:`assert_replicated`: a tensor meant to be replicated is the same on every rank;
- :func:`count_collectives`, :func:`assert_collectives`, :func:`expected_collectives`: which
  collectives run in forward and in backward (``collectives.py``);
- plans as data: :mod:`pytest_distcheck.tp.plan` (no torch import: the diagram check reads it).

The names are imported lazily, so importing ``pytest_distcheck.tp.plan`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "assert_tp_matches_dense": "compare",
    "assert_replicated": "replicated",
    "count_collectives": "collectives",
    "assert_collectives": "collectives",
    "expected_collectives": "collectives",
    "Layer": "plan",
    "parse_plan": "plan",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'pytest_distcheck.tp' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pytest_distcheck.tp.{_HOMES[name]}"), name)
