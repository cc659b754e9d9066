"""Facts in, report out: the one place where an entrance's fact sets meet the rules engine.

Why this exists: the CLI commands (``analyze``, ``check``, ``compare``), the live session's profile
window and the Python API (:mod:`gpudoctor.api`) must judge the same facts the same way and hand the
same :class:`~gpudoctor.report.model.Report` to the renderers. The trace side
(:mod:`gpudoctor.trace`) and the static side (:mod:`gpudoctor.static`) only produce facts; here the
catalog is loaded when none is given, the engine runs, and the report's tables, notes and
machine-readable data are assembled.

What it must not do: print, pick an output format, exit, or import torch / rich / textual.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor.trace.analysis import RankFacts, TraceSetFacts, analyze_rank, start_trace_files

if TYPE_CHECKING:  # imported where used: `analyze` forks its workers before the rules side is loaded
    from gpudoctor.catalog import Catalog
    from gpudoctor.model import FactSet, Finding
    from gpudoctor.report.model import MetricTable, Report
    from gpudoctor.trace.reader import RankTrace

#: What a caller loads while the workers read the traces: the catalog and the rules' options.
Setup = Callable[[], tuple["Catalog | None", "Mapping[str, Mapping[str, Any]] | None"]]

#: Columns of the per-rank table in the report (units in the names).
RANK_COLUMNS = ["rank", "idle_pct", "compute_pct", "non_compute_pct", "kernel_time_us", "overlap_pct",
                "step_time_p50_ms"]
HOST_COLUMNS = ["rank", "dataloader_pct", "host_syncs_per_step", "pageable_h2d_per_step", "gemm_fp32_simt_pct",
                "gemm_tf32_pct", "gemm_lowp_pct"]
STEP_COLUMNS = ["rank", "step", "step_time_ms", "dataloader_ms", "gpu_busy_ms", "kernels"]
STRAGGLER_COLUMNS = ["rank", "step_time_p50_ms", "outside_collective_ms", "straggler_score", "step_time_score",
                     "straggler_cause", "late_collective_pct"]


#: What judging a trace set imports (engine, report, rank comparison): loaded while workers read.
_JUDGING_MODULES = ("gpudoctor.catalog.engine", "gpudoctor.report.model", "gpudoctor.trace.facts")


def _catalog(catalog: Catalog | None) -> Catalog:
    if catalog is not None:
        return catalog
    from gpudoctor.catalog import load_catalog

    return load_catalog([])


def analyze_paths(paths: Iterable[str | Path], catalog: Catalog | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None, per_step: bool = False,
                  jobs: int | None = None, setup: Setup | None = None,
                  context: Mapping[str, Any] | None = None) -> Report:
    """Read trace files (files, or directories of per-rank files) on ``jobs`` processes and judge them.

    The workers start first; ``setup`` (when given: it returns the catalog and options, replacing
    ``catalog`` and ``options``) and the loading of the default catalog run in this process while
    they read, so that the rules side costs no wall time on a rank set. ``context``: facts of the
    trace set's ``run`` scope that the traces cannot show — a live session gives its profile window
    what it measured of the job (``live.facts.LOADER_CONTEXT``).

    Raises:
        UserError: a path is missing, a named file is not a readable trace, or ``setup`` raised it.
    """
    started = time.perf_counter()
    pending = start_trace_files(paths, jobs=jobs)
    try:
        if setup is not None:
            catalog, options = setup()
        catalog = _catalog(catalog)
        for module in _JUDGING_MODULES:  # imported now, while the workers read, not after
            importlib.import_module(module)
        facts = pending.result()
        report = judge_traces(facts, catalog, options, per_step, context)
    finally:
        pending.close()  # the workers' exits overlapped judging
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def analyze_traces(traces: Sequence[RankTrace], catalog: Catalog | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None, per_step: bool = False) -> Report:
    """Judge already-loaded traces (one per rank)."""
    from gpudoctor.trace.facts import rank_factsets, run_factset

    ranks = [analyze_rank(t, keep_events=True) for t in traces]
    metrics = [r.metrics for r in ranks]
    facts = TraceSetFacts(ranks=ranks, notes=[n for t in traces for n in t.notes], corrupt=[],
                          factsets=rank_factsets(metrics), run=run_factset(traces, metrics))
    return judge_traces(facts, catalog, options, per_step)


def judge_traces(facts: TraceSetFacts, catalog: Catalog | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None, per_step: bool = False,
                 context: Mapping[str, Any] | None = None) -> Report:
    """Run the trace rules over a trace set's facts (``context`` added to its run scope) and assemble
    the report."""
    from msgspec.structs import replace

    from gpudoctor.catalog.engine import evaluate
    from gpudoctor.catalog.finalize import finalize
    from gpudoctor.model import Source
    from gpudoctor.report.model import Report
    from gpudoctor.trace.bottleneck import rank_bottleneck
    from gpudoctor.trace.facts import straggler_factsets

    started = time.perf_counter()
    # GD601's scoring reads the user's GD601 options as its rule does (resolved by code: catalog.options)
    facts.straggler = straggler_factsets(facts.metrics, (options or {}).get("GD601"))
    run = replace(facts.run, values={**facts.run.values, **context}) if context else facts.run
    factsets: list[FactSet] = [*facts.factsets, run, *facts.straggler]
    rules = _catalog(catalog)
    result = evaluate(rules, factsets, [Source.TRACE], options or {})
    notes = list(facts.notes)
    notes.extend(f"rule error: {e}" for e in result.errors)
    metrics = facts.metrics
    if any(m.values.get("last_step_dropped") for m in metrics):
        notes.append("idle/compute/non-compute exclude GPU work launched from the last ProfilerStep, as HTA does.")
    report = Report(command="analyze", inputs=[r.trace.path for r in facts.ranks], findings=result.findings,
                    not_evaluated=result.not_evaluated, tables=trace_tables(facts, per_step), notes=notes,
                    data={"ranks": [rank_data(r) for r in facts.ranks], "run": dict(facts.run.values)})
    verdicts = [(m, b) for m in metrics if (b := rank_bottleneck(m.values, m.rank)) is not None]
    report.bottlenecks = [b for _, b in verdicts]
    report.notes.extend(_idle_measures_note(verdicts, report.bottleneck))
    report.findings = finalize(result.findings, rules, options=options,
                               verdict_line=report.bottleneck.line if report.bottleneck is not None else None)
    if facts.corrupt:
        report.data["corrupt_files"] = list(facts.corrupt)
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


#: points between the verdict's idle share of the step and HTA's idle_pct of the GPU's busy span beyond
#: which the report says why the two differ (a rank with one short kernel in a long step: 100% vs 0%)
IDLE_MEASURES_APART_PCT = 30.0


def _idle_measures_note(verdicts: list[tuple[Any, Any]], shown: Any) -> list[str]:
    """One note when the verdict's idle share and the table's idle_pct of the same rank disagree."""
    for metrics, verdict in verdicts:
        if verdict is not shown:
            continue
        idle_pct = metrics.values.get("idle_pct")
        step_idle = sum(pct for name, _, pct in verdict.parts if name.startswith("idle:"))
        if isinstance(idle_pct, (int, float)) and abs(step_idle - idle_pct) > IDLE_MEASURES_APART_PCT:
            return [f"rank {metrics.rank}: the GPU idles {step_idle:.0f}% of the step (the Bottleneck line) but "
                    f"{idle_pct:.0f}% of its busy span (the table's idle_pct, HTA's measure: from its first "
                    "kernel to its last)."]
    return []


def trace_tables(facts: TraceSetFacts, per_step: bool = False) -> list[MetricTable]:
    """The report's per-rank tables (and the per-step one on request), their rows in rank order (a rank
    the trace does not name last, in file order)."""
    from gpudoctor.report.model import MetricTable

    metrics = sorted(facts.metrics, key=lambda m: _rank_order(m.rank))
    straggler = sorted(facts.straggler, key=lambda fs: _rank_order(fs.location.rank))
    tables = [MetricTable(title="GPU time per rank (HTA temporal breakdown)", columns=RANK_COLUMNS, key="ranks",
                          rows=[{c: ({"rank": m.rank} | m.values).get(c) for c in RANK_COLUMNS} for m in metrics]),
              MetricTable(title="Input, host syncs and GEMM precision per rank", columns=HOST_COLUMNS, key="host",
                          rows=[{c: ({"rank": m.rank} | m.values).get(c) for c in HOST_COLUMNS} for m in metrics])]
    if straggler:
        tables.append(MetricTable(title="Ranks compared", columns=STRAGGLER_COLUMNS, key="stragglers",
                                  rows=[{c: ({"rank": fs.location.rank} | dict(fs.values)).get(c)
                                         for c in STRAGGLER_COLUMNS} for fs in straggler]))
    if per_step:
        tables.append(MetricTable(title="Steps", columns=STEP_COLUMNS, key="steps",
                                  rows=[{"rank": m.rank} | row for m in metrics for row in m.step_rows]))
    return tables


def _rank_order(rank: int | None) -> tuple[bool, int]:
    """Sort key: named ranks by number, then those without one (Python's sort keeps their file order)."""
    return (rank is None, rank if rank is not None else 0)


def rank_data(rank: RankFacts) -> dict[str, Any]:
    """One rank's machine-readable section of the report (``data["ranks"][i]``)."""
    trace, metrics = rank.trace, rank.metrics
    return {
        "rank": metrics.rank,
        "path": trace.path,
        "rank_from": trace.rank_from,
        "device_name": trace.device_name,
        **metrics.values,
        **rank.extra,
        "malformed_events": trace.malformed_events,
        "step_ms": [row["step_time_ms"] for row in metrics.step_rows],
    }


def check_paths(paths: Sequence[str | Path], env: bool = False, catalog: Catalog | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None, jobs: int | None = None,
                test_files: tuple[str, ...] | None = None) -> Report:
    """Static checks of files and directories (and, with ``env``, this machine), judged by the rules.
    ``test_files``: the patterns of files judged as tests (None: the built-in ones).

    Raises:
        UserError: a path is missing or cannot be read.
    """
    started = time.perf_counter()
    from gpudoctor.catalog.engine import evaluate
    from gpudoctor.catalog.finalize import finalize
    from gpudoctor.model import Source
    from gpudoctor.report.model import Report
    from gpudoctor.static.sites import is_ignored

    factsets: list[FactSet] = []
    sources = []
    ignores: dict[str, dict[int, frozenset[str]]] = {}
    tables: list[MetricTable] = []
    counts: dict[str, int] = {}
    context_files: list[str] = []
    skipped: list[str] = []
    names = [str(p) for p in paths]
    if names:
        from gpudoctor.static.files import DEFAULT_TEST_FILES
        from gpudoctor.static.runner import run_checks

        static = run_checks(names, jobs=jobs, test_files=DEFAULT_TEST_FILES if test_files is None else test_files)
        factsets.extend(static.factsets)
        ignores = static.ignores
        counts = static.files_by_kind
        context_files = static.context_files
        skipped = static.skipped
        sources.append(Source.STATIC)
    if env:
        from gpudoctor.static.machine import machine_factset, machine_table

        machine = machine_factset()
        factsets.append(machine)
        tables.append(machine_table(machine))
        sources.append(Source.ENV)
    rules = _catalog(catalog)
    result = evaluate(rules, factsets, sources, options or {})
    judged = finalize(result.findings, rules, options=options)
    findings = [f for f in judged
                if not is_ignored(f.code, f.location.line, ignores.get(f.location.path or "", {}))]
    suppressed = len(judged) - len(findings)
    # each finding once: one rule at one place (a file reached by two names, two sites on one call)
    places: set[tuple[str, str | None, int | None, int | None]] = set()
    unique: list[Finding] = []
    for finding in findings:
        key = (finding.code, finding.location.path, finding.location.line, finding.location.col)
        if key not in places:
            places.add(key)
            unique.append(finding)
    findings = unique
    notes = [f"rule error: {e}" for e in result.errors]
    checked = sum(counts.values())
    if names:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        notes.append(f"checked {checked} file(s)" + (f" ({kinds})" if kinds else "") +
                     (f"; {suppressed} finding(s) suppressed by inline comments" if suppressed else ""))
        if skipped:
            notes.append(f"skipped {len(skipped)} file(s) that are not regular files: {', '.join(skipped[:5])}"
                         + (" …" if len(skipped) > 5 else ""))
        if context_files:
            shown = ", ".join(context_files[:5]) + (" …" if len(context_files) > 5 else "")
            notes.append(f"read {len(context_files)} project module(s) they import, for what the project does "
                         f"(autocast, compile, pin_memory …), not judged themselves: {shown}")
    return Report(command="check", inputs=names + (["--env"] if env else []), findings=findings,
                  not_evaluated=result.not_evaluated, tables=tables, notes=notes,
                  data={"files_checked": checked, "files_by_kind": counts, "suppressed": suppressed,
                        "context_files": context_files},
                  elapsed_s=round(time.perf_counter() - started, 3))


__all__ = ["HOST_COLUMNS", "RANK_COLUMNS", "STEP_COLUMNS", "STRAGGLER_COLUMNS", "analyze_paths", "analyze_traces",
           "check_paths", "judge_traces", "rank_data", "trace_tables"]
