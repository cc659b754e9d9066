"""Does the producer named for each registered fact really emit it? A static look at its source.

Why this exists: the registry (:mod:`gpudoctor.catalog.registry`) names a producer module for every
fact, and rule loading trusts the registry. A row whose producer never writes the name is a rule
block that can never fire — ``host_syncs_per_step`` was declared as an agent field that nothing
filled, and GD301's live block stayed silent without anyone noticing. :func:`unproduced` reads each
producer's source with :mod:`ast` and looks for the name where a producer writes a fact:

- a string constant (``values["idle_pct"] = …``, ``("gpu_util_pct", …)``, a dict key);
- a keyword argument name (``StepStats(host_syncs_per_step=…)``, ``dict(idle_pct=…)``);
- an f-string or a ``+`` concatenation whose constant parts match, the rest standing for one
  identifier-like piece (``f"stack_{name}_pct"``, ``"part_" + slug + "_ms"``).

A bare annotation (a dataclass field ``host_syncs_per_step: float = 0.0``) is a declaration, not a
producer, and does not count. Producer ``agent`` means every module of :mod:`gpudoctor.agent` except
the declaration-only wire format (``protocol.py``) and gpudoctor's own side of the socket
(``client.py``, which receives the agent's replies and produces nothing).

What it must not do: import the producers (the agent's modules run inside the target; some import
torch lazily) — only their source is read.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpudoctor.catalog.registry import FactSpec

#: Modules of the agent package that declare or receive facts rather than produce them.
AGENT_NOT_PRODUCERS = frozenset({"protocol", "client"})

#: What an f-string's formatted part, or a non-constant operand of ``+``, may stand for.
_PIECE = r"[A-Za-z0-9_]+"


@dataclass(frozen=True)
class EmittedNames:
    """Every name one module could write as a fact: exact strings and name patterns."""

    exact: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]

    def emits(self, name: str) -> bool:
        return name in self.exact or any(p.fullmatch(name) for p in self.patterns)


def producer_files(producer: str) -> list[Path]:
    """The source files of a registry ``producer`` (``trace.metrics`` → …/trace/metrics.py).

    Raises:
        ValueError: the producer names no module of gpudoctor.
    """
    if producer == "agent":
        spec = importlib.util.find_spec("gpudoctor.agent")
        if spec is None or not spec.submodule_search_locations:
            raise ValueError("producer 'agent': the gpudoctor.agent package is missing")
        folder = Path(next(iter(spec.submodule_search_locations)))
        return [f for f in sorted(folder.rglob("*.py")) if f.stem not in AGENT_NOT_PRODUCERS]
    spec = importlib.util.find_spec(f"gpudoctor.{producer}")
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ValueError(f"producer {producer!r} is no module of gpudoctor")
    return [Path(spec.origin)]


@cache
def emitted_names(path: Path) -> EmittedNames:
    """The names a module's source could emit (see the module docstring for what counts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    exact: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    concatenated: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and id(node) not in concatenated:
            operands = _flatten_add(node, concatenated)
            if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                patterns.append(_pattern(operands))
        elif isinstance(node, ast.JoinedStr):
            patterns.append(_pattern(node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            exact.add(node.value)
        elif isinstance(node, ast.keyword) and node.arg is not None:
            exact.add(node.arg)
    return EmittedNames(frozenset(exact), tuple(patterns))


def _flatten_add(node: ast.expr, seen: set[int]) -> list[ast.expr]:
    """``a + b + c`` as ``[a, b, c]``; the inner ``+`` nodes are marked so they are not read twice."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        seen.add(id(node))
        return [*_flatten_add(node.left, seen), *_flatten_add(node.right, seen)]
    return [node]


def _pattern(parts: Iterable[ast.expr]) -> re.Pattern[str]:
    pieces = []
    for part in parts:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            pieces.append(re.escape(part.value))
        elif isinstance(part, ast.JoinedStr):
            pieces.append(_pattern(part.values).pattern)
        else:
            pieces.append(_PIECE)
    return re.compile("".join(pieces))


def producer_emits(spec: FactSpec) -> bool:
    """Whether some source file of ``spec.producer`` could write ``spec.name``."""
    return any(emitted_names(path).emits(spec.name) for path in producer_files(spec.producer))


def unproduced(registry: Iterable[FactSpec]) -> list[FactSpec]:
    """The registered facts whose named producer never writes the name (or names no module)."""
    out = []
    for spec in registry:
        try:
            produced = producer_emits(spec)
        except ValueError:
            produced = False
        if not produced:
            out.append(spec)
    return out
