"""No import cycles: a module never imports (even lazily, inside a function) a module that imports
it back. The graph is read from the source with ``ast``, so function-level imports count too;
imports under ``if TYPE_CHECKING:`` never run and are left out."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def module_names(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of ``package`` (``pkg/__init__.py`` is ``pkg``)."""
    names = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _runtime_nodes(tree: ast.AST, typing: bool = False):
    """Every node except those under ``if TYPE_CHECKING:`` (typing-only imports never execute),
    or every node with ``typing``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_in_source(source: str) -> set[str]:
    """The top-level packages an absolute import anywhere in ``source`` names (``numba``, ``softfloat16``).

    >>> sorted(imports_in_source("import numpy as np\\ndef f():\\n    from numba import njit"))
    ['numba', 'numpy']
    """
    found = set()
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.split(".")[0])
    return found


def imports_of(name: str, path: Path, known: set[str], typing: bool = False) -> set[str]:
    """The modules of ``known`` that module ``name`` imports anywhere in its source (with
    ``typing``, under ``if TYPE_CHECKING:`` too). ``from p import x`` names the module ``p.x`` when
    there is one, else ``p``; the parents a dotted import loads first are not counted (a package's
    ``__init__`` importing its own modules is no cycle)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path)), typing):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph(*packages: str, typing: bool = False) -> dict[str, set[str]]:
    files = {name: path for package in packages for name, path in module_names(package).items()}
    return {name: imports_of(name, path, set(files), typing) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles, one per strongly connected component (Tarjan), each as a closed path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_closed_path(graph, c) for c in components]


def _closed_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component (breadth first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"not a cycle: {component}")


def describe(found: list[list[str]]) -> str:
    return "\n".join(" -> ".join(path) for path in found)


def test_the_graph_reader_sees_function_level_and_relative_imports(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import f\n")
    (package / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (package / "b.py").write_text("from pkg.a import f\nfrom typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    graph = {name: imports_of(name, package / (name.split(".")[-1] + ".py") if name != "pkg"
                              else package / "__init__.py", known) for name in known}
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


@pytest.mark.parametrize("packages", [("softfloat16",), ("softfloat16", "sim")], ids=["core", "core+sim"])
def test_no_import_cycle(packages):
    found = cycles(import_graph(*packages))
    assert not found, f"import cycles in {', '.join(packages)}:\n" + describe(found)


def test_the_graph_reader_sees_type_checking_imports_when_asked(tmp_path):
    path = tmp_path / "b.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n")
    known = {"pkg", "pkg.b", "pkg.c"}
    assert imports_of("pkg.b", path, known) == set()
    assert imports_of("pkg.b", path, known, typing=True) == {"pkg.c"}


def test_the_report_has_no_import_cycle_even_for_type_checking():
    """sim.report's stories and the modules they share import one way only, even in the imports
    a type checker alone reads."""
    found = cycles(import_graph("sim/report", typing=True))
    assert not found, "import cycles in sim.report:\n" + describe(found)
