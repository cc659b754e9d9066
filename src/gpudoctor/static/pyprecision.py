"""Precision set-up that is neither autocast nor a weight cast, and loss scaling done by a framework.

Why this exists: GD201 ("no autocast, no bf16/fp16 set-up") and GD207 ("fp16 autocast, no
GradScaler") read the program's precision flags, and on real code the precision is often chosen by
something else: an FSDP ``MixedPrecisionPolicy(param_dtype=torch.bfloat16)``, apex
``amp.initialize(model, optimizer, opt_level="O2")``, a DeepSpeed config assembled item by item
(``config["bf16"] = {"enabled": True}``) or keyed by a variable (``{dtype: {"enabled": True}}``),
and the loss scaled by the framework that runs backward (``accelerator.backward(loss)``,
``engine.backward(loss)``, ``loss_scaler(loss, optimizer)``, apex ``amp.scale_loss``).
:mod:`gpudoctor.static.pyextra` holds the older checks (weight casts, ``Accelerator``,
``TrainingArguments``, DeepSpeed dict literals and JSON); this module adds these, each a predicate
over one node that flips a project flag. It decides nothing about findings.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from gpudoctor.static import pynames as pn

#: dtypes that are not fp32 (names as resolved, and the strings configs use)
_LOW_DTYPES = frozenset({"torch.bfloat16", "torch.float16", "torch.half", "bfloat16", "float16", "bf16", "fp16"})
#: DeepSpeed config keys that turn bf16/fp16 training on
_PRECISION_SECTIONS = frozenset({"bf16", "fp16", "bfloat16"})
#: receivers whose ``.backward(loss)`` runs a framework's backward (Accelerate, Fabric, a DeepSpeed engine),
#: which scales an fp16 loss itself
_FRAMEWORK_RECEIVERS = ("accelerator", "fabric", "engine", "model", "ds_", "deepspeed")


def _is_low_dtype(node: ast.AST | None, names: pn.Names) -> bool:
    if node is None:
        return False
    qual = names.qualname(node)
    return qual in _LOW_DTYPES or (isinstance(node, ast.Constant) and node.value in _LOW_DTYPES)


def precision_policy(node: ast.Call, qual: str | None, names: pn.Names) -> bool:
    """FSDP2 ``MixedPrecisionPolicy(param_dtype=…)`` / FSDP1 ``MixedPrecision(param_dtype=…)`` with a
    low-precision (or non-literal) parameter dtype, or apex ``amp.initialize(…)`` at an opt level
    other than ``"O0"``: the model's matmuls run in bf16/fp16 without autocast."""
    last = (qual or "").rsplit(".", 1)[-1]
    if last in ("MixedPrecisionPolicy", "MixedPrecision") and (qual or "").startswith(("torch.", last)):
        dtype = pn.keyword(node, "param_dtype") or (node.args[0] if node.args else None)
        if dtype is None:
            return False
        # a literal dtype decides; a variable (``param_dtype=self.param_dtype``) is a precision chosen elsewhere
        return _is_low_dtype(dtype, names) or names.qualname(dtype) not in ("torch.float32", "torch.float", None)
    if qual in ("apex.amp.initialize", "amp.initialize"):
        return pn.literal(pn.keyword(node, "opt_level")) != "O0"
    return False


def _enabled(section: ast.AST) -> bool:
    """A config section ``{"enabled": …}`` whose ``enabled`` is not a literal False (absent: enabled)."""
    if not isinstance(section, ast.Dict):
        return False
    enabled = next((v for k, v in zip(section.keys, section.values)
                    if isinstance(k, ast.Constant) and k.value == "enabled"), None)
    return enabled is None or pn.literal(enabled) is not False


def precision_item_assign(node: ast.Assign) -> bool:
    """``config["bf16"] = {"enabled": True}``: a DeepSpeed config given its precision item by item."""
    return _enabled(node.value) and any(
        isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value in _PRECISION_SECTIONS
        for t in node.targets)


def variable_precision_section(node: ast.Dict) -> bool:
    """A DeepSpeed config dict with a section keyed by a variable and enabled (``{dtype: {"enabled":
    True}, "zero_optimization": …}``, ``dtype`` being ``"bf16"`` or ``"fp16"``): its other sections
    are literal, so the variable one is the precision."""
    return any(key is not None and not isinstance(key, ast.Constant) and _enabled(value)
               and isinstance(value, ast.Dict) and len(value.keys) <= 3
               for key, value in zip(node.keys, node.values))


def scales_loss(node: ast.Call, qual: str | None, attr: str | None) -> bool:
    """A backward that scales an fp16 loss itself: ``accelerator.backward(loss)``, ``fabric.backward(loss)``,
    a DeepSpeed ``engine.backward(loss)`` (a receiver named as a framework or model, given the loss),
    ``loss_scaler(loss, optimizer, …)`` (timm's ``NativeScaler`` runs a GradScaler inside), or apex
    ``amp.scale_loss(loss, optimizer)``. ``y.backward(grad)`` is a tensor's backward, not these."""
    if qual in ("apex.amp.scale_loss", "amp.scale_loss"):
        return True
    func = node.func
    if attr == "backward" and node.args and isinstance(func, ast.Attribute):
        parts = pn.dotted_parts(func.value)
        receiver = parts[-1].lower() if parts else ""
        return any(word in receiver for word in _FRAMEWORK_RECEIVERS)
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name.lower().endswith("scaler") and not name[:1].isupper() and len(node.args) >= 2


def is_autograd_function_backward(fn: ast.FunctionDef | ast.AsyncFunctionDef, class_name: str | None) -> bool:
    """The ``backward(ctx, *grads)`` of a ``torch.autograd.Function``: a ``torch.autograd.backward`` in it
    (activation checkpointing re-running a segment) is part of someone else's backward, not a training step."""
    if class_name is None or fn.name != "backward":
        return False
    args = fn.args.posonlyargs + fn.args.args
    first = args[0].arg if args else ""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    return first == "ctx" or static


def kwargs_dict_keys(tree: ast.Module) -> dict[str, frozenset[str] | None]:
    """For each name bound to a dict literal in the file, the keys it can hold: the literal's and those
    set as ``name["key"] = …``; None once it is bound or changed any other way (``name.update(…)``, a
    key that is not a literal, another value). ``Accelerator(**accelerator_log_kwargs)`` of the
    Accelerate examples passes only logging options this way."""
    keys: dict[str, set[str] | None] = {}

    def forget(name: str) -> None:
        keys[name] = None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    literal_keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)] \
                        if isinstance(node.value, ast.Dict) else None
                    if literal_keys is None or len(literal_keys) != len(node.value.keys):  # type: ignore[attr-defined]
                        forget(target.id)
                    elif keys.get(target.id, set()) is not None:
                        keys.setdefault(target.id, set()).update(str(k) for k in literal_keys)  # type: ignore[union-attr]
                elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    name = target.value.id
                    if isinstance(target.slice, ast.Constant) and keys.get(name, set()) is not None:
                        keys.setdefault(name, set()).add(str(target.slice.value))  # type: ignore[union-attr]
                    else:
                        forget(name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.attr in ("update", "setdefault", "__setitem__"):
            forget(node.func.value.id)
    return {name: frozenset(k) if k is not None else None for name, k in keys.items()}


def accelerator_leaves_precision_to_launch(node: ast.Call, qual: str | None,
                                           dict_keys: Callable[[], dict[str, frozenset[str] | None]]) -> bool:
    """``Accelerator(…, **kwargs)`` where ``kwargs`` is a dict of the file known not to hold
    ``mixed_precision``: like ``Accelerator()``, ``accelerate launch`` and its config choose the precision."""
    if (qual or "").rsplit(".", 1)[-1] != "Accelerator" or pn.keyword(node, "mixed_precision") is not None:
        return False
    starred = [k.value for k in node.keywords if k.arg is None]
    if not starred:
        return False  # pyextra.sets_low_precision judges the plain call
    for value in starred:
        known = dict_keys().get(value.id) if isinstance(value, ast.Name) else None
        if known is None or "mixed_precision" in known:
            return False
    return True


def declines_low_precision_config(node: ast.Dict) -> bool:
    """A DeepSpeed config dict that turns fp16/bf16 off in so many words (``"fp16": {"enabled": False}``):
    fp32 is the author's choice (the JSON configs beside a script say so too:
    :func:`gpudoctor.static.pyextra.deepspeed_json_precision` returning False)."""
    return any(isinstance(key, ast.Constant) and key.value in _PRECISION_SECTIONS and isinstance(value, ast.Dict)
               and not _enabled(value) for key, value in zip(node.keys, node.values))
