"""A shuffling ``DistributedSampler`` whose epoch is never set.

Why this exists: ``DistributedSampler`` draws its permutation from ``seed + epoch``, and the epoch
only changes through ``sampler.set_epoch(epoch)``. A script that builds one with shuffling (the
default) and runs several epochs without that call trains every epoch on the same order, on every
rank — the shuffle it asked for happens once. The fix belongs in the epoch loop.

What is found, per file: a site ``python.sampler_epoch`` at each ``DistributedSampler(...)`` call
(also ``torch.utils.data.distributed.DistributedSampler`` under any import alias) whose ``shuffle``
is not a literal ``False``, that does not sample an evaluation set (the name it is bound to and its
dataset argument carry no ``val``/``eval``/``test``), in a file with an epoch loop (a ``for`` whose
target or iterable names an epoch: ``for epoch in range(args.epochs)``, ``for _ in
trange(num_train_epochs)``) and no ``.set_epoch(`` call anywhere (any receiver counts:
``train_loader.sampler.set_epoch(e)`` sets it too). A file that builds the sampler in a helper and
loops in another module is not judged (the epoch loop is not in the same file).

What it must not do: import torch or decide on a finding (GD614 does).
"""

from __future__ import annotations

import ast
import re

from gpudoctor.static import pynames as pn
from gpudoctor.static.sites import Site

_SAMPLER = frozenset({"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"})
_EVAL = re.compile(r"val|eval|test|dev", re.IGNORECASE)
_EPOCH = re.compile(r"epoch", re.IGNORECASE)


def sampler_epoch_sites(tree: ast.Module, names: pn.Names) -> list[Site]:
    """Sites ``python.sampler_epoch`` (facts ``call``, ``sampler``, ``epoch_line``) of one parsed file."""
    calls: list[ast.Call] = []
    epoch_loop: ast.For | ast.AsyncFor | None = None
    sets_epoch = False
    bound: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "set_epoch":
                sets_epoch = True
            elif names.is_one_of(names.qualname(node.func), _SAMPLER) or pn.short(node.func) == "DistributedSampler":
                calls.append(node)
        elif isinstance(node, (ast.For, ast.AsyncFor)) and _is_epoch_loop(node):
            if epoch_loop is None or node.lineno < epoch_loop.lineno:
                epoch_loop = node
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                bound[id(node.value)] = ast.unparse(target)
                for kw in node.value.keywords:  # DataLoader(..., sampler=DistributedSampler(...))
                    if kw.arg == "sampler" and isinstance(kw.value, ast.Call):
                        bound[id(kw.value)] = f"{ast.unparse(target)}.sampler"
    if sets_epoch or epoch_loop is None or not calls:
        return []
    sites = []
    for call in calls:
        if pn.literal(pn.keyword(call, "shuffle")) is False:
            continue
        sampler = bound.get(id(call), "")
        dataset = ast.unparse(call.args[0]) if call.args else ast.unparse(pn.keyword(call, "dataset") or call.func)
        if _EVAL.search(sampler) or _EVAL.search(dataset):
            continue
        sites.append(Site("python.sampler_epoch", call.lineno, call.col_offset + 1,
                          {"call": pn.short(call, 60), "sampler": sampler or "sampler",
                           "epoch_line": epoch_loop.lineno}))
    return sites


def _is_epoch_loop(loop: ast.For | ast.AsyncFor) -> bool:
    return bool(_EPOCH.search(ast.unparse(loop.target)) or _EPOCH.search(ast.unparse(loop.iter)))
