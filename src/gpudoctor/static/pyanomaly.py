"""Whether a call that turns on autograd anomaly detection is an opt-in debugging switch (GD307).

Why this exists: GD307 warned on ``torch.autograd.set_detect_anomaly(True)`` wherever it was written,
also where the project had already done what the rule's fix asks — put it behind a debug option
(torchtitan: ``if debug_config.detect_anomaly:`` with a warning that it is for debugging only). Such a
call runs only when someone asks for it.

What is found: ``debug_guarded`` on each ``python.anomaly_detection`` site — the call sits in the
body or ``else`` of an ``if`` (or a conditional expression) whose test names a debugging option
(a name or attribute with ``debug`` or ``anomal`` in it: ``args.debug``, ``cfg.detect_anomaly``), or in
a function so named (``def enable_debug_mode():``), or its mode is not a literal
(``set_detect_anomaly(args.detect_anomaly)``: the switch is the option itself).

What it must not do: import torch, or decide on a finding (GD307 does).
"""

from __future__ import annotations

import ast

from gpudoctor.static import pynames as pn
from gpudoctor.static.sites import Site

_DEBUG_WORDS = ("debug", "anomal")


def _names_debug_option(node: ast.AST) -> bool:
    for n in ast.walk(node):
        word = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
            n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None
        if word is not None and any(w in word.lower() for w in _DEBUG_WORDS):
            return True
    return False


def _mode_is_an_option(call: ast.Call) -> bool:
    """``set_detect_anomaly(flag)`` / ``detect_anomaly(mode=flag)`` with a flag that is not a literal."""
    mode = pn.keyword(call, "mode") or (call.args[0] if call.args else None)
    return mode is not None and not pn.is_literal_expr(mode)


def mark_debug_guarded(tree: ast.Module, sites: list[Site]) -> None:
    """Set ``debug_guarded`` on every ``python.anomaly_detection`` site of the file."""
    targets = {(s.line, s.col): s for s in sites if s.scope == "python.anomaly_detection"}
    if not targets:
        return
    for site in targets.values():
        site.values["debug_guarded"] = False
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, guarded = todo.pop()
        if isinstance(node, ast.Call):
            target = targets.get((node.lineno, node.col_offset + 1))
            if target is not None:
                target.values["debug_guarded"] = guarded or _mode_is_an_option(node)
        if isinstance(node, (ast.If, ast.IfExp)):
            inside = guarded or _names_debug_option(node.test)
            todo.append((node.test, guarded))
            body = node.body if isinstance(node.body, list) else [node.body]
            orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
            todo.extend((child, inside) for child in [*body, *orelse])
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            guarded = guarded or any(w in node.name.lower() for w in _DEBUG_WORDS)
        todo.extend((child, guarded) for child in ast.iter_child_nodes(node))
