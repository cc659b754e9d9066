"""Hand-written attention in source: ``softmax(q @ k.transpose(-2, -1) * scale)`` then ``@ v``.

Why this exists: GD212 finds op-by-op attention in a trace; in code the same pattern is plain to see
and the fix is one line at the user's own line. Most hand-rolled GPTs write it in a model file
(``model.py``'s ``CausalSelfAttention.forward``), not in the training script, so every function of
every checked file is looked at, methods of ``nn.Module`` classes included.

What is found, per function (nested functions are their own), in source order: a matmul (``@``,
``torch.matmul``, ``torch.bmm``) one of whose operands is transposed (``.transpose(-2, -1)``,
``.transpose(2, 3)``, ``.mT``, ``.permute(…)``) makes the *scores*; names assigned from expressions
that read the scores carry them on (scale, ``masked_fill``/``where``, dropout), a ``softmax`` (not
``log_softmax``) marks them normalised, and a matmul whose left operand reads normalised scores
closes the chain. One site ``python.attention`` per chain, at the scores' matmul, with the operand
names as written (``q``, ``k``, ``v``), whether a mask was applied and whether it looks causal (a
``tril``/``triu`` or a buffer named ``bias``/``mask`` filled with ``-inf``), whether the same function
also calls a fused kernel (``attn_fused_alternative``: the chain is the fallback of an ``if self.flash:``
or of an option SDPA cannot do, nanoGPT's and litgpt's) and whether it attends within windows
(``attn_windowed``: Swin's ``self.window_size``, where the scores are window² small).

What it must not do: import torch or decide on a finding (GD212 does).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, replace

from gpudoctor.static.sites import Site

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_MASK_CALLS = frozenset({"masked_fill", "masked_fill_", "where"})
_CAUSAL_HINTS = ("tril", "triu", "bias", "causal", "mask")
#: fused attention entry points: a function that calls one of them has the fused path already
_FUSED_CALLS = frozenset({"scaled_dot_product_attention", "flash_attn_func", "flash_attn_varlen_func",
                          "flash_attn_qkvpacked_func", "memory_efficient_attention", "flex_attention"})


@dataclass(frozen=True)
class _Scores:
    line: int
    col: int
    q: str
    k: str
    masked: bool = False
    causal: bool = False
    softmaxed: bool = False


def attention_sites(tree: ast.Module) -> list[Site]:
    """Sites ``python.attention`` (facts ``attn_q``, ``attn_k``, ``attn_v``, ``attn_masked``, ``attn_causal_mask``, ``attn_fix``) of one file."""
    if not any(isinstance(n, ast.Attribute) and n.attr == "softmax" or isinstance(n, ast.Name) and n.id == "softmax"
               for n in ast.walk(tree)):
        return []
    sites: list[Site] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites.extend(_function_sites(node))
    sites.sort(key=lambda s: (s.line, s.col))
    return sites


def _function_traits(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, bool]:
    """``attn_fused_alternative``: the function calls a fused kernel too (not a method of its own:
    ``self.scaled_dot_product_attention`` is the hand-written code); ``attn_windowed``: it reads a
    window size (``self.window_size``; a sliding window over the whole sequence is no small window)."""
    fused = windowed = False
    for stmt in _statements(fn.body):
        for sub in _walk(stmt):
            if isinstance(sub, ast.Call) and _call_name(sub) in _FUSED_CALLS and not (
                    isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name)
                    and sub.func.value.id == "self"):
                fused = True
            ident = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
            if "window" in ident.lower() and "slid" not in ident.lower():
                windowed = True
    return {"attn_fused_alternative": fused, "attn_windowed": windowed}


def _function_sites(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[Site]:
    scores: dict[str, _Scores] = {}
    traits: dict[str, bool] | None = None
    for stmt in _statements(fn.body):
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr)) else None
        if value is None:
            continue
        done = _closing(value, scores)
        if done is not None:
            s, v = done
            traits = traits if traits is not None else _function_traits(fn)
            site = _site(s, v)
            site.values.update(traits)
            yield site
            continue
        state = _state(value, scores)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            name = _target_name(target)
            if name is None:
                continue
            if state is not None:
                scores[name] = state
            elif not isinstance(stmt, ast.AugAssign):
                scores.pop(name, None)


def _site(s: _Scores, v: str) -> Site:
    mask = "is_causal=True" if s.causal or not s.masked else "attn_mask=<the mask>"
    fix = f"F.scaled_dot_product_attention({s.q}, {s.k}, {v}, {mask})"
    return Site("python.attention", s.line, s.col, {"attn_q": s.q, "attn_k": s.k, "attn_v": v, "attn_masked": s.masked,
                                                    "attn_causal_mask": s.causal, "attn_fix": fix})


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        if isinstance(stmt, _NESTED):
            continue
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                yield from _statements([s for s in inner if isinstance(s, ast.stmt)])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _statements(handler.body)


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    return None


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """The node and what it holds, not entering nested lambdas."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.Lambda):
            yield from _walk(child)


def _matmul(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("matmul", "bmm") \
            and len(node.args) == 2:
        return node.args[0], node.args[1]
    return None


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def _transposed(node: ast.expr) -> ast.expr | None:
    """The operand itself when ``node`` transposes its last two dims (``k.transpose(-2, -1)``, ``k.mT``)."""
    if isinstance(node, ast.Attribute) and node.attr in ("mT", "T"):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "permute"):
        return node.func.value
    return None


def _reads(node: ast.AST, scores: dict[str, _Scores]) -> _Scores | None:
    for sub in _walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute)) and not isinstance(getattr(sub, "ctx", None), ast.Store):
            key = sub.id if isinstance(sub, ast.Name) else ast.unparse(sub)
            if key in scores:
                return scores[key]
    return None


def _state(node: ast.expr, scores: dict[str, _Scores]) -> _Scores | None:
    """The scores an expression carries (new ones from a transposed matmul, else ones it reads), updated
    with the mask and softmax it applies."""
    found: _Scores | None = None
    for sub in _walk(node):
        pair = _matmul(sub)
        if pair is not None and _reads(sub, scores) is None:
            left, right = pair
            k = _transposed(right)
            if k is not None:
                found = _Scores(sub.lineno, sub.col_offset + 1, ast.unparse(left), ast.unparse(k))  # type: ignore[attr-defined]
                break
    if found is None:
        found = _reads(node, scores)
    if found is None:
        return None
    for sub in _walk(node):
        name = _call_name(sub)
        if name in _MASK_CALLS:
            text = ast.unparse(sub).lower()
            found = replace(found, masked=True, causal=found.causal or ("inf" in text and any(h in text for h in _CAUSAL_HINTS)))
        elif name == "softmax":
            found = replace(found, softmaxed=True)
    return found


def _closing(node: ast.expr, scores: dict[str, _Scores]) -> tuple[_Scores, str] | None:
    """(the scores, v as written) when the expression multiplies normalised scores by ``v``."""
    for sub in _walk(node):
        pair = _matmul(sub)
        if pair is None:
            continue
        left, right = pair
        state = _state(left, scores)
        if state is not None and state.softmaxed:
            return state, ast.unparse(right)
    return None
