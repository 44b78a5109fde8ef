"""The modules of ``sqew`` import one another without circles.

The graph is read from the source, not from a running interpreter: every import of a module
counts, at its top level, inside a function (a lazy import defers a dependency, it does not
remove it) and under ``if TYPE_CHECKING:`` (a module that names another's types for the type
checker depends on it as much as one that calls it). An import of a name from a package (``from
sqew.server import auth``) is an edge to the submodule when there is one, else to the package.
The package ``sqew`` itself is the public facade: it re-exports names lazily, and its type-only
imports of them are not dependencies, so it is a node with no edges out (any module may read
``sqew.__version__``). A module loaded by name (``importlib``: the package's exports,
``Client(target)``'s implementations) is a plug-in found at run time, not an import. A circle is
a strongly connected set of two or more modules; each is reported with one cycle through it,
module by module.

``KNOWN_CYCLES`` names the circles still being cut elsewhere; every other circle fails the test,
and so does an entry of ``KNOWN_CYCLES`` that no longer matches a circle (so the list only
shrinks).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sqew"

KNOWN_CYCLES: dict[str, frozenset[str]] = {
    "backend-coordination": frozenset({"sqew.backends.base", "sqew.backends.coordination"}),
}
"""Circles allowed for now, by name: each is a set of modules a circle may stay within."""


def module_name(path: Path, root: Path = ROOT) -> str:
    """``sqew/server/auth.py`` → ``sqew.server.auth``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the package by name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``sqew`` that module ``name`` imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in known)
            continue
        base = node.module or ""
        if node.level:
            anchor = name.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in known:
                out.add(sub)
            elif base in known:
                out.add(base)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` over ``sqew``; the package ``sqew`` itself imports
    nothing (see the module docstring)."""
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    graph["sqew"] = set()
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members: set[str] = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        members.add(top)
                        if top == node:
                            break
                    if len(members) > 1:
                        found.append(frozenset(members))
    return found


def one_cycle(graph: dict[str, set[str]], members: frozenset[str]) -> list[str]:
    """A shortest cycle within ``members``, as ``[a, b, …, a]``."""
    start = min(members)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{sorted(members)} is not a circle")


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Plain, relative, ``from package import module``, lazy and ``TYPE_CHECKING`` imports are
    all edges; names that are not modules of the package are not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__", "a", "b", "c", "d", "e", "sub/__init__", "sub/f"):
        (package / f"{name}.py").write_text("")
    (package / "a.py").write_text(
        "from __future__ import annotations\n"
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "import pkg.b\n"
        "from . import c\n"
        "from pkg.sub import f, missing\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.d import Thing\n"
        "def later() -> None:\n"
        "    from pkg.e import other\n"
    )
    known = {module_name(p, tmp_path): p for p in package.rglob("*.py")}
    assert imports_of("pkg.a", package / "a.py", known) == {
        "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.sub.f", "pkg.sub"}


def test_a_circle_is_found_and_shown() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert one_cycle(graph, frozenset({"a", "b", "c"})) == ["a", "b", "c", "a"]


def test_the_cut_circles_stay_cut() -> None:
    """The settings, the server's authentication and the client's implementations import no
    module that imports them back."""
    graph = import_graph()
    assert "sqew.server.auth" not in graph["sqew.server.authenticator"]
    assert "sqew.server.runtime" not in graph["sqew.server.authenticator"]
    assert "sqew.server.runtime" not in graph["sqew.server.background"]
    assert not graph["sqew.client.base"] & {"sqew.client.http", "sqew.client.local"}
    assert not graph["sqew.settings.model"] & set(graph) - {"sqew.jsonlimits"}


def test_no_import_circles_but_the_known_ones() -> None:
    graph = import_graph()
    found = circles(graph)
    unknown = [c for c in found if not any(c <= allowed for allowed in KNOWN_CYCLES.values())]
    report = ["import circle: " + " -> ".join(one_cycle(graph, c)) for c in unknown]
    assert not report, "\n".join(report)


def test_every_known_cycle_still_exists() -> None:
    """An allow-list entry that matches no circle any more is removed (the list only shrinks)."""
    found = circles(import_graph())
    gone = [name for name, allowed in KNOWN_CYCLES.items()
            if not any(c <= allowed for c in found)]
    assert not gone, f"these circles are gone: remove them from KNOWN_CYCLES: {gone}"
