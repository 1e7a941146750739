"""How a call travels to the ranks: ``cloudpickle``, with code from the user's project sent by value.

A function whose module the ranks can import by name (an installed package, or a test module on
``sys.path``, which travels with every call) goes by reference: the rank imports that module once.
Whether they can is asked of the import system's finders, not of ``sys.modules`` (:func:`_find_spec`).
Nested functions, lambdas and functions of modules that cannot be imported by name go by value;
cloudpickle then drops their file name, which the rank restores in tracebacks from ``origin_file``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import cloudpickle

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.ranks.errors import PicklingError

NOT_CALLABLE = N_("run() needs a callable, got {type}")
# CANNOT_PICKLE's {what}: one of the four below.
CANNOT_PICKLE = N_("{what} ({type}) cannot be pickled: {error}")
CAPTURED = N_("{variable!r}, which the function {name!r} captures,")
THE_FUNCTION = N_("the function {name!r}")
POSITIONAL = N_("positional argument {i}")
KEYWORD = N_("keyword argument {name!r}")

# id(module) -> (module, whether it travels by value): a finder search costs about 0.1 ms, and a test calls
# dist_world.run with functions of the same few modules again and again. The module is kept so its id
# is never reused by another object.
_BY_VALUE: dict[int, tuple[Any, bool]] = {}


def _by_value(fn: Callable[..., Any]) -> list[Any]:
    """The module of ``fn`` when the ranks could not import it by name (then it travels by value)."""
    name = getattr(fn, "__module__", None) or ""
    module = sys.modules.get(name)
    if module is None:
        return []
    known = _BY_VALUE.get(id(module))
    if known is None or known[0] is not module:
        known = _BY_VALUE[id(module)] = (module, _importable_elsewhere(name, module))
    return [] if known[1] else [module]


def _importable_elsewhere(name: str, module: Any) -> bool:
    if name == "__main__":
        return False
    spec = _find_spec(name)
    if spec is not None and spec.origin in ("built-in", "frozen"):  # builtins, os: in every interpreter
        return True
    file = getattr(module, "__file__", None)
    return not (spec is None or not spec.origin or not file
                or os.path.realpath(spec.origin) != os.path.realpath(file))


def _find_spec(name: str) -> Any:
    """Where a fresh process on this ``sys.path`` finds module ``name``: the import system's own search
    (each finder of ``sys.meta_path``, package by package), never its ``sys.modules`` shortcut, which
    ``importlib.util.find_spec`` takes. pytest's ``--import-mode=importlib`` puts ``tests.test_x`` in
    ``sys.modules`` without its folder on ``sys.path``: the ranks could not import it by name."""
    parts = name.split(".")
    path = spec = None
    for i in range(len(parts)):
        if i and path is None:  # the parent is not a package
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            try:
                spec = find(".".join(parts[:i + 1]), path) if find else None
            except (ImportError, ValueError):
                spec = None
            if spec is not None:
                break
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec


def origin_file(fn: Callable[..., Any]) -> str:
    """The source file of ``fn``, for tracebacks of code that travelled by value."""
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else ""


def dump_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """Pickle ``(fn, args, kwargs)`` for the ranks.

    Raises:
        PicklingError: names the function or argument that could not be pickled and why.
    """
    __tracebackhide__ = True  # the error names the culprit; the test's own line is what to look at
    if not callable(fn):
        raise TypeError(_(NOT_CALLABLE).format(type=type(fn).__name__))
    modules = _by_value(fn)
    for m in modules:
        cloudpickle.register_pickle_by_value(m)
    try:
        try:
            return cloudpickle.dumps((fn, args, kwargs))
        except Exception:  # noqa: BLE001 - find the culprit, then say which it is
            name = getattr(fn, "__qualname__", fn)
            for variable, value in _captured(fn):  # a fixture a lambda closes over: name it, not the lambda
                _check(value, _(CAPTURED).format(variable=variable, name=name))
            _check(fn, _(THE_FUNCTION).format(name=name))
            for i, a in enumerate(args):
                _check(a, _(POSITIONAL).format(i=i))
            for k, v in kwargs.items():
                _check(v, _(KEYWORD).format(name=k))
            raise
    finally:
        for m in modules:
            cloudpickle.unregister_pickle_by_value(m)


def _captured(fn: Any) -> list[tuple[str, Any]]:
    """The variables a Python function closes over, as (name, value); [] for other callables."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    out = []
    for variable, cell in zip(getattr(code, "co_freevars", ()), cells, strict=False):
        try:
            out.append((variable, cell.cell_contents))
        except ValueError:  # a cell not filled yet
            continue
    return out


def _check(value: Any, what: str) -> None:
    __tracebackhide__ = True
    try:
        cloudpickle.dumps(value)
    except Exception as exc:  # noqa: BLE001
        # from None: the message holds the pickler's error; its frames are cloudpickle's, not the test's.
        raise PicklingError(_(CANNOT_PICKLE).format(what=what, type=type(value).__name__, error=exc)) from None
