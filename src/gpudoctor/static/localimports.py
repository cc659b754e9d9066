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
    #: per checked Python file (its path): the flags of the program it is part of — what it and the
    #: project modules it imports do, and, for a module, what the scripts that import it do
    reach: dict[str, set[str]] = field(default_factory=dict)
    #: per checked Python file: in-memory dataset classes it imports by name from project modules
    datasets: dict[str, set[str]] = field(default_factory=dict)
    #: per checked Python file: the scripts (entry points, not tests) whose programs hold it
    programs: dict[str, list[str]] = field(default_factory=dict)


def project_context(checked: Iterable[FileResult], parse: Callable[[str], FileResult],
                    is_test: Callable[[str], bool] = lambda path: False) -> ProjectContext:
    """Follow every checked Python file's imports of project modules, up to :data:`MAX_DEPTH` levels and
    :data:`MAX_REACH_MODULES` modules; at most :data:`MAX_CONTEXT_FILES` modules that were not checked
    are read, by ``parse``. A module that is not a script is also judged with the scripts that import
    it: those checked, and those beside it or one directory up (read as context, so that checking a
    folder gives a file the findings that checking the repository gives it). Test files (``is_test``)
    never lend their flags to the modules they import (an ``autocast("cpu")`` in a numerics test does
    not make the training loop it tests mixed-precision)."""
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

    def follow(script: FileResult) -> tuple[set[str], list[FileResult]]:
        reached = {k for k, v in script.flags.items() if v}
        seen = {id(script)}
        modules: list[FileResult] = []
        frontier = [script]
        for _ in range(MAX_DEPTH):
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
                        modules.append(module)
            frontier = following
            if not frontier:
                break
        return reached, modules

    followed: dict[int, tuple[set[str], list[FileResult]]] = {}
    for script in importers:
        followed[id(script)] = follow(script)
        out.flags |= followed[id(script)][0]
    # the files that may run a checked module: checked ones, and those beside it or one level up
    scripts = [r for r in importers if not is_test(r.path)]
    known = {os.path.abspath(r.path) for r in importers}
    for path in _neighbour_scripts(importers, known, is_test):
        if len(out.files) >= MAX_CONTEXT_FILES:
            break
        found = module_at(path)
        if found is not None and all(found is not r for r in scripts):
            scripts.append(found)
    program = {id(r): set(followed[id(r)][0]) for r in importers}
    for script in scripts:
        reached, modules = followed.get(id(script)) or follow(script)
        for module in modules:
            if id(module) in program and not module.entry_point and module is not script:
                program[id(module)] |= reached
                out.programs.setdefault(module.path, []).append(script.path)
    for result in importers:
        out.reach[result.path] = program[id(result)]
    return out


#: Sites whose judgement depends on the program around them: a module holding one is worth the scripts
#: beside it that may import it.
_PROGRAM_SCOPES = frozenset({"python.training_loop", "python.dataloader", "python.non_blocking", "python.loop_call"})


def _neighbour_scripts(importers: list[FileResult], known: set[str], is_test: Callable[[str], bool]) -> list[str]:
    """Python files beside, or one directory above, a checked module that is not a script and whose sites
    depend on the program around it; files that were checked, and tests, are left out."""
    directories: list[str] = []
    for result in importers:
        if result.entry_point or is_test(result.path) or not any(s.scope in _PROGRAM_SCOPES for s in result.sites):
            continue
        here = os.path.dirname(os.path.abspath(result.path))
        for directory in (here, os.path.dirname(here)):
            if directory not in directories:
                directories.append(directory)
    found: list[str] = []
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if name.endswith(".py") and path not in known and not is_test(path) and os.path.isfile(path):
                known.add(path)
                found.append(path)
    return found


def _too_big(path: str) -> bool:
    try:
        return os.path.getsize(path) > MAX_CONTEXT_BYTES
    except OSError:
        return True
