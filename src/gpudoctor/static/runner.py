"""Runs every static checker over a set of paths and returns fact sets for the rules engine.

One read and one parse per file. Files are checked in worker processes when there are enough of
them and more than one CPU (measured: see docs/bench-history.md); results come back as plain picklable
:class:`FileResult` objects. Each Python file is judged by its program (:func:`judge_by_program`): the
``project_*`` facts on its sites say what it, the project modules it imports and the scripts that import
it do. What all checked files do together (DataLoader workers for a Compose file's shared memory…)
becomes one fact set of scope ``run`` for the deployment files' rules.
This module decides nothing about findings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from gpudoctor.model import FactSet, FactValue, Source
from gpudoctor.static.files import DEFAULT_TEST_FILES, decoding_problem, is_test_file, iter_files, read_bytes
from gpudoctor.static.sites import FileResult

#: Below this many files one process is faster than starting workers.
MIN_FILES_FOR_WORKERS = 200
#: Default cap on worker processes (``--jobs`` overrides it).
MAX_DEFAULT_WORKERS = 16
#: Sites (call sites, env settings, containers…) judged per file; a generated file past this is cut.
MAX_SITES_PER_FILE = 5000


@dataclass
class StaticRun:
    """All fact sets of one ``check`` run, with what suppresses findings and what was read."""

    factsets: list[FactSet] = field(default_factory=list)
    ignores: dict[str, dict[int, frozenset[str]]] = field(default_factory=dict)
    files_by_kind: dict[str, int] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)
    #: project modules the checked files import, read for the project-wide flags only
    context_files: list[str] = field(default_factory=list)
    #: files inside the checked directories named like checkable ones that are no regular files
    skipped: list[str] = field(default_factory=list)


def check_file(path: str, kind: str) -> FileResult:
    """Check one file of a known kind; never raises for bad content."""
    data, problem = read_bytes(path, kind)
    if data is None:
        result = FileResult(path=path, kind=kind)
        reason, _, detail = problem.partition(": ")
        result.error(reason, detail)
        return result
    if kind == "python":
        from gpudoctor.static.python import check_python

        undecodable = decoding_problem(data, kind)
        if undecodable:
            result = FileResult(path=path, kind=kind)
            reason, _, detail = undecodable.partition(": ")
            result.error(reason, detail)
            return result

        return check_python(path, data)
    from gpudoctor.static.deployfile import check_deploy_file

    return check_deploy_file(path, kind, data)


def _check_one(path: str, kind: str) -> FileResult:
    """A bug triggered by one odd file must not end the run: it is reported as that file's error."""
    try:
        return check_file(path, kind)
    except Exception as exc:  # reported, not swallowed: it shows up as GD899
        result = FileResult(path=path, kind=kind)
        result.error("internal-error", f"{type(exc).__name__}: {exc} (please report this file)")
        return result


def _check_chunk(items: list[tuple[str, str]]) -> list[FileResult]:
    return [_check_one(path, kind) for path, kind in items]


def run_checks(paths: Iterable[str], jobs: int | None = None,
               test_files: tuple[str, ...] = DEFAULT_TEST_FILES) -> StaticRun:
    """Check every file under ``paths``; ``jobs`` worker processes (default: CPU count); ``test_files``:
    the patterns of files judged as tests (:func:`~gpudoctor.static.files.is_test_file`)."""
    skipped: list[str] = []
    items = list(iter_files(paths, skipped))
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS)
    if workers > 1 and len(items) >= MIN_FILES_FOR_WORKERS:
        size = max(16, len(items) // (workers * 8))
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = [r for chunk in pool.map(_check_chunk, chunks) for r in chunk]
    else:
        results = _check_chunk(items)
    run = collect(results, context=True, test_files=test_files)
    run.skipped = skipped
    return run


def judge_by_program(results: list[FileResult], reach: dict[str, set[str]], programs: dict[str, list[str]],
                     is_test: Callable[[str], bool]) -> None:
    """Every Python file is judged by the program it is part of, never by everything checked: what it and
    the project modules it imports do, and, for a module, what the scripts that import it do
    (:func:`~gpudoctor.static.localimports.project_context`). ``check`` of the whole pytorch/examples
    tree gave ImageNet's fp32 ``main.py`` no GD201 because another example used autocast; an
    ``autocast("cpu")`` in a test file hid six GD201 findings elsewhere. Its sites carry ``project_*``
    values that shadow the run's, whether the file is a test (``file_is_test``), and ``gpu_job``:
    a file that is no test, in a program that puts work on a GPU — what GPU-performance rules judge."""
    from gpudoctor.static.pyscale import toy_scale
    from gpudoctor.static.python import FLAGS

    for result in results:
        if result.kind != "python":
            continue
        reached = reach.get(result.path, set())
        test = is_test(result.path)
        own: dict[str, FactValue] = {f"project_{name}": name in reached for name in FLAGS}
        if result.entry_point:
            own["flag_scope"] = "in this script or the project modules it imports"
        elif programs.get(result.path):
            own["flag_scope"] = "in this module, what it imports, or the scripts that import it"
        else:
            own["flag_scope"] = "in this module or the project modules it imports"
        own["file_is_test"] = test
        own["gpu_job"] = not test and "uses_cuda" in reached
        own["project_toy_scale"] = toy_scale(reached)
        for site in result.sites:
            if site.scope.startswith("python."):
                site.values.update(own)


def _mark_imported_in_memory_datasets(results: list[FileResult], datasets: dict[str, set[str]]) -> None:
    """A DataLoader over a class the file imports by name from a project module whose ``__getitem__``
    only indexes (``from helpers import HeldDataset``; ``pn.only_indexes``)."""
    for result in results:
        imported = datasets.get(result.path)
        if not imported:
            continue
        for site in result.sites:
            if site.scope == "python.dataloader" and site.values.get("dataset_class") in imported:
                site.values["dataset_in_memory"] = True


def collect(results: list[FileResult], context: bool = False,
            test_files: tuple[str, ...] = DEFAULT_TEST_FILES) -> StaticRun:
    """Turn file results into fact sets plus the project-wide ``run`` fact set. With ``context``, the
    project modules the checked Python files import (a helper beside a script) add what they do to
    the project flags, and nothing else (:mod:`gpudoctor.static.localimports`)."""
    from gpudoctor.static.launchranks import join_rank_workers
    from gpudoctor.static.localimports import project_context
    from gpudoctor.static.python import FLAGS

    run = StaticRun()
    flags: dict[str, bool] = dict.fromkeys(FLAGS, False)

    def is_test(path: str) -> bool:
        return is_test_file(path, test_files)

    if not context:  # each file alone: its own flags are its program's
        judge_by_program(results, {r.path: {k for k, v in r.flags.items() if v} for r in results}, {}, is_test)
    else:
        found = project_context(results, lambda path: _check_one(path, "python"), is_test)
        run.context_files = found.files
        flags.update(dict.fromkeys(found.flags, True))
        judge_by_program(results, found.reach, found.programs, is_test)
        _mark_imported_in_memory_datasets(results, found.datasets)
    join_rank_workers(results)
    for result in results:
        run.files_by_kind[result.kind] = run.files_by_kind.get(result.kind, 0) + 1
        others = [s for s in result.sites if s.scope != "file.error"]
        if len(others) > MAX_SITES_PER_FILE:  # every site is judged by every rule of its scope
            errors = [s for s in result.sites if s.scope == "file.error"]
            dropped = len(others) - MAX_SITES_PER_FILE
            first_dropped = others[MAX_SITES_PER_FILE]
            result.sites[:] = [*others[:MAX_SITES_PER_FILE], *errors]
            result.error("too-many-sites", f"{dropped} sites from here on were not checked (limit {MAX_SITES_PER_FILE})",
                         first_dropped.line, first_dropped.col)
        run.factsets.extend(result.factsets())
        if result.ignores:
            run.ignores[result.path] = result.ignores
        for name, value in result.flags.items():
            flags[name] = flags.get(name, False) or value
    run.flags = flags
    run.factsets.append(FactSet(scope="run", source=Source.STATIC,
                                values={**{f"project_{k}": v for k, v in flags.items()},
                                        "flag_scope": "anywhere in the checked code",
                                        "project_python_files": run.files_by_kind.get("python", 0)}))
    return run
