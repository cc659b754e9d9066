"""Trace files in, facts out: per-rank metrics and fact sets, one rank per worker process.

Why this exists: ``gpudoctor analyze``, ``gpudoctor compare``, the live session's on-demand profile and
the Python API (all through :mod:`gpudoctor.pipeline`) read traces the same way. A rank's trace is
read and reduced to its metrics in one step (:func:`analyze_rank_file`), so that a worker process can
do it and send back only the numbers — a rank's event columns never cross a process boundary and
never outlive its analysis. :func:`analyze_trace_files` runs that over a directory of rank traces on
``jobs`` processes; the result is the same, value for value, whatever ``jobs`` is.

What it must not do: run the rules engine or build a report (that is :mod:`gpudoctor.pipeline`),
print, exit, or import torch / rich / textual.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.forkpool import ForkPool, WorkerDied, can_fork, usable_cores
from gpudoctor.trace.comm import comm_share_metrics
from gpudoctor.trace.events import EventTable
from gpudoctor.trace.metrics import RankMetrics, compute_rank_metrics
from gpudoctor.trace.reader import RankTrace, TraceFileError, find_trace_files, load_trace

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactSet, FactValue

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)


class RankFacts(msgspec.Struct):
    """One rank, analysed: its trace's header and notes, its metrics, and JSON-only extras.

    ``trace.events`` is emptied once the metrics are computed (unless the caller asks to keep
    them): what is kept per rank is a few hundred numbers, not millions of events.
    """

    trace: RankTrace
    metrics: RankMetrics
    extra: dict[str, FactValue] = msgspec.field(default_factory=dict)

    @property
    def rank(self) -> int:
        return self.trace.rank

    def renumber(self, rank: int) -> None:
        """Give this rank its place among the traces read (not among the files, which counts the skipped
        ones), and say the same rank in this trace's own notes, so a note and a card name one rank."""
        old = self.trace.rank
        self.trace.rank = rank
        self.metrics.rank = rank
        if old == rank:
            return
        self.trace.notes = [note.replace(f"rank {old} taken from the position", f"rank {rank} taken from the position")
                            if not note.startswith(f"rank {old}:") else f"rank {rank}:" + note[len(f"rank {old}:"):]
                            for note in self.trace.notes]


class TraceSetFacts(msgspec.Struct):
    """Every rank of a trace set, analysed, plus what the rules engine needs (fact sets) and notes."""

    ranks: list[RankFacts]
    notes: list[str]
    corrupt: list[str]
    factsets: list[FactSet]
    run: FactSet
    #: GD601's per-rank fact sets; filled by judging (``pipeline.judge_traces``), which has the options
    straggler: list[FactSet] = msgspec.field(default_factory=list)

    @property
    def traces(self) -> list[RankTrace]:
        return [r.trace for r in self.ranks]

    @property
    def metrics(self) -> list[RankMetrics]:
        return [r.metrics for r in self.ranks]


def analyze_rank(trace: RankTrace, keep_events: bool = False, processes: int = 1) -> RankFacts:
    """Every per-rank number of one loaded trace (modules that add per-rank facts are called here).

    The cyclic garbage collector is paused meanwhile: the metrics build hundreds of thousands of
    interval tuples and no cycles, and each collection would rescan them (10–20% of the metrics'
    time on df_index_resolver).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        metrics = compute_rank_metrics(trace, processes)
        extra = dict(comm_share_metrics(trace.events))  # HTA kernel-type breakdown terms (JSON only)
    finally:
        if was_enabled:
            gc.enable()
    if not keep_events:
        trace.events = EventTable()
    return RankFacts(trace, metrics, extra)


def analyze_rank_file(path: str, position: int, processes: int = 1) -> RankFacts | TraceFileError:
    """Read and analyse one trace file; a bad file comes back as its error (picklable), not raised.

    ``processes=2``: a second process may take half of the decoding and part of the metrics.
    """
    try:
        return analyze_rank(load_trace(path, position, processes=processes), processes=processes)
    except TraceFileError as exc:
        return exc


def default_jobs() -> int:
    """The cores this process may use (affinity, capped by a cgroup CPU quota: see :func:`usable_cores`)."""
    return usable_cores()


class PendingTraceSet:
    """Rank traces being read: on forked workers from the moment it is made, or in this process
    when :meth:`result` is called (``--jobs 1``, or where this process may not fork one file). The caller does its own work meanwhile
    (``gpudoctor analyze`` imports and loads the rule catalog) and then collects the result."""

    def __init__(self, files: list[Path], named: set[Path], jobs: int) -> None:
        self._files = files
        self._named = named
        self._pool: Any = None
        self._spawned: Any = None
        # A file may use two processes (decode halves, metrics beside: see analyze_rank_file) when
        # there are cores for it: one file and two jobs, or twice as many jobs as files.
        self._processes = 2 if jobs >= 2 * len(files) else 1
        workers = min(jobs, len(files))
        self._workers = workers
        forking = can_fork()
        if workers <= 1 and not (forking and self._processes == 2):
            return
        items = [(str(f), i, self._processes) for i, f in enumerate(files)]
        if forking:
            # One file too, when it has a core to spare: it is read from now on, while this process
            # sets up the rules (what crosses the pipe is its facts, without the event table). The
            # largest files first: with more ranks than workers, a large rank taken last would run
            # alone at the end (the results are put back in file order).
            self._pool = ForkPool(analyze_rank_file, items, workers, order=_largest_first(files))
            return
        # other threads run (a notebook kernel, the live session): fork could copy a held lock, so
        # the workers are fresh interpreters (spawn), through multiprocessing.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from gpudoctor.isolated import SAFE_PATH_ENV

        # the workers (and multiprocessing's resource tracker) start here and at submit; their
        # `python -c` line is multiprocessing's, so Python 3.11+ is told through the environment to
        # leave the current directory off their sys.path
        saved = {key: os.environ.get(key) for key in SAFE_PATH_ENV}
        os.environ.update(SAFE_PATH_ENV)
        try:
            self._spawned = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            self._futures = [self._spawned.submit(analyze_rank_file, *item) for item in items]
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def result(self) -> TraceSetFacts:
        """Every rank, analysed and compared (see :func:`analyze_trace_files`).

        Raises:
            UserError: a worker died, a named file is not a readable trace, or no file is one.
        """
        try:
            results = self._collect()
        except BaseException:
            self.close()
            raise
        return _assemble(self._files, self._named, results)

    def _collect(self) -> list[RankFacts | TraceFileError]:
        if self._pool is not None:
            try:
                results: list[RankFacts | TraceFileError] = self._pool.results()
                return results
            except WorkerDied:
                raise self._died() from None
        if self._spawned is not None:
            from concurrent.futures.process import BrokenProcessPool

            try:
                return [future.result() for future in self._futures]
            except BrokenProcessPool:
                raise self._died() from None
        return [analyze_rank_file(str(f), i, self._processes) for i, f in enumerate(self._files)]

    def _died(self) -> UserError:
        return UserError(f"a worker process reading the rank traces died (killed, or out of memory with "
                         f"{self._workers} at once); run again with fewer --jobs.", ExitCode.USAGE)

    def close(self) -> None:
        """Stop the workers that still run and reap them all (after :meth:`result`, they have only
        their exits left: reaping after judging lets those overlap it)."""
        if self._pool is not None:
            self._pool.close()
        if self._spawned is not None:
            self._spawned.shutdown(wait=True, cancel_futures=True)


def _largest_first(files: Sequence[Path]) -> list[int]:
    sizes = []
    for f in files:
        try:
            sizes.append(f.stat().st_size)
        except OSError:  # the worker will say what is wrong with it
            sizes.append(0)
    return sorted(range(len(files)), key=lambda i: -sizes[i])


def start_trace_files(paths: Iterable[str | Path], jobs: int | None = None) -> PendingTraceSet:
    """Find the trace files under ``paths`` and start reading them on ``jobs`` processes (default: all
    usable cores); :meth:`PendingTraceSet.result` collects them.

    Raises:
        UserError: ``jobs`` is below 1, or a path is missing or unreadable.
    """
    paths = list(paths)
    if jobs is not None and jobs < 1:
        raise UserError("--jobs must be at least 1.", ExitCode.USAGE)
    files = find_trace_files(paths)
    named = {Path(p) for p in paths if not Path(p).is_dir()}
    return PendingTraceSet(files, named, jobs or default_jobs())


def analyze_trace_files(paths: Iterable[str | Path], jobs: int | None = None) -> TraceSetFacts:
    """Read and analyse every trace under ``paths`` on ``jobs`` processes (default: all usable cores).

    A file named on the command line must be a trace. Inside a directory, JSON files that are not
    traces (a run's ``result.json``, a config) are skipped with a note; a trace file that is
    truncated, corrupt or unreadable is named as corrupt in a note, and the rank comparison says
    which rank it leaves out. The result is the same, value for value, whatever ``jobs`` is.

    Raises:
        UserError: a path is missing or unreadable, a named file is not a readable trace, or no
            file is one.
    """
    pending = start_trace_files(paths, jobs)
    try:
        return pending.result()
    finally:
        pending.close()


def _assemble(files: Sequence[Path], named: set[Path],
              results: Sequence[RankFacts | TraceFileError]) -> TraceSetFacts:
    """The ranks' results in file order, renumbered and deduplicated, with the notes and fact sets."""
    from gpudoctor.trace.facts import rank_factsets, run_factset

    ranks: list[RankFacts] = []
    skipped: list[str] = []
    corrupt: list[str] = []
    for f, result in zip(files, results):
        if isinstance(result, TraceFileError):
            if f in named:
                raise UserError(str(result), result.code)
            (corrupt if result.corrupt else skipped).append(f"{f.name}: {result.reason}" if result.corrupt
                                                            else f.name)
            continue
        if result.trace.rank_from == "position":  # the rank of last resort: its place among the traces read
            result.renumber(len(ranks))
        ranks.append(result)
    if not ranks:
        listed = ", ".join([*skipped, *corrupt][:5])
        raise UserError(f"no readable torch.profiler trace found among {listed}.", ExitCode.USAGE)
    notes = _dedupe_ranks(ranks)
    notes[:0] = [note for r in ranks for note in r.trace.notes]
    if skipped:
        notes.append(f"skipped {len(skipped)} JSON file(s) that are not traces: {', '.join(skipped[:5])}.")
    for entry in corrupt:
        notes.append(f"corrupt rank trace left out: {entry}.")
    metrics = [r.metrics for r in ranks]
    missing = _missing_ranks_note(ranks, corrupt)
    if missing:
        notes.append(missing)
    traces = [r.trace for r in ranks]
    return TraceSetFacts(ranks=ranks, notes=notes, corrupt=corrupt, factsets=rank_factsets(metrics),
                         run=run_factset(traces, metrics))


def _dedupe_ranks(ranks: list[RankFacts]) -> list[str]:
    notes = []
    seen: set[int] = set()
    for r in ranks:
        if r.rank in seen:
            new = max(seen) + 1
            notes.append(f"{Path(r.trace.path).name}: rank {r.rank} appears twice; using {new} for this file.")
            r.renumber(new)
        seen.add(r.rank)
    return notes


def _missing_ranks_note(ranks: Sequence[RankFacts], corrupt: Sequence[str]) -> str | None:
    """Which ranks the comparison lacks: from corrupt files' names, or the job's world size."""
    present = {r.rank for r in ranks}
    world = next((r.trace.world_size for r in ranks if r.trace.world_size), None)
    guessed = sorted({int(m.group(1)) for c in corrupt if (m := _RANK_IN_NAME.search(c.split(":", 1)[0]))}
                     - present)
    if corrupt:
        which = f"rank {', '.join(map(str, guessed))}" if guessed else f"{len(corrupt)} rank(s)"
        return (f"rank comparison is incomplete: {which} missing (corrupt file), {len(present)} rank(s) "
                "compared.")
    if world and world > len(present) >= 2:
        return f"rank comparison covers {len(present)} of the job's {world} ranks (world size)."
    return None


__all__ = ["PendingTraceSet", "RankFacts", "TraceSetFacts", "analyze_rank", "analyze_rank_file", "analyze_trace_files",
           "default_jobs", "start_trace_files"]
