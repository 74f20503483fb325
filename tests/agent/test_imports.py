"""No import cycle inside ``condukt.agent``: every import counts, type-only and function-level ones included.

The check reads the source (``ast``), not what happens to be imported: an
import under ``if TYPE_CHECKING:`` or inside a function is an edge like any
other, since it is a dependency all the same (it only hides a cycle from
the interpreter). Run it alone with::

    .venv/bin/python -m pytest tests/agent/test_imports.py -q

Edges: ``from X import a`` depends on the module ``X.a`` when there is one,
else on ``X``; ``import X.Y`` on ``X.Y``. Importing a module of a
subpackage (``condukt.agent.capabilities.resume``) from outside that
subpackage also runs the subpackage's ``__init__`` first, so it depends on
that too. The package's own ``__init__`` (``condukt.agent``) is the public
façade that imports everything; a module inside importing it would show up
as a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import condukt.agent

PACKAGE = Path(condukt.agent.__file__).parent


def module_files(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module of the package at ``root`` (named ``package``): dotted name -> (file, is a package)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _targets(node: ast.AST, here: list[str], modules: dict[str, tuple[Path, bool]]) -> Iterator[tuple[str, int]]:
    """The modules an import statement names (dotted, possibly outside the package), with its line."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = here[: len(here) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            yield (submodule if submodule in modules else target), node.lineno
    elif isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, node.lineno


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    """Module -> {module it depends on inside the package: line of the first import that says so}."""
    modules = module_files(root, package)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target, line in _targets(node, here, modules):
                depends = [target]
                # A subpackage's __init__ runs before its modules, for an importer outside it.
                parent = target.rpartition(".")[0]
                while parent != package and parent in modules and not (name + ".").startswith(parent + "."):
                    depends.append(parent)
                    parent = parent.rpartition(".")[0]
                for dependency in depends:
                    if dependency in modules and dependency != name:
                        graph[name].setdefault(dependency, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (as a path ``a -> b -> ... -> a``) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_a_cycle_in(graph, component) for component in components]


def _a_cycle_in(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A path around ``component`` (breadth-first from its first member back to it)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for other in sorted(graph[node]):
                if other == start:
                    return [*paths[node], start]
                if other in component and other not in paths:
                    paths[other] = [*paths[node], other]
                    following.append(other)
        frontier = following
    raise AssertionError("a strongly connected component always has a cycle")


def _described(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "\n  ".join(steps)


def test_condukt_agent_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE, "condukt.agent")
    found = cycles(graph)
    assert found == [], "import cycles in condukt.agent:\n  " + "\n\n  ".join(_described(graph, c) for c in found)


def test_the_scan_sees_the_package_and_its_hidden_imports() -> None:
    graph = import_graph(PACKAGE, "condukt.agent")
    assert "condukt.agent._state" in graph
    assert "condukt.agent.capabilities.persistence" in graph
    # A relative import two levels up, from the capabilities wing into the kernel.
    assert "condukt.agent._capability" in graph["condukt.agent.capabilities.persistence"]
    # The kernel reads the list of built-ins: importing one of its modules runs the wing's __init__.
    assert "condukt.agent.capabilities" in graph["condukt.agent._plan"]


def test_the_check_finds_type_only_and_function_level_cycles(tmp_path: Path) -> None:
    """The checker on a made-up package: what it must catch, and what it must not."""
    package = tmp_path / "pkg"
    (package / "wing").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import A\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nclass A: ...\n"
    )
    (package / "b.py").write_text("from .a import A\nclass B: ...\n")
    (package / "c.py").write_text("def f():\n    from . import d\n    return d\n")
    (package / "d.py").write_text("import pkg.c\n")
    (package / "wing" / "__init__.py").write_text("from .one import One\nfrom .two import Two\n")
    (package / "wing" / "one.py").write_text("from .two import Two\nclass One: ...\n")  # inside: no cycle
    (package / "wing" / "two.py").write_text("from ..e import E\nclass Two: ...\n")
    (package / "e.py").write_text("class E: ...\n")
    (package / "f.py").write_text("from .wing.one import One\n")
    (package / "g.py").write_text("from .f import *\n")
    graph = import_graph(package, "pkg")
    assert graph["pkg.a"] == {"pkg.b": 3}
    assert graph["pkg.f"] == {"pkg.wing.one": 1, "pkg.wing": 1}
    found = sorted(tuple(cycle) for cycle in cycles(graph))
    assert found == [("pkg.a", "pkg.b", "pkg.a"), ("pkg.c", "pkg.d", "pkg.c")]
    # A module of the wing importing back into what imports the wing: a cycle through its __init__.
    (package / "e.py").write_text("from .f import *\nclass E: ...\n")
    found = sorted(tuple(cycle) for cycle in cycles(import_graph(package, "pkg")))
    assert ("pkg.e", "pkg.f", "pkg.wing", "pkg.wing.two", "pkg.e") in found
