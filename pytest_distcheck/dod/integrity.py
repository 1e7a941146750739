"""Is the outcome of a DoD check the kit's own? What the gate checks before it believes a check.

Three kinds of evidence, each cheap and independent of what the checks themselves do:

1. Provenance, at collection: the check's function is defined under the workspace's checks folder
   (and registered for its item when the workspace lists ``checks``); every fixture it uses comes
   from pytest, the kit, the checks folder or an installed package, not from a ``conftest.py`` or
   test module elsewhere; no ``pytest_runtest_makereport`` wrapper from such a place runs after the
   kit's (it could rewrite a report the kit has classified).
2. Observation, while it runs: the kit wraps the check's function just before the call
   (:class:`Observer`) and records whether it returned or what it raised; the report must agree
   (a hook that swallows an exception, replaces the function or never calls it is caught).
3. Tampering with code, while it runs: attributes of the kit's modules and the checks' modules that
   were replaced since collection, that are mocks, or that were defined in a ``conftest.py`` outside
   the checks folder (:class:`ModuleSnapshot`).

What this cannot see is listed in the report of issue 9 and in ``docs/ci/github-actions.md``: code
that edits the kit or the checks' files themselves, or forges the kit's records of an outcome.
"""

from __future__ import annotations

import functools
import inspect
import site
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

import pluggy
import pytest

import pytest_distcheck
from pytest_distcheck.dod import outcome as _outcome

KIT_DIR = Path(pytest_distcheck.__file__).resolve().parent
_PYTEST_DIRS = (Path(pytest.__file__).resolve().parent, Path(inspect.getfile(pytest.Item)).resolve().parent,
                Path(pluggy.__file__).resolve().parent)

# Hooks through which a plugin or conftest could change whether a check runs or how it reports.
RUN_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_pyfunc_call",
             "pytest_runtest_makereport", "pytest_runtest_logreport")


def code_file(obj: Any) -> str | None:
    """The source file of a function, method or class (unwrapping decorators); ``None`` if unknown."""
    try:
        obj = inspect.unwrap(obj)
    except ValueError:
        return None
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    if code is not None:
        return code.co_filename
    try:
        return inspect.getsourcefile(obj)
    except TypeError:
        return None


def _line(obj: Any) -> int | None:
    obj = getattr(inspect.unwrap(obj), "__func__", obj)
    code = getattr(obj, "__code__", None)
    return code.co_firstlineno if code is not None else None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class Origins:
    """Where trusted code lives, and how to name a place for a person.

    Trusted: pytest and pluggy, the kit's package, the workspace's checks folder, and installed
    packages and the standard library (``sysconfig`` paths). Anything else (a ``conftest.py`` or a
    plugin file in the learner's repository, a test module outside the checks folder) is foreign.
    """

    def __init__(self, checks_dir: Path, rootdir: Path) -> None:
        self.checks_dir = checks_dir.resolve()
        self.rootdir = rootdir.resolve()
        paths = sysconfig.get_paths()
        installed = {Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
        installed |= {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
        self.trusted_dirs = (KIT_DIR, *_PYTEST_DIRS, self.checks_dir, *sorted(installed))

    def trusted(self, filename: str | None) -> bool:
        """Whether code from ``filename`` may touch a DoD check (unknown files are not trusted)."""
        if filename and filename.startswith("<frozen "):
            return True  # the standard library's frozen modules (abc, os, ...)
        if not filename or filename.startswith("<"):
            return False
        path = Path(filename).resolve()
        return any(_inside(path, d) for d in self.trusted_dirs)

    def in_checks(self, filename: str | None) -> bool:
        """Whether ``filename`` lies under the workspace's checks folder."""
        return bool(filename) and not filename.startswith("<") and _inside(Path(filename).resolve(), self.checks_dir)

    def rel(self, filename: str | None) -> str:
        """``filename`` relative to the rootdir when inside it."""
        if not filename:
            return "<unknown>"
        path = Path(filename)
        try:
            return path.resolve().relative_to(self.rootdir).as_posix()
        except ValueError:
            return str(path)

    def where(self, obj: Any) -> str:
        """``conftest.py:12`` for a function; the file alone when the line is unknown."""
        line = _line(obj)
        return self.rel(code_file(obj)) + (f":{line}" if line else "")


def _module_of(frame: types.FrameType) -> types.ModuleType | None:
    """The module whose namespace ``frame`` runs in, by identity (a rebound ``__name__`` names no module)."""
    mod = sys.modules.get(frame.f_globals.get("__name__", ""))
    return mod if mod is not None and getattr(mod, "__dict__", None) is frame.f_globals else None


def _kit_frame(frame: types.FrameType, kit: set[int] | None) -> bool:
    if not _inside(Path(frame.f_code.co_filename).resolve(), KIT_DIR):
        return False
    if kit is not None:
        return id(frame.f_globals) in kit
    mod = _module_of(frame)
    return mod is not None and mod.__name__.split(".", 1)[0] == "pytest_distcheck"


def foreign_raise(exc: BaseException, module: types.ModuleType | None, origins: Origins,
                  kit: set[int] | None = None) -> str | None:
    """``file:line`` of the code that raised the DoD outcome ``exc`` when it is neither the check's module nor
    the kit; ``None`` when an outcome of the check or the kit (red-team t2 B2: lab code calling ``done()`` at
    import, while a check imports it).

    The raiser is the last frame of ``exc``'s traceback outside the kit's outcome module. Frames are told
    apart by the namespace they run in (``f_globals``, by identity), not by their file name, which
    ``compile`` sets at will. A traceback can be forged (``TracebackType``) to end in the check's frame, but
    the frames the exception unwound through stay in it: every frame after the check function's must be
    the check's, the kit's or trusted code (pytest, the standard library, installed packages). ``kit``: the
    ids of the kit modules' namespaces taken before any learner code loaded (the gate's sub-session,
    :meth:`ModuleSnapshot.namespaces`); without it a kit module is found through ``sys.modules``, which
    lab code can extend with a module of its own renamed into the kit's package.
    """
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    mine = (lambda f: f.f_globals is module.__dict__) if module is not None else (lambda f: False)
    outcome_ns = vars(_outcome)
    frames = [(f, n) for f, n in frames if f.f_globals is not outcome_ns]
    if not frames:
        return None
    starts = [i for i, (f, _) in enumerate(frames) if mine(f)]
    suspects = [frames[-1]] + (frames[starts[0] + 1:] if starts else [])
    for frame, line in suspects:
        mod = _module_of(frame)
        ok = mine(frame) or _kit_frame(frame, kit)
        if not ok and frame is not frames[-1][0]:
            ok = origins.trusted(frame.f_code.co_filename) and (mod is None or origins.trusted(getattr(
                mod, "__file__", None) or frame.f_code.co_filename))
        if not ok:
            return f"{origins.rel(frame.f_code.co_filename)}:{line}"
    return None


def _impl_name(impl: Any) -> str:
    return getattr(impl.function, "__name__", "?")


def foreign_hooks(item: pytest.Item, origins: Origins, hooks: tuple[str, ...] = RUN_HOOKS) -> list[str]:
    """``conftest.py:7 (pytest_pyfunc_call)`` for each foreign hook implementation that applies to ``item``."""
    out = []
    for name in hooks:
        for impl in getattr(item.ihook, name).get_hookimpls():
            if not origins.trusted(code_file(impl.function)):
                out.append(f"{origins.where(impl.function)} ({_impl_name(impl)})")
    return out


def static_problems(item: pytest.Item, origins: Origins, ours: object, registered: tuple[str, ...]) -> list[str]:
    """Why the outcome of DoD check ``item`` cannot be trusted, found at collection; ``[]`` if none.

    Args:
        item: a collected check (marked ``dod``).
        origins: where trusted code lives.
        ours: the kit's DoD plugin object (to find its place among the ``makereport`` wrappers).
        registered: the item's registered checks (``file::function``, rootdir-relative); empty when
            the workspace registers none.
    """
    problems = []
    if not isinstance(item, pytest.Function) or not origins.trusted(code_file(type(item))):
        problems.append(f"collected as {type(item).__name__} from {origins.rel(code_file(type(item)))}, "
                        "not as a plain pytest function")
        return problems
    func = item.obj
    where = code_file(func)
    if not origins.in_checks(where):
        problems.append(f"its function is defined in {origins.where(func)}, outside the workspace's checks "
                        f"folder {origins.rel(str(origins.checks_dir))}/")
    base = item.nodeid.split("[", 1)[0]
    if registered and base not in registered:
        problems.append(f"it is not registered for its item in the workspace file (registered: "
                        f"{', '.join(registered)})")
    for name in item.fixturenames:
        defs = item._fixtureinfo.name2fixturedefs.get(name)
        if not defs:
            continue
        fdef = defs[-1]
        if not origins.trusted(code_file(fdef.func)):
            problems.append(f"it uses fixture {name!r} from {origins.where(fdef.func)}; fixtures a DoD check "
                            "uses must come from pytest, the kit or the checks folder")
    impls = item.ihook.pytest_runtest_makereport.get_hookimpls()
    mine = [i for i, impl in enumerate(impls) if impl.plugin is ours]
    for impl in impls[mine[0] + 1:] if mine else impls:
        if (impl.wrapper or impl.hookwrapper) and not origins.trusted(code_file(impl.function)):
            problems.append(f"a pytest_runtest_makereport wrapper in {origins.where(impl.function)} runs after "
                            "the kit's and can rewrite the reports of DoD checks")
    return problems


class Observer:
    """Records what a check's function really did, by wrapping it just before it is called.

    ``start(item)`` swaps ``item.obj`` for a wrapper (returns the problem if ``item.obj`` is no
    longer the function seen at collection); ``finish(item)`` puts it back. ``seen(item)`` is then
    ``None`` (the function was never called), ``RETURNED`` or the exception it raised.
    """

    RETURNED = "returned"

    def __init__(self) -> None:
        self._original: dict[str, Any] = {}
        self._seen: dict[str, list[Any]] = {}
        self._swapped: dict[str, Any] = {}

    def remember(self, item: pytest.Function) -> None:
        """Note the function collection produced for ``item`` (call after collection)."""
        self._original[item.nodeid] = item.obj

    def start(self, item: pytest.Function, origins: Origins) -> str | None:
        """Wrap the check's function; a problem sentence if it was replaced since collection."""
        record: list[Any] = []
        self._seen[item.nodeid] = record
        func = item.obj
        problem = None
        if item.nodeid in self._original and func is not self._original[item.nodeid]:
            problem = f"its function was replaced after collection (now {origins.where(func)})"

        @functools.wraps(func)
        def observed(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                record.append(exc)
                raise
            record.append(Observer.RETURNED)
            return result

        self._swapped[item.nodeid] = func
        item.obj = observed
        return problem

    def finish(self, item: pytest.Function) -> None:
        """Put back the function :meth:`start` wrapped."""
        if item.nodeid in self._swapped:
            item.obj = self._swapped.pop(item.nodeid)

    def seen(self, nodeid: str) -> Any:
        """``None`` (never called), :attr:`RETURNED` or the exception raised."""
        record = self._seen.get(nodeid) or [None]
        return record[-1]


_WATCHED = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type, functools.partial)


def _reimported(before: Any, now: Any) -> bool:
    """A package's submodule attribute rebinds when the submodule is imported again: not tampering."""
    return (isinstance(before, types.ModuleType) and isinstance(now, types.ModuleType)
            and before.__name__ == now.__name__ and sys.modules.get(now.__name__) is now)


_MEMBERS = (*_WATCHED, staticmethod, classmethod, property)


def _kit_classes(name: str, mod: types.ModuleType) -> dict[str, type]:
    """The classes module ``name`` defines (not those it imports), by name."""
    return {attr: value for attr, value in list(vars(mod).items())
            if isinstance(value, type) and value.__module__ == name}


def _members(cls: type) -> dict[str, Any]:
    """The methods, descriptors and nested classes of ``cls`` itself (``__new__``, ``__init__``, ...)."""
    return {attr: value for attr, value in list(vars(cls).items()) if isinstance(value, _MEMBERS)}


# Values whose equality is their identity for the gate: a rebinding to an equal one is not tampering.
_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), tuple, frozenset, range)


def _same(before: Any, now: Any) -> bool:
    return now is before or (type(now) is type(before) and isinstance(now, _IMMUTABLE) and now == before)


def _data(attrs: dict[str, Any], watched: tuple[type, ...]) -> dict[str, Any]:
    """The attributes of a module's or class's ``__dict__`` that are data (``Pending.state``, ``FAILED``)."""
    return {attr: value for attr, value in attrs.items() if not isinstance(value, watched)}


# The process's ways out, which the gate's sub-session relies on to end before any workspace atexit hook.
_EXITS = (("os", "_exit"), ("sys", "exit"), ("atexit", "register"), ("atexit", "_run_exitfuncs"))


def _member_func(value: Any) -> Any:
    return getattr(value, "__func__", None) or getattr(value, "fget", None) or value


class ModuleSnapshot:
    """The callables, classes and modules of the kit's and the checks' modules, as at collection.

    For the kit's modules also the members of each class they define (``Pending.__new__``, methods,
    properties: red-team R2); for the kit's and the checks' modules the code object, defaults and keyword
    defaults of every function, by identity, so a class patched in place or a function whose ``__code__``
    was swapped (red-team t3 A) is named too.

    :meth:`problems` lists attributes replaced since then, attributes that are mocks, kit attributes
    whose code is foreign, and checks' attributes defined in a ``conftest.py`` outside the checks folder.
    """

    def __init__(self, origins: Origins, check_modules: list[types.ModuleType],
                 since: str = "while the checks ran") -> None:
        self.origins = origins
        self.since = since
        self.modules: dict[str, types.ModuleType] = {}
        for name, mod in list(sys.modules.items()):
            if mod is not None and (name == "pytest_distcheck" or name.startswith("pytest_distcheck.")):
                self.modules[name] = mod
        self.kit = set(self.modules)
        for mod in check_modules:
            self.modules[mod.__name__] = mod
        self.attrs = {(name, attr): value for name, mod in self.modules.items()
                      for attr, value in list(vars(mod).items()) if isinstance(value, _WATCHED)}
        self.members = {(name, cls_name): _members(cls) for name in self.kit
                        for cls_name, cls in _kit_classes(name, self.modules[name]).items()}
        # (function, its module, code, defaults, keyword defaults): the function kept so its id is not reused
        self.codes = {id(f): (f, name, f.__code__, f.__defaults__, dict(f.__kwdefaults__ or {}))
                      for name, f in self._functions()}
        # Data too (red-team A12: ``Pending.state = "done"``, ``report.FAILED = "passed"``).
        self.data = {name: _data(dict(vars(self.modules[name])), _WATCHED) for name in self.kit}
        self.class_data = {(name, cls_name): _data(dict(vars(cls)), _MEMBERS) for name in self.kit
                           for cls_name, cls in _kit_classes(name, self.modules[name]).items()}
        self.exits = {f"{m}.{a}": getattr(sys.modules[m], a, None) for m, a in _EXITS if m in sys.modules}

    def namespaces(self) -> set[int]:
        """The ids of the kit modules' namespaces (``vars(module)``) as at the snapshot."""
        return {id(vars(self.modules[name])) for name in self.kit}

    def _functions(self) -> list[tuple[str, types.FunctionType]]:
        """``(module name, function)`` for the functions of the kit's and the checks' modules and the methods
        of the kit's classes."""
        funcs = [(name, v) for (name, _), v in self.attrs.items() if isinstance(v, types.FunctionType)]
        for (name, _), members in self.members.items():
            funcs += [(name, f) for f in map(_member_func, members.values()) if isinstance(f, types.FunctionType)]
        return funcs

    def problems(self, module_names: set[str] | None = None) -> list[str]:
        """Sentences naming each tampered attribute, for the kit's modules and ``module_names``."""
        out = []
        mock = sys.modules.get("unittest.mock")
        for name, mod in self.modules.items():
            if name not in self.kit and module_names is not None and name not in module_names:
                continue
            for attr, value in list(vars(mod).items()):
                before = self.attrs.get((name, attr))
                what = f"{name}.{attr}"
                if mock is not None and isinstance(value, mock.NonCallableMock):
                    out.append(f"{what} is a mock")
                elif before is not None and value is not before and not _reimported(before, value):
                    out.append(f"{what} was replaced {self.since} (now {self._describe(value)})")
                elif isinstance(value, types.FunctionType) and self._foreign(name, value):
                    out.append(f"{what} is {self._describe(value)}, not the kit's or the checks' own")
        return out + self._class_problems() + self._code_problems(module_names) + self._data_problems()

    def _data_problems(self) -> list[str]:
        out = []
        for name, before in self.data.items():
            out += self._diff(name, before, _data(dict(vars(self.modules[name])), _WATCHED), modules=True)
        for (name, cls_name), before in self.class_data.items():
            cls = vars(self.modules[name]).get(cls_name)
            if isinstance(cls, type):
                out += self._diff(f"{name}.{cls_name}", before, _data(dict(vars(cls)), _MEMBERS))
        for what, before in self.exits.items():
            mod, attr = what.split(".")
            if getattr(sys.modules.get(mod), attr, None) is not before:
                out.append(f"{what} was replaced {self.since}")
        return out

    def _diff(self, owner: str, before: dict[str, Any], now: dict[str, Any], modules: bool = False) -> list[str]:
        out = []
        for attr in sorted(set(before) | set(now)):
            what = f"{owner}.{attr}"
            if attr not in now:
                out.append(f"{what} was removed {self.since}")
            elif attr not in before:
                # A new name on a class shadows an inherited one (``Blocked.state``); a module's new
                # submodule or dunder is the import system's.
                if not (attr.startswith("__") or (modules and isinstance(now[attr], types.ModuleType))):
                    out.append(f"{what} was added {self.since} (now {_short(now[attr])})")
            elif not _same(before[attr], now[attr]):
                out.append(f"{what} was changed {self.since} (was {_short(before[attr])}, now {_short(now[attr])})")
        return out

    def _class_problems(self) -> list[str]:
        out = []
        for (name, cls_name), before in self.members.items():
            cls = vars(self.modules[name]).get(cls_name)
            if not isinstance(cls, type):
                continue  # the class itself was replaced: problems() names it
            now = _members(cls)
            for attr in sorted(set(before) | set(now)):
                what = f"{name}.{cls_name}.{attr}"
                if attr not in now:
                    out.append(f"{what} was removed {self.since}")
                elif attr not in before:
                    out.append(f"{what} was added {self.since} (now {self._describe(_member_func(now[attr]))})")
                elif now[attr] is not before[attr]:
                    out.append(f"{what} was replaced {self.since} (now {self._describe(_member_func(now[attr]))})")
        return out

    def _code_problems(self, module_names: set[str] | None = None) -> list[str]:
        """A function whose ``__code__``, ``__defaults__`` or ``__kwdefaults__`` was swapped while the name
        still points to it (red-team R2 for the kit, t3 A for the checks: ``_unbacked.__code__ = ...``)."""
        out = []
        for func, name, code, defaults, kwdefaults in self.codes.values():
            if name not in self.kit and module_names is not None and name not in module_names:
                continue
            what = f"{func.__module__}.{func.__qualname__}"
            if func.__code__ is not code:
                out.append(f"{what}.__code__ was replaced {self.since} (now code "
                           f"from {self.origins.rel(func.__code__.co_filename)}:{func.__code__.co_firstlineno})")
            if func.__defaults__ is not defaults:
                out.append(f"{what}.__defaults__ was replaced {self.since}")
            now = func.__kwdefaults__ or {}
            if now.keys() != kwdefaults.keys() or any(now[k] is not v for k, v in kwdefaults.items()):
                out.append(f"{what}.__kwdefaults__ was replaced {self.since}")
        return out

    def _foreign(self, module: str, func: types.FunctionType) -> bool:
        where = func.__code__.co_filename
        if module in self.kit:
            return not self.origins.trusted(where)
        return Path(where).name == "conftest.py" and not self.origins.in_checks(where)

    def _describe(self, value: Any) -> str:
        if isinstance(value, (types.FunctionType, type)):
            return f"{getattr(value, '__qualname__', value)!s} from {self.origins.where(value)}"
        return type(value).__name__


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, _IMMUTABLE) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
