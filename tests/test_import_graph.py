"""The package's imports point one way: no module cycle, counting function-level and TYPE_CHECKING imports.

The graph is read with ``ast`` from the source (every ``import`` and ``from ... import`` statement anywhere
in a module), so an import hidden in a function or behind ``if TYPE_CHECKING:`` still counts.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest_distcheck

PACKAGE = Path(pytest_distcheck.__file__).resolve().parent


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file under ``package`` (a package folder)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(name: str, mods: dict[str, Path], node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules that ``node`` (in module ``name``) imports: ``from P import m`` is module
    ``P.m`` when that is a module, else ``P``; a name outside the package is left out."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = name.split(".") if mods[name].name == "__init__.py" else name.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join(here + ([node.module] if node.module else []))
        wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
    found = []
    for target in wanted:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.append(target)
    return found


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Module -> {imported module: line of the first import of it}, over every import statement."""
    mods = modules(package)
    graph: dict[str, dict[str, int]] = {name: {} for name in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(name, mods, node):
                    graph[name].setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(component: frozenset[str], graph: dict[str, dict[str, int]]) -> str:
    """The shortest loop through the first module of ``component``, each import with its line:
    ``a (line 3) -> b (line 9) -> a``."""
    start = min(component)
    came: dict[str, str] = {}  # module -> the module it was first reached from
    frontier = [start]
    while start not in came:  # breadth first within the component, until the walk is back at start
        reached = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w in component and w not in came:
                    came[w] = v
                    reached.append(w)
        frontier = reached
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came[path[-1]])
    path.reverse()
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:], strict=False)) + f" -> {start}"


def test_the_walker_counts_function_level_type_checking_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n")
    (pkg / "sub" / "c.py").write_text("from ..a import f\nimport os\n")
    (pkg / "d.py").write_text("import pkg.sub\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b": 2}
    assert graph["pkg.sub.b"] == {"pkg.sub.c": 3}
    assert graph["pkg.sub.c"] == {"pkg.a": 1}
    assert graph["pkg.d"] == {"pkg.sub": 1}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.sub.c"})]
    assert describe(cycles(graph)[0], graph) == "pkg.a (line 2) -> pkg.sub.b (line 3) -> pkg.sub.c (line 1) -> pkg.a"


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    found = [describe(c, graph) for c in cycles(graph)]
    assert not found, "import cycles (make the shared names a lower module both import):\n" + "\n".join(found)


def test_importing_the_budget_plugin_imports_no_module_of_dod():
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pytest_distcheck.budget.plugin"],
                            capture_output=True, text=True, check=True)
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line]
    assert imported and not [m for m in imported if m.startswith("pytest_distcheck.dod")]


def test_the_dod_core_imports_no_module_of_diagram_citations_or_the_phase():
    graph = import_graph(PACKAGE)
    above = ("pytest_distcheck.diagram", "pytest_distcheck.citations", "pytest_distcheck.phase35",
             "pytest_distcheck.phase_pack", "pytest_distcheck.copies")
    found = [f"{name} (line {line}) -> {target}" for name, targets in graph.items()
             if name.startswith("pytest_distcheck.dod") for target, line in targets.items()
             if target.startswith(above)]
    assert not found, "the DoD core reaches these only through what it defines:\n" + "\n".join(found)
