"""No import circles in gpudoctor (issue 37 item 5): neither between modules nor between packages.

Every ``import`` of a gpudoctor module counts, at module level or inside a function (a function-level
import hides a circle from Python, not from the reader), except imports under ``if TYPE_CHECKING:`` and
a package ``__init__``'s lazy re-exports of its own modules. Packages are gpudoctor's sub-packages
(agent, catalog, trace, …); each top-level module (model, pipeline, …) counts as its own node, so a
new arrow back up the layers (say ``model`` importing ``report``) closes a circle and fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpudoctor"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(n) for n in ast.walk(node))
    return hidden


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    hidden = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name and not m.startswith(name + ".")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
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
                    circles.append(sorted(component))
    return circles


def _package_node(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and (SRC / parts[1]).is_dir():
        return parts[1]
    return module


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        out.setdefault(_package_node(source), set())
        for target in targets:
            a, b = _package_node(source), _package_node(target)
            if a != b:
                out[a].add(b)
    return out


def test_no_module_imports_itself_in_a_circle() -> None:
    assert _circles(_graph()) == []


def test_packages_form_layers_without_back_arrows() -> None:
    assert _circles(_package_graph(_graph())) == []


@pytest.mark.parametrize(("graph", "expected"), [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_finder_finds_circles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _circles(graph) == expected


def test_a_function_level_import_counts(tmp_path: Path) -> None:
    modules = {"gpudoctor.x": tmp_path / "x.py", "gpudoctor.y": tmp_path / "y.py"}
    modules["gpudoctor.x"].write_text("def f():\n    from gpudoctor.y import g\n")
    modules["gpudoctor.y"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gpudoctor.x\n")
    assert _imports("gpudoctor.x", modules["gpudoctor.x"], modules) == {"gpudoctor.y"}
    assert _imports("gpudoctor.y", modules["gpudoctor.y"], modules) == set()
