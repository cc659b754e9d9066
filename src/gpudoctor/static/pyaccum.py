"""What a file does about gradient accumulation under Hugging Face Accelerate.

Why this exists: GD605 (gradient accumulation that all-reduces every micro-step) looked only at DDP's
``no_sync()``. A script on Accelerate that accumulates by hand — ``accelerator.backward(loss)`` every
iteration and ``optimizer.step()`` under ``if step % k == 0`` — without ``with
accelerator.accumulate(model):`` syncs gradients after every backward just the same: only
``accumulate()`` (or ``accelerator.no_sync``) skips the all-reduce on the micro-steps.

What is found, per file (these facts go on the file's ``python.grad_accumulation`` sites):
``file_uses_accelerate`` — the file builds an ``Accelerator(...)`` (``accelerate.Accelerator`` under any
import alias); ``file_uses_accumulate`` — it calls ``.accumulate(`` or ``.no_sync(`` on anything;
``file_uses_apex_ddp`` — the models it wraps in ``DistributedDataParallel`` are wrapped by apex's
(``apex.parallel.DistributedDataParallel``, DeepSpeed's old ``deepscale.distributed_apex``), never
torch's: apex DDP has no ``no_sync()``, so the usual fix is not there to apply (GD605 says so as info).

:func:`steps_in_both_branches` tells the walker when an ``if step % k …`` is no accumulation at all:
an optimizer steps in its body and in its ``else`` (two optimizers stepped on alternate iterations,
modded-nanogpt's warm-up), so some optimizer steps on every iteration and every all-reduce is used.

What it must not do: import torch or accelerate, or decide on a finding (GD605 does).
"""

from __future__ import annotations

import ast

from gpudoctor.model import FactValue
from gpudoctor.static import pynames as pn

_ACCELERATOR = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
_DDP = "DistributedDataParallel"


def _steps(nodes: list[ast.stmt]) -> bool:
    """Whether these statements call ``.step()`` (in nested loops too, not in nested functions)."""
    todo: list[ast.AST] = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step":
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def steps_in_both_branches(node: ast.If) -> bool:
    """Whether an optimizer steps in the ``if``'s body and in its ``else`` (or ``elif`` chain)."""
    return bool(node.orelse) and _steps(node.body) and _steps(node.orelse)


def accumulation_facts(tree: ast.Module, names: pn.Names) -> dict[str, FactValue]:
    """``file_uses_accelerate``, ``file_uses_accumulate`` and ``file_uses_apex_ddp`` of one parsed file."""
    uses_accelerate = uses_accumulate = apex_ddp = torch_ddp = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        qual = names.qualname(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("accumulate", "no_sync"):
            uses_accumulate = True
        elif names.is_one_of(qual, _ACCELERATOR):
            uses_accelerate = True
        elif qual is not None and qual.rsplit(".", 1)[-1] == _DDP:
            apex_ddp = apex_ddp or "apex" in qual
            torch_ddp = torch_ddp or "apex" not in qual
    return {"file_uses_accelerate": uses_accelerate, "file_uses_accumulate": uses_accumulate,
            "file_uses_apex_ddp": apex_ddp and not torch_ddp}
