"""No import circles in gpudoctor, and packages in declared layers (issue 37 item 5).

The graph is read from the source with :mod:`ast`, not from ``sys.modules``, so that an import inside a
function counts: a function-level import hides a circle from Python, not from the reader. What counts:

- every ``import``/``from … import`` of a gpudoctor module, at module level or in a function, and
  ``importlib.import_module("gpudoctor.…")`` with a literal (or an f-string's literal head);
- not imports under ``if TYPE_CHECKING:`` (type-only pairs are allowed both ways);
- not a package ``__init__``'s imports of its own modules *inside functions* (a PEP 562 lazy facade,
  as in ``gpudoctor/__init__.py`` and ``catalog/__init__.py``): those run only when a name is asked
  for. A name imported through such a facade (``from gpudoctor.catalog import Catalog``) counts as an
  import of the module that defines it. A package ``__init__``'s module-level imports do count: they
  run whenever anything in the package is imported.

Two checks: (a) no circle among modules, each reported as a chain ``a -> b -> a``; (b) every arrow
between *units* (a sub-package such as ``trace``, or a top-level module such as ``model``) points down
``LAYERS``. Units in one layer must not import each other either, so each layer lists peers that are
independent today. A new sub-package or top-level module fails (b) until it is given a layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpudoctor"

#: The layering, bottom first: a unit may import units of lower layers only. Read from the code (what
#: each unit imports), not wished for; the reason each unit sits where it does is the arrow that puts
#: it there. ``gpudoctor`` is the root ``__init__`` (``__version__`` and the lazy notebook facade).
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    # leaves: import nothing of gpudoctor
    "gpudoctor exitcodes numbers severity quantiles boundedio forkpool isolated bottleneck",
    # the finding model; config; the in-process agent (runs in the user's process: stays near the floor)
    "model config agent",
    # rule files, the condition language, the engine
    "catalog",
    # cross-rank straggler scoring (reads the catalog's rule options); the report model and renderers
    "straggler report",
    # the three analysers, each on its own input: traces, files on disk, two saved runs
    "trace static compare",
    # analyze/check end to end (trace + static -> report)
    "pipeline",
    # the notebook API; the live session (agent link, NVML, ranks; judges via pipeline)
    "api live",
    # the Textual dashboard over the live session
    "tui",
    # one module per subcommand
    "commands",
    # the argument parser and dispatch (imports commands by name)
    "cli",
    "__main__",
))


def _modules(src: Path = SRC) -> dict[str, Path]:
    return {_module_name_under(src, p): p for p in src.rglob("*.py")}


def _module_name_under(src: Path, path: Path) -> str:
    parts = path.relative_to(src.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:`` (the body, not an ``else``)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                hidden.update(id(n) for n in ast.walk(child))
    return hidden


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def _absolute(module: str | None, level: int, name: str, path: Path) -> str:
    if not level:
        return module or ""
    package = name if _is_package(path) else name.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([module] if module else []))


def _dynamic_target(node: ast.Call) -> str | None:
    """``importlib.import_module("gpudoctor.x")`` → ``gpudoctor.x``; an f-string → its literal head."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called != "import_module" or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


def _parse(modules: dict[str, Path]) -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for name, path in modules.items()}


def _facades(modules: dict[str, Path], trees: dict[str, ast.Module]) -> dict[str, dict[str, str]]:
    """For each package: name it exposes → the gpudoctor module it takes that name from."""
    out: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        if not _is_package(path):
            continue
        names: dict[str, str] = {}
        for node in ast.walk(trees[name]):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node.module, node.level, name, path)
                for alias in node.names:
                    target = f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    if target in modules and target.startswith(name + "."):
                        names[alias.asname or alias.name] = target
        out[name] = names
    return out


def _imports(name: str, path: Path, tree: ast.Module, modules: dict[str, Path],
             facades: dict[str, dict[str, str]]) -> set[str]:
    hidden = _type_checking_nodes(tree)
    lazy = _function_nodes(tree) if _is_package(path) else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        targets: set[str] = set()
        if isinstance(node, ast.Import):
            targets = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node.module, node.level, name, path)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    targets.add(f"{source}.{alias.name}")
                else:
                    targets.add(facades.get(source, {}).get(alias.name, source))
        elif isinstance(node, ast.Call):
            dynamic = _dynamic_target(node)
            targets = {dynamic} if dynamic else set()
        for target in targets:
            if target not in modules or target == name:
                continue
            if id(node) in lazy and target.startswith(name + "."):
                continue  # a package's lazy facade over its own modules
            found.add(target)
    return found


def _graph(src: Path = SRC) -> dict[str, set[str]]:
    modules = _modules(src)
    trees = _parse(modules)
    facades = _facades(modules, trees)
    return {name: _imports(name, path, trees[name], modules, facades) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative), members sorted."""
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


def _chain(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One circle through the component's first member, as ``[a, b, …, a]`` (shortest, by BFS)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no circle through {start} in {component}")


def _short(module: str) -> str:
    return module.removeprefix("gpudoctor.")


def _unit(module: str, src: Path = SRC) -> str:
    """The layer unit of a module: its sub-package, or itself for a top-level module."""
    parts = module.split(".")
    if len(parts) > 1 and (src / parts[1] / "__init__.py").is_file():
        return parts[1]
    return parts[1] if len(parts) > 1 else module


def _layer_of(unit: str, layers: tuple[frozenset[str], ...]) -> int | None:
    return next((i for i, layer in enumerate(layers) if unit in layer), None)


def _layer_violations(graph: dict[str, set[str]], layers: tuple[frozenset[str], ...],
                      src: Path = SRC) -> list[str]:
    problems: set[str] = set()
    for source, targets in graph.items():
        a = _unit(source, src)
        if _layer_of(a, layers) is None:
            problems.add(f"{a} has no layer in LAYERS")
        for target in targets:
            b = _unit(target, src)
            la, lb = _layer_of(a, layers), _layer_of(b, layers)
            if a == b or la is None or lb is None or lb < la:
                continue
            how = "its peer" if la == lb else "the higher"
            problems.add(f"{_short(source)} imports {_short(target)}: {a} (layer {la}) must not import "
                         f"{how} {b} (layer {lb})")
    return sorted(problems)


def test_no_module_imports_itself_in_a_circle() -> None:
    graph = _graph()
    chains = []
    for component in _circles(graph):
        chain = _chain(graph, component)
        line = " -> ".join(_short(m) for m in chain)
        if len(component) > len(chain) - 1:  # more circles in the same knot: name all its modules
            line += f"  (one of the circles among: {', '.join(_short(m) for m in component)})"
        chains.append(line)
    assert chains == [], "import circles:\n  " + "\n  ".join(chains)


def test_packages_import_only_down_the_layers() -> None:
    problems = _layer_violations(_graph(), LAYERS)
    assert problems == [], "layering broken:\n  " + "\n  ".join(problems)


def test_every_layer_unit_exists() -> None:
    units = {_unit(m) for m in _modules()}
    declared = set().union(*LAYERS)
    assert declared - units == set(), "LAYERS names units that are gone"
    assert sum(len(layer) for layer in LAYERS) == len(declared), "a unit is in two layers"


# --- the checks can fail -------------------------------------------------------------------------------


@pytest.mark.parametrize(("graph", "expected"), [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_finder_finds_circles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _circles(graph) == expected


def test_a_circle_reads_as_a_chain() -> None:
    graph = {"a": {"b", "x"}, "b": {"c"}, "c": {"a"}, "x": set()}
    assert _chain(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "gpudoctor"
    for rel, text in {"__init__.py": "", **files}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


def test_function_level_imports_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "x.py": "def f():\n    from gpudoctor.y import g\n",
        "y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gpudoctor.x\n",
    })
    assert _graph(src) == {"gpudoctor": set(), "gpudoctor.x": {"gpudoctor.y"}, "gpudoctor.y": set()}


def test_a_hidden_circle_is_found(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "p/__init__.py": "",
        "p/a.py": "from gpudoctor.p.b import f\n",
        "p/b.py": "def f():\n    from gpudoctor.p.a import g\n",
    })
    graph = _graph(src)
    assert [_chain(graph, c) for c in _circles(graph)] == [["gpudoctor.p.a", "gpudoctor.p.b", "gpudoctor.p.a"]]


def test_a_name_through_a_facade_counts_as_its_module(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "p/__init__.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpudoctor.p.a import A\n"
                          "def __getattr__(name):\n    from gpudoctor.p import a\n    return a.A\n"),
        "p/a.py": "from gpudoctor.q import B\n",
        "q/__init__.py": "from gpudoctor.q.b import B\n",
        "q/b.py": "from gpudoctor.p import A\n",
        "r.py": "import importlib\nimportlib.import_module(f'gpudoctor.q.{1}')\n",
    })
    graph = _graph(src)
    assert graph["gpudoctor.p"] == set()  # the lazy facade is no edge of its own
    assert graph["gpudoctor.q.b"] == {"gpudoctor.p.a"}
    assert graph["gpudoctor.r"] == {"gpudoctor.q"}
    assert _circles(graph) == [["gpudoctor.p.a", "gpudoctor.q.b"]]


def test_a_back_arrow_and_a_peer_arrow_fail_the_layers(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "low.py": "import gpudoctor.high\n",
        "high.py": "",
        "p/__init__.py": "",
        "p/a.py": "from gpudoctor.q import b\n",
        "q/__init__.py": "",
        "q/b.py": "",
        "new.py": "",
    })
    layers = (frozenset({"gpudoctor", "low"}), frozenset({"p", "q"}), frozenset({"high"}))
    assert _layer_violations(_graph(src), layers, src) == [
        "low imports high: low (layer 0) must not import the higher high (layer 2)",
        "new has no layer in LAYERS",
        "p.a imports q.b: p (layer 1) must not import its peer q (layer 1)",
    ]
