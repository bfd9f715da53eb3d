"""The modules of rlmem (``rlmem/``, ``agents/`` as ``rlmem.agents``, ``envs/`` as
``rlmem.envs``) import one another one way: no circle between modules, none between their
packages, the cells at the bottom, and no module imports a CLI.

Read from the source with :mod:`ast`, so every import counts: at the top of a module, inside a
function (a lazy import) and under ``if TYPE_CHECKING:`` alike, since each is a dependency
that a reader follows. ``from package import name`` is an edge to the module
``package.name`` where there is one, else to ``package``.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import pytest

import rlmem
import rlmem.agents
import rlmem.envs

Graph = Mapping[str, frozenset[str]]
"""Each module -> the modules of rlmem it imports."""


def module_files() -> dict[str, Path]:
    """Every module of rlmem by its dotted name (a package by its ``__init__.py``)."""
    roots = {package.__name__: Path(package.__path__[0])
             for package in (rlmem, rlmem.agents, rlmem.envs)}
    files: dict[str, Path] = {}
    for prefix, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([prefix, *parts])
            if not any(name.startswith(f"{other}.") or name == other
                       for other in roots if other != prefix and other.startswith(prefix)):
                files[name] = path
    return files


def imported(tree: ast.Module, package: str, modules: Collection[str]) -> Iterator[str]:
    """The modules of ``modules`` that ``tree``, the source of a module in ``package``,
    imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[:len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                if name in modules:
                    yield name
                elif base in modules:
                    yield base


def import_graph() -> Graph:
    """The imports between rlmem's modules (:data:`Graph`)."""
    files = module_files()
    graph: dict[str, frozenset[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = frozenset(imported(tree, package, files)) - {name}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan's
    algorithm, iterative): each is a set of modules that import one another in a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def restricted(graph: Graph, keep: frozenset[str]) -> Graph:
    """``graph`` among the modules of ``keep`` only."""
    return {name: targets & keep for name, targets in graph.items() if name in keep}


def packages(graph: Graph) -> Graph:
    """``graph`` between rlmem's packages and top-level modules (``rlmem.agents``,
    ``rlmem.train``, ...); the root ``rlmem`` (its version) is left out."""
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name == "rlmem":
            continue
        edges.setdefault(top(name), set()).update(
            top(target) for target in targets if target != "rlmem" and top(target) != top(name))
    return {name: frozenset(targets) for name, targets in edges.items()}


def clis() -> set[str]:
    """The modules run as programs (``python -m rlmem.train``)."""
    return {name for name, path in module_files().items()
            if 'if __name__ == "__main__":' in path.read_text()}


GRAPH = import_graph()
OUTSIDE_CELLS = frozenset(name for name in GRAPH
                          if name != "rlmem.cells" and not name.startswith("rlmem.cells."))


def test_the_graph_reads_every_kind_of_import() -> None:
    """Top-level, lazy (in a function) and ``TYPE_CHECKING`` imports are all edges."""
    assert "rlmem.agents.ppo.train" in GRAPH["rlmem.agents.ppo"]  # in a function
    assert "rlmem.agents.run_config" in GRAPH["rlmem.agents.base"]  # under TYPE_CHECKING
    assert "rlmem.schema.train" in GRAPH["rlmem.train"]
    assert len(GRAPH) > 100


def test_no_module_outside_the_cells_is_in_an_import_circle() -> None:
    assert cycles(restricted(GRAPH, OUTSIDE_CELLS)) == []


@pytest.mark.xfail(strict=True, reason="the cells <-> _engines circles: issue 52's engines part "
                                       "removes them; then drop this mark")
def test_no_module_is_in_an_import_circle() -> None:
    assert cycles(GRAPH) == []


def test_packages_import_one_another_one_way() -> None:
    """No circle between packages either (``schema -> agents -> schema`` was one)."""
    assert cycles(packages(restricted(GRAPH, OUTSIDE_CELLS))) == []
    assert cycles(packages(GRAPH)) == []


def test_the_cells_are_at_the_bottom_and_nothing_imports_a_cli() -> None:
    cells = {name for name in GRAPH if name not in OUTSIDE_CELLS}
    above = {(name, target) for name in cells for target in GRAPH[name]
             if target not in cells}
    assert above == set()
    programs = clis()
    assert {"rlmem.train", "rlmem.supervised", "rlmem.evaluate"} <= programs
    assert {(name, target) for name, targets in GRAPH.items() for target in targets
            if target in programs} == set()


def test_a_circle_is_found() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}),
             "d": frozenset({"a"})}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles(restricted(graph, frozenset({"a", "b", "d"}))) == []
