"""Modules compiled to CUDA graphs that a step calls more than once without marking the step.

Why this exists: ``torch.compile(m, mode="reduce-overhead")`` (and ``"max-autotune"``, which uses
CUDA graphs too) replays recorded graphs whose outputs live in memory the next replay reuses. A
training step that calls the same compiled module twice or more — a GAN's discriminator on the real
and on the fake batch, several forwards before one backward — fails in backward with "accessing
tensor output of CUDAGraphs that has been overwritten by a subsequent run" unless the loop calls
``torch.compiler.cudagraph_mark_step_begin()`` at the start of each iteration (pytorch/examples
DCGAN on the H200: netD called three times per iteration crashed; with the line it ran 1.24× faster
than eager, tests/data/gpu_runs/h200-dcgan/compile_after_input_fix/). GD303's fix is that compile mode,
so this is checked before the job runs.

What is found: names bound to such a compiled module (``x = torch.compile(..., mode=...)``,
``x.compile(mode=...)``, a function decorated with ``@torch.compile(mode=...)``), then every loop
and every function that calls ``backward()`` whose own body (nested loops and functions are judged
on their own) calls one of them at least twice before its last ``backward()`` (anywhere, when it
has none) — in a file that never calls ``cudagraph_mark_step_begin``. One site per (place, name), at
the second call.

What it must not do: decide on a finding (the rule does), or import torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpudoctor.static import pynames as pn
from gpudoctor.static.sites import Site

#: torch.compile modes that capture CUDA graphs.
GRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})
_COMPILE = frozenset({"torch.compile"})
_MARK_STEP = "cudagraph_mark_step_begin"
_SCOPES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def cudagraph_reuse_sites(tree: ast.Module, names: pn.Names) -> list[Site]:
    """Sites ``python.cudagraph_reuse`` (facts: ``module``, ``calls``, ``mode``) of one parsed file."""
    compiled: dict[str, str] = {}  # dotted name → the CUDA-graph compile mode it was compiled with
    scopes: list[ast.AST] = []
    for node in ast.walk(tree):  # one walk: the mark, the compiled names, the loops and functions
        if _is_mark_step(node, names):
            return []
        _note_compiled(node, names, compiled)
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append(node)
    if not compiled:
        return []
    sites: list[Site] = []
    for scope in scopes:
        own = sorted(_own_calls(scope), key=_position)
        backwards = [c for c in own if _is_backward(c)]
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and not backwards:
            continue  # a function is judged as a step only when it runs backward()
        # calls after the iteration's last backward() are left out: no backward of this iteration
        # reads their outputs (DCGAN's netG(fixed_noise), dumped as an image at once). A backward
        # between two calls does not make them safe: DCGAN's three netD calls have one after each.
        last = _position(backwards[-1]) if backwards else (1 << 62, 0)
        calls: dict[str, list[ast.Call]] = {}
        for call in own:
            callee = _dotted(call.func)
            if callee in compiled and _position(call) < last:
                calls.setdefault(callee, []).append(call)
        for callee, found in calls.items():
            if len(found) >= 2:
                second = found[1]
                sites.append(Site("python.cudagraph_reuse", second.lineno, second.col_offset + 1,
                                  {"module": callee, "calls": len(found), "mode": compiled[callee],
                                   "call": pn.short(second, 50)}))
    sites.sort(key=lambda s: (s.line, s.col))
    return sites


def _note_compiled(node: ast.AST, names: pn.Names, out: dict[str, str]) -> None:
    """Record the name ``node`` binds to a CUDA-graph compiled module or function, if it binds one."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
        target = _dotted(node.targets[0])
        mode = _graph_mode(node.value)
        if target and mode and names.is_one_of(names.qualname(node.value.func), _COMPILE):
            out[target] = mode
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile":
        receiver = _dotted(node.func.value)
        mode = _graph_mode(node)
        if receiver and mode and not node.args and names.qualname(node.func) not in _COMPILE:
            out[receiver] = mode  # nn.Module.compile(mode=...): compiles in place
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and names.is_one_of(names.qualname(deco.func), _COMPILE):
                mode = _graph_mode(deco)
                if mode:
                    out[node.name] = mode


def _graph_mode(call: ast.Call) -> str | None:
    mode = pn.literal(pn.keyword(call, "mode"))
    return mode if isinstance(mode, str) and mode in GRAPH_MODES else None


def _dotted(node: ast.AST) -> str | None:
    """``netD`` / ``self.model`` as written; None for anything else."""
    parts = pn.dotted_parts(node)
    return ".".join(parts) if parts else None


def _own_calls(scope: ast.AST) -> Iterator[ast.Call]:
    """The calls in ``scope``'s body, not in the nested loops, functions or classes (judged on their own)."""
    todo: list[ast.AST] = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Call):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _is_backward(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "backward"


def _is_mark_step(node: ast.AST, names: pn.Names) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == _MARK_STEP
    if isinstance(node, ast.Name):
        return node.id == _MARK_STEP or (names.aliases.get(node.id, "").endswith(_MARK_STEP))
    return False
