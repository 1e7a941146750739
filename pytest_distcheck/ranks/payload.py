"""How a call travels to the ranks: ``cloudpickle``, with code from the user's project sent by value.

Functions defined in a test module (module level, nested, lambdas) are pickled by value so the ranks
need not import the test module; code from installed packages travels by reference.
"""

from __future__ import annotations

import sys
import sysconfig
from typing import Any, Callable

import cloudpickle

from pytest_distcheck.ranks.errors import PicklingError

_INSTALLED = tuple(
    p for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p
)


def _by_value(fn: Callable[..., Any]) -> list[Any]:
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = getattr(module, "__file__", None) or ""
    if module is None or module.__name__ == "__main__" or not path or path.startswith(_INSTALLED):
        return []
    return [module]


def dump_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """Pickle ``(fn, args, kwargs)`` for the ranks.

    Raises:
        PicklingError: names the function or argument that could not be pickled and why.
    """
    if not callable(fn):
        raise TypeError(f"run() needs a callable, got {type(fn).__name__}")
    modules = _by_value(fn)
    for m in modules:
        cloudpickle.register_pickle_by_value(m)
    try:
        try:
            return cloudpickle.dumps((fn, args, kwargs))
        except Exception:  # noqa: BLE001 - find the culprit, then say which it is
            _check(fn, f"the function {getattr(fn, '__qualname__', fn)!r}")
            for i, a in enumerate(args):
                _check(a, f"positional argument {i}")
            for k, v in kwargs.items():
                _check(v, f"keyword argument {k!r}")
            raise
    finally:
        for m in modules:
            cloudpickle.unregister_pickle_by_value(m)


def _check(value: Any, what: str) -> None:
    try:
        cloudpickle.dumps(value)
    except Exception as exc:  # noqa: BLE001
        raise PicklingError(f"{what} ({type(value).__name__}) cannot be pickled: {exc}") from exc
