"""The project's own modules that a checked script imports, found on disk beside it.

Why this exists: ``gpudoctor check train.py`` reads one file, but a training script often keeps its
setup in a helper beside it (``from utils import autocast_ctx``, ``from .engine import train``).
Project-wide facts ("some checked file uses autocast / torch.compile / pin_memory / cudnn.benchmark")
then missed what the helper does, and rules that look for the fix anywhere in the project (GD201,
GD403, GD208 …) warned about a fix that is there: the fault zoo's ``healthy.py`` checked alone got a
GD201 warning for the bf16 autocast its ``_common.py`` applies. The modules found here are read for
those project facts only: their own sites are not judged (they were not asked for). A module adds
what its module-level code does, and, for ``from helpers import a, b``, what the definitions of
``a`` and ``b`` do — not what an unrelated helper beside them does (``tf32_off.py`` takes ``MLP`` from
the zoo's ``_common.py``, not its ``bf16_autocast``, and still trains in fp32).

What it must not do: import anything it finds, follow installed packages (only files under the
importing file's directory tree, or the package it belongs to, count), or read without bound.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpudoctor.static.sites import FileResult

#: At most this many imported modules are read for context per ``check`` run.
MAX_CONTEXT_FILES = 64
#: Imports are followed this many levels deep (a script → its helper → the helper's helper).
MAX_DEPTH = 3
#: A script's reach stops growing after this many modules (a monorepo's imports fan out fast).
MAX_REACH_MODULES = 256
#: Imported files larger than this are not read for context.
MAX_CONTEXT_BYTES = 2 * 1024 * 1024

@functools.lru_cache(maxsize=65536)
def _module_file_in(base: str, level: int, module: str) -> str | None:
    """The project file that ``import module`` (``level`` 0) or a relative import (``level`` ≥ 1) in a
    file of directory ``base`` loads, when it lies beside that file (as ``python script.py`` puts the
    script's directory first on ``sys.path``) or in its package; None for anything else (installed
    packages). By directory, because the files of one directory import alike: ``import torch`` in
    each of them is looked up once per run."""
    for _ in range(max(0, level - 1)):
        base = os.path.dirname(base)
    parts = [p for p in module.split(".") if p]
    if not parts:
        return None
    stem = os.path.join(base, *parts)
    for found in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(found):
            return found
    return None


def _as_named(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (as the user would name it)."""
    shown = os.path.relpath(path)
    return path if shown.startswith("..") else shown


def flags_brought(module: FileResult, names: tuple[str, ...] | None) -> set[str]:
    """The project flags that importing ``names`` (None: the whole module) from ``module`` brings."""
    if names is None:
        return {k for k, v in module.flags.items() if v}
    brought = set(module.module_flags)
    for name in names:
        brought.update(module.definition_flags.get(name, ()))
    return brought


@dataclass
class ProjectContext:
    """What the checked Python files' own imports bring (see the module docstring)."""

    #: the project modules read for context (imported, not checked), as the user would name them
    files: list[str] = field(default_factory=list)
    #: flags the checked files and what they import bring to the project as a whole
    flags: set[str] = field(default_factory=set)
    #: per checked entry-point script (its path): the flags it and what it imports reach
    reach: dict[str, set[str]] = field(default_factory=dict)
    #: per checked Python file: in-memory dataset classes it imports by name from project modules
    datasets: dict[str, set[str]] = field(default_factory=dict)


def project_context(checked: Iterable[FileResult], parse: Callable[[str], FileResult]) -> ProjectContext:
    """Follow the ``checked`` Python files' imports of project modules: a script (``entry_point``) up to
    :data:`MAX_DEPTH` levels and :data:`MAX_REACH_MODULES` modules, any other module one level; at most
    :data:`MAX_CONTEXT_FILES` modules that were not checked are read, by ``parse``."""
    _module_file_in.cache_clear()  # files may have come or gone since the last run in this process
    importers = [r for r in checked if r.kind == "python"]
    by_real = {os.path.realpath(r.path): r for r in importers}
    by_abs = {os.path.abspath(r.path): r for r in importers}  # the cheap look-up first
    out = ProjectContext()

    def module_at(path: str) -> FileResult | None:
        known = by_abs.get(path)
        if known is not None:
            return known
        real = os.path.realpath(path)
        known = by_real.get(real)
        if known is None and len(out.files) < MAX_CONTEXT_FILES and not _too_big(real):
            known = by_real[real] = by_abs[path] = parse(_as_named(path))
            out.files.append(known.path)
        return known

    for script in importers:
        reached = {k for k, v in script.flags.items() if v}
        seen = {id(script)}
        frontier = [script]
        # a module's own flags are in the project's already; from it, one level of imports (what it
        # brings from modules that were not checked). A script follows its imports deeper.
        for _ in range(MAX_DEPTH if script.entry_point else 1):
            if len(seen) > MAX_REACH_MODULES:
                break
            following: list[FileResult] = []
            for importer in frontier:
                base = os.path.dirname(os.path.abspath(importer.path))
                for level, name, names in importer.imports:
                    path = _module_file_in(base, level, name)
                    module = module_at(path) if path is not None else None
                    if module is None or module is importer:
                        continue
                    reached |= flags_brought(module, names)
                    if importer is script and names and module.in_memory_datasets:
                        out.datasets.setdefault(script.path, set()).update(
                            n for n in names if n in module.in_memory_datasets)
                    if id(module) not in seen:
                        seen.add(id(module))
                        following.append(module)
            frontier = following
            if not frontier:
                break
        out.flags |= reached
        if script.entry_point:
            out.reach[script.path] = reached
    return out


def _too_big(path: str) -> bool:
    try:
        return os.path.getsize(path) > MAX_CONTEXT_BYTES
    except OSError:
        return True
