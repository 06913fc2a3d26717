"""No two of memdir's modules depend on each other, directly or through others.

An import circle is hidden coupling: each side can only be understood, tested and moved
with the other, and one that runs at import time fails with a half-initialised module
depending on which side a user happens to import first. So the graph of memdir's own
imports must have none. Imports inside functions count, since moving one into a function
is the usual way to hide a circle rather than remove it; imports under ``TYPE_CHECKING``
do not, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import memdir

SRC = Path(memdir.__file__).parent
PACKAGE = "memdir"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:``, however ``TYPE_CHECKING`` was imported or renamed."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", "")
    return isinstance(name, str) and name.lstrip("_") == "TYPE_CHECKING"


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, however deeply nested."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _imports(node)


def _base(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> set[str]:
    """The memdir modules an import statement runs."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    base = _base(node, module, is_package)
    submodules = {f"{base}.{alias.name}" for alias in node.names} & known
    # ``from memdir.tools import _memory`` runs the package and the submodule; but a
    # module inside ``memdir.tools`` naming a sibling that way relies on nothing of the
    # package that Python has not already set up to import the module itself.
    ancestor = module.startswith(base + ".") or (is_package and module == base)
    if ancestor and len(submodules) == len(node.names):
        return submodules
    return submodules | ({base} & known)


def import_graph() -> dict[str, set[str]]:
    """Each memdir module and the memdir modules it imports."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(tree):
            edges |= _targets(node, name, is_package, known)
        # A package's own submodules importing each other through it is not a circle
        # of concepts, but a module importing its own package is (it runs half-built).
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found is not None:
                return found
    return None


def test_memdir_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the walk found too few modules to mean anything"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or ())


def test_the_walk_sees_what_it_must() -> None:
    graph = import_graph()
    # a plain absolute import, and one inside a function (opentelemetry is an extra)
    assert "memdir.store" in graph["memdir.permissions"]
    assert "memdir._otel" in graph["memdir.telemetry"]
    # the package's lazy exports go through importlib, not an import statement
    assert "memdir.extract" not in graph["memdir"]


def test_cycles_are_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_which_imports_count() -> None:
    known = {"memdir", "memdir.fork", "memdir.x", "memdir.x._y", "memdir.x.store", "memdir.z"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from memdir import fork\n"
        "def f():\n    from . import store\n"
        "from memdir.x import _y\n"
        "import memdir.z\n"
    )
    found = {
        target
        for node in _imports(ast.parse(source))
        for target in _targets(node, "memdir.x.m", False, known)
    }
    # Not the TYPE_CHECKING import; the one inside a function does count. Siblings named
    # through their own package do not run the package's code again.
    assert found == {"memdir.x.store", "memdir.x._y", "memdir.z"}
    outside = ast.parse("from memdir.x import _y, name\n").body[0]
    assert isinstance(outside, ast.ImportFrom)
    assert _targets(outside, "memdir.z", False, known) == {"memdir.x", "memdir.x._y"}
    assert _targets(outside, "memdir.x.m", False, known) == {"memdir.x", "memdir.x._y"}
