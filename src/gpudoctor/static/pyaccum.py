"""What a file does about gradient accumulation under Hugging Face Accelerate.

Why this exists: GD605 (gradient accumulation that all-reduces every micro-step) looked only at DDP's
``no_sync()``. A script on Accelerate that accumulates by hand — ``accelerator.backward(loss)`` every
iteration and ``optimizer.step()`` under ``if step % k == 0`` — without ``with
accelerator.accumulate(model):`` syncs gradients after every backward just the same: only
``accumulate()`` (or ``accelerator.no_sync``) skips the all-reduce on the micro-steps.

What is found, per file (these facts go on the file's ``python.grad_accumulation`` sites):
``file_uses_accelerate`` — the file builds an ``Accelerator(...)`` (``accelerate.Accelerator`` under any
import alias); ``file_uses_accumulate`` — it calls ``.accumulate(`` or ``.no_sync(`` on anything.

What it must not do: import torch or accelerate, or decide on a finding (GD605 does).
"""

from __future__ import annotations

import ast

from gpudoctor.model import FactValue
from gpudoctor.static import pynames as pn

_ACCELERATOR = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})


def accumulation_facts(tree: ast.Module, names: pn.Names) -> dict[str, FactValue]:
    """``file_uses_accelerate`` and ``file_uses_accumulate`` of one parsed file."""
    uses_accelerate = uses_accumulate = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("accumulate", "no_sync"):
            uses_accumulate = True
        elif names.is_one_of(names.qualname(node.func), _ACCELERATOR):
            uses_accelerate = True
    return {"file_uses_accelerate": uses_accelerate, "file_uses_accumulate": uses_accumulate}
