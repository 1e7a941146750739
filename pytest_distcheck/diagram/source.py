"""Module-level literals of a Python source file, read without running the module or its packages.

A TP plan is data, so the kit reads it from its module's source instead of importing it: code imported in the
gate's verdict process could reach the verdict (docs/ci/known-limitations.md). The file is found from the dotted name
alone (no ``find_spec``, which runs the packages' ``__init__.py``); a value is the name's last top-level assignment,
evaluated by :func:`ast.literal_eval`; anything else that binds or edits the name at module level is an error naming
its line. Design record: docs/design/diagram.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from pytest_distcheck.errors import at_line
from pytest_distcheck.i18n import N_, _

CANNOT_READ = N_("cannot read it: {error}")
NOT_PYTHON = N_("not valid Python: {error}")
NOT_ONLY_LITERAL = N_("{name} is bound or changed here other than by a literal assignment at the top level: the kit "
                      "reads it without running code, so nothing else may")
CANNOT_BUILD = N_("{name} cannot be built from its literal: {error}")
NOT_A_LITERAL = N_("{name} is not a literal ({kind} where a value must be written out): write it out as a literal "
                   "(dict, list, tuple, str) so the kit can read it without running code")
AN_EXPRESSION = N_("an expression")


class SourceError(ValueError):
    """A module's source cannot be read as literals.

    Attributes:
        line: 1-based line in the file the problem is on (0 when it is the whole file).
        problem: what is wrong, in words (in the language in use when it was raised).
    """

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(f"{at_line(line)}: {problem}" if line else problem)


def module_sources(module: str) -> tuple[Path, ...]:
    """The source files that may hold ``module`` (dotted identifiers, e.g. ``experiments.tp_inference.plan``;
    the caller checks), relative to the folder it is found from, in the order Python's path finder tries
    them: the package's ``__init__.py``, then the module's ``.py``. Nothing is imported or looked up.
    """
    parts = module.split(".")
    return (Path(*parts, "__init__.py"), Path(*parts[:-1], parts[-1] + ".py"))


def read_literals(path: Path, names: Iterable[str]) -> dict[str, tuple[int, object]]:
    """The values the module at ``path`` assigns to ``names`` at its top level, without running it.

    Returns:
        name -> (line of its assignment, value), for each of ``names`` the module assigns; a name it
        never assigns is left out.

    Raises:
        SourceError: the file cannot be read or is not valid Python; a value is not a literal
            (:func:`ast.literal_eval`); a name is bound or changed by another statement at module level.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except OSError as exc:
        raise SourceError(0, _(CANNOT_READ).format(error=exc.strerror or exc)) from None
    except SyntaxError as exc:
        raise SourceError(exc.lineno or 0, _(NOT_PYTHON).format(error=exc.msg)) from None
    except (ValueError, RecursionError) as exc:  # null bytes (3.11), nesting too deep for the parser
        raise SourceError(0, _(NOT_PYTHON).format(error=exc)) from None
    wanted = set(names)
    assigned: dict[str, ast.expr] = {}
    literal_targets: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:  # ``PLAN: dict`` alone binds nothing
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in wanted:
                assigned[target.id] = value
                literal_targets.add(id(target))
    for node in _module_scope(tree):
        if isinstance(node, ast.AnnAssign) and node.value is None:  # ``PLAN: dict`` binds nothing
            literal_targets.add(id(node.target))
        name = _bound_name(node, wanted)
        if name is not None and id(node) not in literal_targets:
            raise SourceError(getattr(node, "lineno", 0), _(NOT_ONLY_LITERAL).format(name=name))
    return {name: (value.lineno, _literal(name, value)) for name, value in assigned.items()}


def _literal(name: str, value: ast.expr) -> object:
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, RecursionError) as exc:
        bad = _non_literal(value)
        if bad is None:  # e.g. a dict with an unhashable key: literal parts that do not build a value
            raise SourceError(value.lineno, _(CANNOT_BUILD).format(name=name, error=exc)) from None
        kind = _(_KINDS.get(type(bad), AN_EXPRESSION))
        raise SourceError(bad.lineno, _(NOT_A_LITERAL).format(name=name, kind=kind)) from None


# What NOT_A_LITERAL says was written instead of a value.
A_COMPREHENSION = N_("a comprehension")
_KINDS = {ast.Name: N_("a name"), ast.Attribute: N_("an attribute"), ast.Call: N_("a call"),
          ast.BinOp: N_("an operation"), ast.DictComp: A_COMPREHENSION, ast.ListComp: A_COMPREHENSION,
          ast.SetComp: A_COMPREHENSION, ast.GeneratorExp: A_COMPREHENSION, ast.JoinedStr: N_("an f-string"),
          ast.Subscript: N_("a subscript"), ast.Dict: N_("a dict with ** unpacking")}


def _non_literal(node: ast.expr) -> ast.expr | None:
    """The outermost part of ``node`` that is not a literal, looking inside literal containers only."""
    if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        children = [*node.keys, *node.values] if isinstance(node, ast.Dict) else node.elts
        for child in children:
            if child is None:  # ``{**other}``
                return node
            found = _non_literal(child)
            if found is not None:
                return found
        return None
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, RecursionError):
        return node
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _module_scope(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node whose bindings are the module's (the insides of functions, classes and comprehensions
    left out, a function's or class's own name kept), and every ``global`` statement wherever it is."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            yield child
            if isinstance(child, _SCOPES):
                yield from (n for n in ast.walk(child) if isinstance(n, ast.Global))
            else:
                stack.append(child)


def _bound_name(node: ast.AST, wanted: set[str]) -> str | None:
    """Which of ``wanted`` ``node`` binds or edits at module scope, if any."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        found: list[str] = [node.id]
    elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
        found = [node.value.id] if isinstance(node.value, ast.Name) else []
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler,
                           ast.MatchAs, ast.MatchStar)):
        found = [node.name] if node.name else []
    elif isinstance(node, ast.MatchMapping):
        found = [node.rest] if node.rest else []
    elif isinstance(node, ast.alias):
        found = [*wanted] if node.name == "*" else [node.asname or node.name.partition(".")[0]]
    elif isinstance(node, ast.Global):
        found = node.names
    else:
        return None
    return next((n for n in found if n in wanted), None)
