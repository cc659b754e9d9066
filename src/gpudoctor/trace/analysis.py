"""The trace analyzer's facade: trace files in, a finished :class:`Report` out.

Why this exists: ``gpudoctor analyze``, ``gpudoctor compare`` and the live session's on-demand profile
all analyse traces the same way; this is the one function they call. It reads the files, computes
metrics per rank, builds fact sets, runs the rules engine and assembles the report's tables, notes
and machine-readable data.

What it must not do: print, pick an output format, exit, or import torch / rich / textual.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpudoctor.catalog import Catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import Source
from gpudoctor.report.model import MetricTable, Report
from gpudoctor.trace.comm import comm_share_metrics
from gpudoctor.trace.facts import rank_factsets, run_factset, straggler_factsets
from gpudoctor.trace.metrics import RankMetrics, compute_rank_metrics
from gpudoctor.trace.reader import RankTrace, read_traces

#: Columns of the per-rank table in the report (units in the names).
RANK_COLUMNS = ["rank", "idle_pct", "compute_pct", "non_compute_pct", "kernel_time_us", "overlap_pct",
                "step_time_p50_ms"]
HOST_COLUMNS = ["rank", "dataloader_pct", "host_syncs_per_step", "pageable_h2d_per_step", "gemm_fp32_simt_pct",
                "gemm_tf32_pct", "gemm_lowp_pct"]
STEP_COLUMNS = ["rank", "step", "step_time_ms", "dataloader_ms", "gpu_busy_ms", "kernels"]
STRAGGLER_COLUMNS = ["rank", "step_time_p50_ms", "outside_collective_ms", "straggler_score", "step_time_score",
                     "straggler_cause", "late_collective_pct"]


def analyze_traces(traces: Sequence[RankTrace], catalog: Catalog | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None,
                   per_step: bool = False) -> Report:
    """Analyse already-loaded traces (one per rank) into a report."""
    started = time.perf_counter()
    if catalog is None:
        from gpudoctor.catalog import load_catalog
        catalog = load_catalog([])
    metrics = [compute_rank_metrics(t) for t in traces]
    straggler = straggler_factsets(metrics)
    factsets = [*rank_factsets(metrics), run_factset(traces, metrics), *straggler]
    result = evaluate(catalog, factsets, [Source.TRACE], options or {})
    notes = [note for t in traces for note in t.notes]
    notes.extend(f"rule error: {e}" for e in result.errors)
    if any(m.values.get("last_step_dropped") for m in metrics):
        notes.append("idle/compute/non-compute exclude GPU work launched from the last ProfilerStep, as HTA does.")
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
    report = Report(command="analyze", inputs=[t.path for t in traces], findings=result.findings,
                    not_evaluated=result.not_evaluated, tables=tables, notes=notes,
                    data={"ranks": [_rank_data(t, m) for t, m in zip(traces, metrics)],
                          "run": dict(factsets[len(metrics)].values)})
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def analyze_paths(paths: Iterable[str | Path], catalog: Catalog | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None, per_step: bool = False) -> Report:
    """Read trace files (files, or directories of per-rank files) and analyse them.

    Raises:
        UserError: a path is missing, or a file is not a readable trace.
    """
    started = time.perf_counter()
    report = analyze_traces(read_traces(paths), catalog, options, per_step)
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def _rank_data(trace: RankTrace, metrics: RankMetrics) -> dict[str, Any]:
    return {
        "rank": metrics.rank,
        "path": trace.path,
        "rank_from": trace.rank_from,
        "device_name": trace.device_name,
        **metrics.values,
        **comm_share_metrics(trace.events),  # HTA kernel-type breakdown terms (JSON only, no rule reads it)
        "step_ms": [row["step_time_ms"] for row in metrics.step_rows],
    }
