"""The import graph of forensics/ and replay/: no circle, and no private name imported across modules.

Built from the source with ``ast``: every import counts, the ones inside functions too (an import
moved into a function to dodge a circle is still a circle); imports under ``if TYPE_CHECKING:``
do not run and are left out. A package's ``__init__`` is the module named after the package.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("forensics", "replay")


def _modules() -> dict[str, Path]:
    mods = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _runtime_imports(tree: ast.Module):
    """Every Import / ImportFrom node outside ``if TYPE_CHECKING:`` blocks."""
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return [n for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in typing_only]


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache   # parsed once for the three tests that read it (~1.7 s CPU each time)
def _graph():
    """``(edges, private)``: module -> the project modules it imports, and every
    ``(importer, imported module, name)`` of a private name imported from another module."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[tuple[str, str, str]] = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                imported = [(_resolve(a.name, mods), None) for a in node.names]
            else:
                base = _absolute(module, path, node)
                imported = []
                for a in node.names:
                    if f"{base}.{a.name}" in mods:   # ``from pkg import submodule``
                        imported.append((f"{base}.{a.name}", None))
                    else:                            # a name defined in (or re-exported by) base
                        imported.append((_resolve(base, mods), a.name))
            for found, name in imported:
                if found is None or found == module:
                    continue
                edges[module].add(found)
                if name is not None and name.startswith("_") and not name.startswith("__"):
                    private.append((module, found, name))
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_are_found():
    """The search itself, on a hand-made graph: a -> b -> c -> a is one circle, d alone none."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_the_graph_sees_imports_inside_functions():
    edges, _ = _graph()
    # forensics.pipeline imports replay.identify inside a function only (the trtllm: policies)
    assert "replay.identify" in edges["forensics.pipeline"]
    assert "forensics.readers.files" in edges["forensics.readers"]


def test_no_import_circle():
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_no_private_name_imported_across_modules():
    _, private = _graph()
    assert private == []
