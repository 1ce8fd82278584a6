"""Inside a package of farm no module imports itself back through others.

docs/architecture.md ("Floors") names the circles left and why; a new one fails
here. The module graph is import-linter's (grimp): imports inside functions and
under ``TYPE_CHECKING`` count, as for the floors.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable, Mapping

import grimp

import farm

#: Every package of farm (a module of the top level has no inside).
PACKAGES = tuple(sorted(f"farm.{m.name}" for m in pkgutil.iter_modules(farm.__path__) if m.ispkg))

#: The circles docs/architecture.md explains, by their modules.
KNOWN = {
    frozenset({"farm.queue.capabilities", "farm.queue.catalog", "farm.queue.spec"}),
    frozenset({"farm.api.interface", "farm.api.service", "farm.api.submitting"}),
}

#: A virtual phone and its parts, which name the phone that composes them: a new
#: part (another shell command module) joins that one circle.
PHONE_PARTS = "farm.virtual.android."

#: The job kinds and the table that lists them (``farm/kinds/__init__.py``), which the
#: runner (``run.py``) and an A/B side (``ab_builds.py``) look kinds up in: a new kind
#: joins that one circle.
KIND_PARTS = "farm.kinds"


def circles(edges: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm).

    Args:
        edges: module -> the modules it imports.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def package_edges(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports, for every module of ``package``."""
    modules = {m for m in graph.modules if m == package or m.startswith(f"{package}.")}
    return {m: graph.find_modules_directly_imported_by(m) & modules - {m} for m in modules}


def test_circles_finds_a_circle_and_only_it():
    """Two modules importing each other are one circle; a module importing them is not in it."""
    edges = {"a": ["b"], "b": ["a"], "c": ["a"], "d": []}
    assert circles(edges) == [frozenset({"a", "b"})]


def test_no_new_circle_inside_a_package():
    """Every circle inside a package is one docs/architecture.md explains."""
    graph = grimp.build_graph("farm", include_external_packages=False)
    new = [
        sorted(circle)
        for package in PACKAGES
        for circle in circles(package_edges(graph, package))
        if circle not in KNOWN
        and not all(m.startswith(PHONE_PARTS) for m in circle)
        and not all(m == KIND_PARTS or m.startswith(f"{KIND_PARTS}.") for m in circle)
    ]
    assert new == []
