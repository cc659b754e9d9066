"""Checks PyTorch training code with the standard ``ast`` module: one parse, one walk per file.

The walker records *sites* — a DataLoader call, a ``.item()`` inside a training loop, a compiled
``forward`` that prints — with plain facts about each (``num_workers``, ``periodic``, ``certain``).
It never decides whether a site is a problem; the rule files under ``rules/`` do, through the
engine. A *training loop* is a loop (or a function, for step functions) that directly calls
``.backward()``; calls in loops nested inside it count as in the loop. The walker must not import
or execute the code it reads, and must not import torch.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.model import FactValue
from gpudoctor.static import pynames as pn
from gpudoctor.static.cudagraphs import cudagraph_reuse_sites
from gpudoctor.static.pyaccum import accumulation_facts, steps_in_both_branches
from gpudoctor.static.pyanomaly import mark_debug_guarded
from gpudoctor.static.pyattention import attention_sites
from gpudoctor.static.pycompile import compile_no_effect_sites
from gpudoctor.static.pyextra import (
    check_call_extras,
    conv_bias_pairs,
    deepspeed_json_declines,
    deepspeed_json_precision,
    file_context,
    is_deepspeed_config,
    low_precision_config,
    mark_whole_model_loads,
    marks_cuda_use,
)
from gpudoctor.static.pyprecision import (
    declines_low_precision_config,
    is_autograd_function_backward,
    kwargs_dict_keys,
    precision_item_assign,
    variable_precision_section,
)
from gpudoctor.static.pysampler import sampler_epoch_sites
from gpudoctor.static.sites import FileResult, Site, find_ignores

#: Project-wide flags every Python file contributes to (OR-ed over files; see ``static/runner.py``).
FLAGS = ("uses_cuda", "uses_ddp", "has_distributed_sampler", "pins_memory", "cudnn_benchmark", "uses_no_sync",
         "has_grad_scaler", "has_autocast", "dataloader_workers", "uses_compile", "reduces_tensors", "sets_precision",
         # precision and scale (static/pyprecision.py, static/pyscale.py)
         "scales_loss", "declines_low_precision", "toy_data", "small_layers", "real_data", "large_model")


#: Fields that never hold nodes the walker cares about (expression contexts, operators).
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass
class _Frame:
    """A loop or function body whose calls may run once per training step."""

    kind: str  # loop | function
    node: ast.AST
    has_backward: bool = False
    has_autocast: bool = False
    backward_periodic: bool = False
    periodic_steps: list[ast.Call] = field(default_factory=list)
    plain_steps: int = 0
    events: list[Site] = field(default_factory=list)
    #: (the print, the names it prints, periodic, the inner loop it sits in or None)
    prints: list[tuple[ast.Call, set[str], bool, ast.AST | None]] = field(default_factory=list)
    tensor_names: set[str] = field(default_factory=set)


@dataclass
class _Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    class_name: str | None
    params: set[str]
    compiled: bool
    breakers: list[Site] = field(default_factory=list)

    @property
    def may_be_compiled(self) -> bool:
        return self.compiled or self.node.name == "forward"


class PythonChecker(ast.NodeVisitor):
    """Walks one module once and fills a :class:`FileResult`."""

    def __init__(self, result: FileResult) -> None:
        self.result = result
        self.names = pn.Names()
        self.flags = dict.fromkeys(FLAGS, False)
        self.frames: list[_Frame] = []
        self.functions: list[_Function] = []
        self.class_stack: list[str] = []
        self.finished_functions: list[_Function] = []
        self.compiled_classes: set[str] = set()
        self.var_class: dict[str, str] = {}
        self.getitems: list[tuple[str, ast.FunctionDef]] = []   # (class, its __getitem__) as the walk meets them
        self.autocast_depth = 0
        self.periodic_depth = 0
        self.rank_guard_depth = 0
        self.platform_depth = 0  # inside an ``if`` that picks code by operating system
        self.comprehensions: list[ast.AST] = []  # the comprehensions around the node walked (each a loop)
        self.skip_calls: set[int] = set()
        self.first_conv: ast.Call | None = None
        self.deepspeed_engine = False  # calls deepspeed.initialize: its config may set the precision
        self.deepspeed_config_seen = False  # a dict literal with DeepSpeed config keys
        self.tree: ast.Module | None = None
        self._dict_keys: dict[str, frozenset[str] | None] | None = None
        self.gpu_names: set[str] = set()     # names bound to tensors put on the GPU (x = t.cuda())
        self.mapped_names: set[str] = set()  # names bound to a dataset tokenized up front (raw.map(f))
        self.dataset_calls: dict[str, ast.Call] = {}  # name → the Dataset call bound to it
        self._dispatch: dict[type, Callable[[Any], None]] = {
            node_type: getattr(self, f"visit_{node_type.__name__}")
            for node_type in (ast.Import, ast.ImportFrom, ast.Name, ast.Attribute, ast.ClassDef,
                              ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While, ast.If,
                              ast.With, ast.AsyncWith, ast.Assign, ast.Call, ast.Dict,
                              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
        }

    # ---- traversal: a dispatch table and cached child fields (≈2× faster than NodeVisitor) ------
    def visit(self, node: ast.AST) -> None:
        method = self._dispatch.get(type(node))
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        node_type = type(node)
        fields = _CHILD_FIELDS.get(node_type)
        if fields is None:
            fields = _CHILD_FIELDS[node_type] = tuple(f for f in node._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    # ---- entry --------------------------------------------------------------------------------
    def _walk_module(self, tree: ast.Module) -> None:
        """Walk the module's statements, noting which flags each top-level function or class sets
        (``definition_flags``: what importing that name from this module brings to a script) and
        which the module-level code sets (``module_flags``: what importing the module at all does)."""
        flags = self.flags
        module_level: set[str] = set()
        for stmt in tree.body:
            saved = dict(flags)
            flags.update(dict.fromkeys(flags, False))
            self.visit(stmt)
            inside = [k for k, v in flags.items() if v]
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if inside:
                    self.result.definition_flags[stmt.name] = sorted(inside)
            else:
                module_level.update(inside)
            for name, value in saved.items():
                flags[name] = value or flags[name]
        self.result.module_flags = sorted(module_level)

    def dict_keys(self) -> dict[str, frozenset[str] | None]:
        """Names bound to dict literals in the module → the keys they can hold (computed on first use:
        only ``Accelerator(**kwargs)`` asks)."""
        if self._dict_keys is None:
            self._dict_keys = kwargs_dict_keys(self.tree) if self.tree is not None else {}
        return self._dict_keys

    def run(self, tree: ast.Module) -> None:
        self.tree = tree
        self._walk_module(tree)
        for fn in self.finished_functions:
            if fn.compiled or (fn.class_name in self.compiled_classes and fn.node.name == "forward"):
                self.result.sites.extend(fn.breakers)
        if self.first_conv is not None:
            self.emit("python.conv_layer", self.first_conv, layer=pn.short(self.first_conv.func))
        if self.deepspeed_engine and not self.flags["sets_precision"] and not self.deepspeed_config_seen:
            # the engine takes its precision from its config: one beside the script decides; with none
            # this file shows (built by code it cannot read, passed at launch), the precision is unknown
            self.flags["sets_precision"] = deepspeed_json_precision(self.result.path) is not False
            if not self.flags["sets_precision"] and deepspeed_json_declines(self.result.path):
                self.flags["declines_low_precision"] = True
        file_facts = file_context(tree, self.flags, self.result.sites)
        held = {cls for cls, getitem in self.getitems if pn.only_indexes(getitem, self.names)}
        self.result.in_memory_datasets = sorted(held)
        held.add("TensorDataset")
        for site in self.result.sites:  # file-level context every site can be judged with
            site.values.setdefault("file_uses_cuda", self.flags["uses_cuda"])
            if site.scope in ("python.whole_dataset_load", "python.dataloader"):
                site.values.update(file_facts)  # DDP is judged per file, not from another script
            if site.scope == "python.dataloader":
                site.values["dataset_in_memory"] = site.values["dataset_class"] in held or \
                    bool(site.values["dataset_pretokenized"])
            elif site.scope == "python.process_group":
                site.values["file_reduces_tensors"] = self.flags["reduces_tensors"]
        self.result.flags = self.flags
        self.result.entry_point = _runs_on_its_own(tree, self.result.sites)

    def _site(self, scope: str, node: ast.AST, label: str = "", **values: FactValue) -> Site:
        return Site(scope, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, dict(values), label)

    def emit(self, scope: str, node: ast.AST, label: str = "", **values: FactValue) -> None:
        self.result.sites.append(self._site(scope, node, label, **values))

    def in_step(self, scope: str, node: ast.AST, **values: FactValue) -> None:
        """A site that matters only if it runs every step: parked on the innermost frame."""
        if self.frames:
            values.setdefault("periodic", self.periodic_depth > 0)
            if self.comprehensions:  # [p.grad.norm().item() for p in params]: one sync per element
                values["in_inner_loop"] = True
                values["loop_line"] = getattr(self.comprehensions[-1], "lineno", 0)
            self.frames[-1].events.append(self._site(scope, node, "", **values))

    # ---- imports and names --------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        self.names.add_import(node)
        self.result.imports.extend((0, alias.name, None) for alias in node.names)
        for alias in node.names:
            if alias.name == "torch.distributed.launch":
                self.emit("launch.command", node, launcher="torch.distributed.launch", command=alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.names.add_import_from(node)
        module = node.module or ""
        names = tuple(a.name for a in node.names if a.name != "*")
        if module:  # the names it takes from the module (a star import takes them all: None)
            self.result.imports.append((node.level, module, names if len(names) == len(node.names) else None))
        # ``from pkg import helpers`` / ``from . import helpers`` may name a submodule: all of it
        self.result.imports.extend((node.level, f"{module}.{n}" if module else n, None) for n in names)
        if node.module == "torch.distributed" and any(a.name == "launch" for a in node.names):
            self.emit("launch.command", node, launcher="torch.distributed.launch", command="torch.distributed")

    def visit_Name(self, node: ast.Name) -> None:
        self._check_dotted(node, self.names.aliases.get(node.id, node.id))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """A dotted chain is resolved once, at its outermost attribute."""
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name):
            qual = self.names.qualname(node)
            if qual is not None:
                self._check_dotted(node, qual)
        else:
            self.visit(base)

    def _check_dotted(self, node: ast.Name | ast.Attribute, qual: str) -> None:
        # naming torch.cuda (``torch.cuda.manual_seed_all``, ``is_available()``) puts nothing on the GPU:
        # ``uses_cuda`` comes from calls that do (pyextra.marks_cuda_use)
        if qual.startswith("torch.cuda"):
            parts = qual.split(".")
            if qual.startswith(pn.DEPRECATED_AMP_PREFIX) and parts[3] in pn.DEPRECATED_AMP_NAMES and \
                    not isinstance(node.ctx, ast.Store):
                api = ".".join(parts[:4])
                self.emit("python.deprecated_amp", node, api=api, replacement=api.replace("torch.cuda.amp.", "torch.amp."))
        if "DistributedSampler" in qual:
            self.flags["has_distributed_sampler"] = True
        elif qual in pn.COMPILE_CALLS:
            self.flags["uses_compile"] = True
        elif qual in pn.AUTOCAST and not isinstance(node.ctx, ast.Store):
            # any use, not only a call: timm's train.py builds ``partial(torch.autocast, …)`` once and
            # enters it in the loop, and GD201 warned "no autocast anywhere" on it
            self.flags["has_autocast"] = True

    # ---- scopes: classes, functions, loops, with, if -------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        getitem = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__getitem__"), None)
        if getitem is not None:
            self.getitems.append((node.name, getitem))
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        compiled = any(self.names.qualname(d.func if isinstance(d, ast.Call) else d) == "torch.compile"
                       for d in node.decorator_list)
        params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)} - {"self", "cls"}
        fn = _Function(node, self.class_stack[-1] if self.class_stack else None, params, compiled)
        if node.name == "__init__":
            for conv, certain in conv_bias_pairs(node.body, self.names):
                self.emit("python.conv_bias_bn", conv, layer=pn.short(conv.func), certain=certain)
        saved = (self.autocast_depth, self.periodic_depth, self.rank_guard_depth)
        self.autocast_depth = self.periodic_depth = self.rank_guard_depth = 0
        self.functions.append(fn)
        self.frames.append(_Frame("function", node))
        for item in (*node.decorator_list, *node.body):
            self.visit(item)
        self._close(self.frames.pop())
        self.finished_functions.append(self.functions.pop())
        self.autocast_depth, self.periodic_depth, self.rank_guard_depth = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.frames.append(_Frame("loop", node))
        self.visit(node.target)
        for stmt in node.body:
            self.visit(stmt)
        self._close(self.frames.pop())
        for stmt in node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self._check_branch(node.test)
        self.visit(node.test)
        self.frames.append(_Frame("loop", node))
        for stmt in node.body:
            self.visit(stmt)
        self._close(self.frames.pop())
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_If(self, node: ast.If) -> None:
        self._check_branch(node.test)
        self.visit(node.test)
        periodic, rank_guard = pn.test_traits(node.test)
        platform = pn.tests_platform(node.test)
        self.periodic_depth += periodic
        self.rank_guard_depth += rank_guard
        self.platform_depth += platform
        if periodic and self.frames and steps_in_both_branches(node):
            self.frames[-1].plain_steps += 1  # an optimizer steps either way: no accumulation (GD605)
        for stmt in node.body:
            self.visit(stmt)
        for stmt in node.orelse:
            self.visit(stmt)
        self.periodic_depth -= periodic
        self.rank_guard_depth -= rank_guard
        self.platform_depth -= platform

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        first, *rest = node.generators
        self.visit(first.iter)  # the first iterable is evaluated once, before the loop
        self.comprehensions.append(node)
        self.visit(first.target)
        for cond in first.ifs:
            self.visit(cond)
        for gen in rest:
            self.visit(gen)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.comprehensions.pop()

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        autocast = 0
        for item in node.items:
            self.visit(item)
            expr = item.context_expr
            if isinstance(expr, ast.Call) and self.names.matches(expr.func, pn.AUTOCAST) and self.autocast_enabled(expr):
                autocast = 1
        self.autocast_depth += autocast
        if autocast:
            for frame in self.frames:
                frame.has_autocast = True
        for stmt in node.body:
            self.visit(stmt)
        self.autocast_depth -= autocast

    visit_AsyncWith = visit_With

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        value = node.value
        if not self.flags["sets_precision"] and precision_item_assign(node):
            self.flags["sets_precision"] = True
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == "benchmark" and \
                    self.names.qualname(target) == "torch.backends.cudnn.benchmark" and pn.literal(value) is not False:
                self.flags["cudnn_benchmark"] = True
            if isinstance(target, ast.Name) and self.frames and isinstance(value, ast.Call) and \
                    not (isinstance(value.func, ast.Attribute) and value.func.attr in pn.SYNC_METHODS):
                self.frames[-1].tensor_names.add(target.id)
            if isinstance(target, ast.Name) and isinstance(value, ast.Call):
                self._note_data_binding(target.id, value)
                root = value  # Net().to(device).half() → Net()
                while isinstance(root.func, ast.Attribute) and isinstance(root.func.value, ast.Call):
                    root = root.func.value
                if isinstance(root.func, ast.Name) and root.func.id[:1].isupper():
                    self.var_class[target.id] = root.func.id
                if self.names.qualname(value.func) == "torch.compile" and value.args:
                    self._mark_compiled(value.args[0])
            if isinstance(target, ast.Name) and isinstance(value, (ast.Name, ast.Subscript)) and \
                    _subscript_root(value) in self.mapped_names:  # train = tokenized["train"]
                self.mapped_names.add(target.id)

    def _note_data_binding(self, name: str, value: ast.Call) -> None:
        """What a name bound to a call holds, for the DataLoader that may take it later in the file."""
        func = value.func
        attr = func.attr if isinstance(func, ast.Attribute) else None
        if attr is not None and marks_cuda_use(value, self.names.qualname(func), attr, self.names) or pn.keyword(value, "device") is not None and marks_cuda_use(value, None, None, self.names):
            self.gpu_names.add(name)
        if attr in ("map", "with_format", "set_format") and (value.args or value.keywords):
            self.mapped_names.add(name)
        if self.names.matches(func, pn.TENSOR_DATASET):
            self.dataset_calls[name] = value

    def visit_Dict(self, node: ast.Dict) -> None:
        if is_deepspeed_config(node):
            self.deepspeed_config_seen = True
            if not self.flags["sets_precision"] and variable_precision_section(node):
                self.flags["sets_precision"] = True
            if declines_low_precision_config(node):
                self.flags["declines_low_precision"] = True
        if not self.flags["sets_precision"] and low_precision_config(node):
            self.flags["sets_precision"] = True
        self.generic_visit(node)

    # ---- calls --------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        qual = self.names.qualname(func)
        attr = func.attr if isinstance(func, ast.Attribute) else None
        if (attr == "backward" or qual == "torch.autograd.backward" or pn.is_loss_scaler_call(node)) and not (
                self.functions and is_autograd_function_backward(self.functions[-1].node, self.functions[-1].class_name)):
            self._on_backward(node)
        elif attr == "step" and self.frames:
            frame = self.frames[-1]
            if self.periodic_depth:
                frame.periodic_steps.append(node)
            else:
                frame.plain_steps += 1
        if attr in pn.SYNC_METHODS and id(node) not in self.skip_calls and not node.args:
            self.in_step("python.loop_call", node, kind=attr, call=pn.short(node, 40))
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
                self.skip_calls.add(id(func.value))  # x.cpu().numpy(): one site, not two
        elif qual == "torch.cuda.synchronize":
            self.in_step("python.loop_call", node, kind="synchronize", call=pn.short(node, 40))
        elif qual == "print" and self.frames:
            names = set().union(*(pn.names_in(a) for a in node.args)) if node.args else set()
            self.frames[-1].prints.append((node, names, self.periodic_depth > 0, None))
        if self.functions and self.functions[-1].may_be_compiled and (qual == "print" or (attr in pn.GRAPH_BREAK_METHODS and not node.args)):
            what = "print()" if qual == "print" else f".{attr}()"
            self.functions[-1].breakers.append(self._site("python.compiled_forward", node, breaker=what,
                                                          certain=True, call=pn.short(node, 40)))
        check_call_extras(self, node, qual, attr)
        if qual is not None and isinstance(func, (ast.Name, ast.Attribute)):
            self._check_dotted(func, qual)  # the callee chain is resolved already
        else:
            self.visit(func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)

    def _on_backward(self, node: ast.Call) -> None:
        if self.autocast_depth:
            self.emit("python.autocast_backward", node, call=pn.short(node, 40))
        if self.frames:
            frame = self.frames[-1]
            frame.has_backward = True
            frame.backward_periodic = frame.backward_periodic or self.periodic_depth > 0
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            frame.tensor_names |= pn.names_in(receiver) if receiver is not None else set()

    def autocast_enabled(self, call: ast.Call) -> bool:
        enabled = pn.keyword(call, "enabled")
        return enabled is None or pn.literal(enabled) is not False

    def autocast_is_fp16(self, call: ast.Call) -> bool:
        """CUDA autocast defaults to float16; torch.cuda.amp.autocast is CUDA by definition."""
        qual = self.names.qualname(call.func) or ""
        device = pn.keyword(call, "device_type") or (call.args[0] if call.args else None)
        if "cuda.amp" not in qual and pn.literal(device) != "cuda":
            return False
        dtype = pn.keyword(call, "dtype")
        if dtype is None:
            return True
        return self.names.qualname(dtype) in ("torch.float16", "torch.half")

    def _mark_compiled(self, arg: ast.expr) -> None:
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):
            self.compiled_classes.add(arg.func.id)
        elif isinstance(arg, ast.Name) and arg.id in self.var_class:
            self.compiled_classes.add(self.var_class[arg.id])

    def _check_branch(self, test: ast.expr) -> None:
        """A Python branch on a tensor's value inside a function: a graph break if it is compiled."""
        if not self.functions or not self.functions[-1].may_be_compiled:
            return
        fn = self.functions[-1]
        reductions = {"sum", "mean", "max", "min", "any", "all", "norm", "item"}
        certain = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in reductions
                      and isinstance(n.func.value, ast.Name) and n.func.value.id in fn.params for n in ast.walk(test))
        maybe = any(isinstance(n, ast.Compare) and not any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                           for o in n.ops)
                    and any(isinstance(x, ast.Name) and x.id in fn.params for x in (n.left, *n.comparators))
                    for n in ast.walk(test))
        if certain or maybe:
            fn.breakers.append(self._site("python.compiled_forward", test, breaker="data-dependent branch",
                                          certain=certain, call=f"if {pn.short(test, 40)}"))

    # ---- closing a loop or function -----------------------------------------------------------
    def _close(self, frame: _Frame) -> None:
        parent = self.frames[-1] if self.frames else None
        if not frame.has_backward:
            if parent is not None and frame.kind == "loop":
                for site in frame.events:  # a loop inside the step runs its calls many times per step
                    if site.scope == "python.loop_call":
                        site.values.setdefault("loop_line", getattr(frame.node, "lineno", 0))
                        site.values["in_inner_loop"] = True
                parent.events.extend(frame.events)
                parent.prints.extend((call, names, periodic, inner or frame.node)
                                     for call, names, periodic, inner in frame.prints)
                parent.tensor_names |= frame.tensor_names
                parent.has_autocast = parent.has_autocast or frame.has_autocast
            return
        in_function = frame.kind == "function"
        for call, names, periodic, inner in frame.prints:
            if names & frame.tensor_names:
                frame.events.append(self._site("python.loop_call", call, kind="print", call=pn.short(call, 40),
                                               periodic=periodic, in_inner_loop=inner is not None,
                                               loop_line=getattr(inner, "lineno", 0)))
        for site in frame.events:
            site.values["in_step_function"] = in_function
            if site.scope == "python.loop_call":
                site.values.setdefault("in_inner_loop", False)
                site.values.setdefault("loop_line", 0)
            self.result.sites.append(site)
        self.emit("python.training_loop", frame.node, has_autocast=frame.has_autocast or self.autocast_depth > 0,
                  in_step_function=in_function)
        if frame.periodic_steps and not frame.backward_periodic and not frame.plain_steps:
            self.emit("python.grad_accumulation", frame.periodic_steps[0], call=pn.short(frame.periodic_steps[0], 40))


def _runs_on_its_own(tree: ast.Module, sites: list[Site]) -> bool:
    """A script: a ``__main__`` guard, or a training loop in module-level code. A module whose loops
    all sit in functions (``engine.train_one_epoch``) may be called by a script that wraps them in
    autocast, so it is judged with the whole checked code, not by its own imports alone."""
    if pn.has_main_guard(tree):
        return True
    spans = [(stmt.lineno, stmt.end_lineno or stmt.lineno) for stmt in tree.body
             if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return any(site.scope == "python.training_loop" and not any(a <= site.line <= b for a, b in spans)
               for site in sites)


def check_python(path: str, data: bytes) -> FileResult:
    """Parse ``data`` (the file's bytes, so PEP 263 coding lines are honoured) and walk it once."""
    result = FileResult(path=path, kind="python")
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as exc:
        result.error("syntax-error", f"{exc.msg}", exc.lineno or 1, (exc.offset or 0) or 1)
        return result
    except (ValueError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
        result.error("unreadable", f"{type(exc).__name__}: {exc}")
        return result
    try:
        text = data.decode("utf-8", errors="replace")
    except LookupError:  # pragma: no cover
        text = ""
    result.ignores = find_ignores(text)
    checker = PythonChecker(result)
    try:
        checker.run(tree)
        result.sites.extend(cudagraph_reuse_sites(tree, checker.names))
        result.sites.extend(compile_no_effect_sites(tree, checker.names))
        mark_whole_model_loads(tree, result.sites)
        mark_debug_guarded(tree, result.sites)
        result.sites.extend(sampler_epoch_sites(tree, checker.names))
        accumulation = [s for s in result.sites if s.scope == "python.grad_accumulation"]
        if accumulation:
            facts = accumulation_facts(tree, checker.names)
            for site in accumulation:
                site.values.update(facts)
        result.sites.extend(attention_sites(tree))
    except RecursionError:
        result.error("too-deep", "the file nests too deeply to be walked")
    return result


def _subscript_root(node: ast.expr) -> str | None:
    """``tokenized["train"]`` → ``tokenized``; ``data`` → ``data``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
