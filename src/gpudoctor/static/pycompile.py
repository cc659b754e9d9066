"""``torch.compile`` calls whose compiled module never runs.

Why this exists: ``torch.compile(model)`` returns a new module and leaves ``model`` as it was, so two
common lines compile nothing that trains. A call whose result is dropped (``torch.compile(model)``
as a statement) has no effect at all; and a compile after a wrapper took the model —
``trainer = Trainer(model=model, …)``, ``ddp = DDP(model)``, ``engine, … = deepspeed.initialize(
model=model, …)``, ``prepared = accelerator.prepare(model)`` — rebinds a name the wrapper does not
hold: the wrapper (what the script then trains) calls the uncompiled module. GD403 stayed quiet on
both, since a ``torch.compile`` call is present.

What is found, per scope (the module's code, each function; nested functions and classes are their
own scopes), in source order through ``if``/``with``/``try``/loop blocks: a site
``python.compile_no_effect`` for a dropped ``torch.compile(...)`` (``compile_problem = "discarded"``), and for
``x = torch.compile(m)`` when earlier in the scope ``w = Wrapper(m …)`` bound the uncompiled ``m`` to
another name ``w``, that name is not bound again between, and the scope reads ``w`` after the compile
(``compile_problem = "wrapped_before"``). ``m.compile()`` compiles in place and is no such call; a wrapper that
rebinds the model's own name (``model = DDP(model)``) is compiled by a later ``torch.compile(model)``.

What it must not do: import torch or decide on a finding (GD404 does).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from gpudoctor.static import pynames as pn
from gpudoctor.static.sites import Site

_COMPILE = frozenset({"torch.compile"})
_FSDP = frozenset({"torch.distributed.fsdp.FullyShardedDataParallel",
                   "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers")


@dataclass(frozen=True)
class _Wrap:
    wrapper: str     # the name the wrapper is bound to (``trainer``, ``self.engine``)
    model: str       # the model name it took (``model``)
    kind: str        # trainer | ddp | fsdp | accelerate | fabric | deepspeed | data_parallel
    call: str
    line: int


def compile_no_effect_sites(tree: ast.Module, names: pn.Names) -> list[Site]:
    """Sites ``python.compile_no_effect`` (facts ``compile_problem``, ``call``, and for a compile after a
    wrapper ``wrapper``, ``wrapper_kind``, ``wrapper_call``, ``wrapper_line``) of one parsed file."""
    if "compile" not in {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} and \
            not any(v.endswith(".compile") for v in names.aliases.values()):
        return []
    sites: list[Site] = []
    for scope in _scopes(tree):
        sites.extend(_judge_scope(list(_statements(scope.body)), names))
    sites.sort(key=lambda s: (s.line, s.col))
    return sites


def _scopes(tree: ast.Module) -> Iterator[ast.Module | ast.FunctionDef | ast.AsyncFunctionDef]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The scope's statements in source order, nested blocks flattened, nested scopes left out."""
    for stmt in body:
        if isinstance(stmt, _NESTED):
            continue
        yield stmt
        for field in _BLOCK_FIELDS:
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                for item in inner:
                    if isinstance(item, ast.ExceptHandler):
                        yield from _statements(item.body)
                    elif isinstance(item, ast.stmt):
                        yield from _statements([item])
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _statements(case.body)


def _judge_scope(statements: list[ast.stmt], names: pn.Names) -> Iterator[Site]:
    wraps: dict[str, _Wrap] = {}  # model name → the last wrapper that took it
    for index, stmt in enumerate(statements):
        if isinstance(stmt, ast.Expr) and _is_compile(stmt.value, names):
            call = stmt.value
            assert isinstance(call, ast.Call)
            yield Site("python.compile_no_effect", call.lineno, call.col_offset + 1,
                       {"compile_problem": "discarded", "call": pn.short(call, 50)})
            continue
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        targets: list[ast.expr] = list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        if _is_compile(value, names):
            assert isinstance(value, ast.Call)
            compiled = _dotted(value.args[0]) if value.args else None
            wrap = wraps.get(compiled or "")
            if wrap is not None and not _bound_between(statements, wrap, index) and \
                    _read_after(statements[index + 1:], wrap.wrapper):
                yield Site("python.compile_no_effect", value.lineno, value.col_offset + 1,
                           {"compile_problem": "wrapped_before", "call": pn.short(stmt, 50), "wrapper": wrap.wrapper,
                            "wrapper_kind": wrap.kind, "wrapper_call": wrap.call, "wrapper_line": wrap.line})
            for target in targets:  # the compiled name holds a compiled module now
                wraps.pop(_dotted(target) or "", None)
            continue
        if isinstance(value, ast.Call):
            for wrap in _wraps(targets, value, names, stmt.lineno):
                wraps[wrap.model] = wrap


def _wraps(targets: list[ast.expr], call: ast.Call, names: pn.Names, line: int) -> Iterator[_Wrap]:
    """The (wrapper name, model name) pairs an assignment of a wrapper call binds."""
    kind = _wrapper_kind(call, names)
    if kind is None or len(targets) != 1:
        return
    target = targets[0]
    models = _model_args(call, kind)
    text = pn.short(call, 48)
    if text.endswith("…"):  # ``Trainer(…)`` reads better than a cut argument list
        text = pn.short(call.func, 40) + "(…)"
    if isinstance(target, ast.Tuple):  # engine, opt, _, _ = deepspeed.initialize(...); a, b = prepare(a, b)
        elements = [_dotted(e) for e in target.elts]
        if kind == "deepspeed":
            pairs = [(elements[0], models[0])] if elements and models else []
        else:
            pairs = list(zip(elements, models))
    else:
        pairs = [(_dotted(target), models[0])] if models and (kind != "accelerate" or len(models) == 1) else []
    for wrapper, model in pairs:
        if wrapper and model and wrapper != model:
            yield _Wrap(wrapper, model, kind, text, line)


def _wrapper_kind(call: ast.Call, names: pn.Names) -> str | None:
    qual = names.qualname(call.func)
    if names.is_one_of(qual, pn.DDP):
        return "ddp"
    if names.is_one_of(qual, _FSDP):
        return "fsdp"
    if names.is_one_of(qual, pn.DATA_PARALLEL):
        return "data_parallel"
    if qual in ("deepspeed.initialize",):
        return "deepspeed"
    func = call.func
    attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if attr.endswith("Trainer") and (pn.keyword(call, "model") is not None or call.args):
        return "trainer"
    receiver = pn.short(func.value, 40).lower() if isinstance(func, ast.Attribute) else ""
    if attr == "prepare" and "accelerator" in receiver:
        return "accelerate"
    if attr == "setup" and "fabric" in receiver:
        return "fabric"
    return None


def _model_args(call: ast.Call, kind: str) -> list[str | None]:
    """The names of the modules the wrapper call takes, in the order its result gives them back."""
    if kind == "accelerate":
        return [_dotted(a) for a in call.args]
    if kind in ("trainer", "deepspeed"):
        model = pn.keyword(call, "model")
        if model is None and kind == "trainer" and call.args:
            model = call.args[0]
        return [_dotted(model)] if model is not None else []
    model = call.args[0] if call.args else pn.keyword(call, "module")
    return [_dotted(model)] if model is not None else []


def _is_compile(node: ast.AST, names: pn.Names) -> bool:
    return isinstance(node, ast.Call) and names.is_one_of(names.qualname(node.func), _COMPILE) and bool(node.args)


def _dotted(node: ast.AST | None) -> str | None:
    parts = pn.dotted_parts(node) if node is not None else None
    return ".".join(parts) if parts else None


def _bound_between(statements: list[ast.stmt], wrap: _Wrap, index: int) -> bool:
    """Whether the wrapper's name is bound again after the wrapper call and before ``index``."""
    return any(s.lineno > wrap.line and wrap.wrapper in _bound_names(s) for s in statements[:index])


def _bound_names(stmt: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    out: set[str] = set()
    for target in targets:
        for node in ast.walk(target):
            name = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name:
                out.add(name)
    return out


def _read_after(statements: list[ast.stmt], name: str) -> bool:
    """Whether a statement after the compile reads ``name`` before the scope binds it again."""
    for stmt in statements:
        for node in _own_nodes(stmt):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and \
                    _dotted(node) == name:
                return True
        if name in _bound_names(stmt):
            return False
    return False


def _own_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of one statement, without its nested statement blocks (they come as statements)."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        yield node
        for field, value in ast.iter_fields(node):
            if node is stmt and field in _BLOCK_FIELDS:
                continue
            if isinstance(value, ast.AST):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, ast.AST) and not isinstance(v, ast.stmt))
