"""What of the test's process travels with every call to the ranks: environment, cwd, rewritten modules.

Carried on every call and undone after it: ``os.environ`` as a diff against the session's start, the working
directory, ``sys.path`` and the modules pytest assertion-rewrote. Not carried: what torch reads once at import
(but ``TORCH_DISTRIBUTED_DEBUG``, honoured by a zygote of its own) or when a group is built (``GLOO_*``,
``NCCL_*``: ``@pytest.mark.fresh_ranks``). The full list: docs/design/ranks.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping


def env_diff(base: Mapping[str, str], now: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(variables to set, names to remove) that turn ``base`` into ``now``."""
    changed = {k: v for k, v in now.items() if base.get(k) != v}
    return changed, [k for k in base if k not in now]


class EnvTracker:
    """:func:`env_diff` of ``os.environ`` against ``base``, recomputed only when the environment changed.

    Reading ``os.environ`` decodes every entry (about 0.1 ms for 100 variables, per call); its raw bytes
    mapping compares in microseconds, so an unchanged environment costs one comparison and a changed
    one only the work for the entries that changed since the last call.
    """

    def __init__(self, base: Mapping[str, str]) -> None:
        self.base = dict(base)
        self._raw_base = {os.fsencode(k): os.fsencode(v) for k, v in base.items()}
        self._last = dict(self._raw_base)
        self._changed: dict[str, str] = {}
        self._unset: set[str] = set()

    def diff(self) -> tuple[dict[str, str], list[str]]:
        raw = getattr(os.environ, "_data", None)  # CPython's bytes mapping behind os.environ
        if not isinstance(raw, dict):
            return env_diff(self.base, os.environ)
        if raw != self._last:
            # pytest alone changes PYTEST_CURRENT_TEST for every test: that one key, without the set
            # arithmetic over every variable below (about 20 us per call inside pytest)
            value = raw.get(_CURRENT_TEST)
            if value is not None and len(raw) == len(self._last) and _CURRENT_TEST in self._last:
                self._last[_CURRENT_TEST] = value
                self._set(_CURRENT_TEST, value)
                if raw == self._last:
                    return dict(self._changed), sorted(self._unset)
            for key in self._last.keys() - raw.keys():
                name = os.fsdecode(key)
                self._changed.pop(name, None)
                if key in self._raw_base:
                    self._unset.add(name)
            for key, value in raw.items() - self._last.items():
                self._set(key, value)
            self._last = dict(raw)
        return dict(self._changed), sorted(self._unset)

    def _set(self, key: bytes, value: bytes) -> None:
        name = os.fsdecode(key)
        self._unset.discard(name)
        if self._raw_base.get(key) == value:
            self._changed.pop(name, None)
        else:
            self._changed[name] = os.fsdecode(value)


_CURRENT_TEST = b"PYTEST_CURRENT_TEST"

# A cache updated in place: the gate's snapshot treats a rebound module attribute as tampering.
_rewritten: list[tuple[int, int, dict[str, str]]] = [(0, -1, {})]


def rewritten_modules() -> dict[str, str]:
    """Module name -> source file of every module pytest's assertion-rewriting hook rewrote here.

    Empty outside pytest, or when assertion rewriting is off (``--assert=plain``). The hook only adds
    names, so the answer is cached while their count stays the same.
    """
    for finder in sys.meta_path:
        names = getattr(finder, "_rewritten_names", None)  # _pytest.assertion.rewrite.AssertionRewritingHook
        if isinstance(names, dict):
            if _rewritten[0][:2] != (id(names), len(names)):
                _rewritten[0] = (id(names), len(names), {name: os.fspath(path) for name, path in names.items()})
            return _rewritten[0][2]
    return {}
