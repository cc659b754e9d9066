"""Turns per-rank trace metrics into fact sets for the rules engine (scopes rank, run, straggler).

Why this exists: rules speak in facts, not in traces. One ``rank`` fact set per trace file, one
``run`` fact set for the whole set of files (rank count, device, world size), and — when at least
two ranks are present — one ``straggler`` fact set per rank comparing it with the others: NVIDIA
resiliency-ext's score (median over ranks of the median step time ÷ this rank's) and HTA's view
(how often this rank starts the dominant collective last).

What it must not do: read files or evaluate rules.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpudoctor.model import FactSet, FactValue, Location, Source
from gpudoctor.trace.metrics import RankMetrics
from gpudoctor.trace.reader import RankTrace


def rank_factsets(metrics: Sequence[RankMetrics]) -> list[FactSet]:
    """One ``rank`` fact set per rank (only facts that were measured: None values are left out)."""
    return [FactSet(scope="rank", source=Source.TRACE,
                    values={k: v for k, v in m.values.items() if v is not None},
                    location=Location(rank=m.rank)) for m in metrics]


def run_factset(traces: Sequence[RankTrace], metrics: Sequence[RankMetrics]) -> FactSet:
    """Job-wide context, visible to every trace rule."""
    devices = sorted({t.device_name for t in traces if t.device_name})
    world = next((t.world_size for t in traces if t.world_size), None)
    majors = [t.compute_major for t in traces if t.compute_major is not None]
    values: dict[str, FactValue] = {
        "rank_count": len(traces),
        "device_name": ", ".join(devices) if devices else None,
        "world_size": world,
        "gpu_arch_major": min(majors) if majors else None,
        "trace_schema": ", ".join(sorted({t.schema for t in traces})),
    }
    steps = [m.values.get("step_time_p50_ms") for m in metrics]
    numeric = [s for s in steps if isinstance(s, (int, float))]
    if numeric:
        values["median_step_time_p50_ms"] = round(statistics.median(numeric), 3)
    return FactSet(scope="run", source=Source.TRACE, values={k: v for k, v in values.items() if v is not None})


def straggler_factsets(metrics: Sequence[RankMetrics]) -> list[FactSet]:
    """One ``straggler`` fact set per rank when two or more ranks are present."""
    if len(metrics) < 2:
        return []
    steps = {m.rank: m.values.get("step_time_p50_ms") for m in metrics}
    numeric = [v for v in steps.values() if isinstance(v, (int, float)) and v > 0]
    median_step = statistics.median(numeric) if len(numeric) >= 2 else None
    late, compared, dominant = late_collective_counts(metrics)
    out = []
    for m in metrics:
        values: dict[str, FactValue] = {"rank_count": len(metrics)}
        step = steps.get(m.rank)
        if median_step is not None and isinstance(step, (int, float)) and step > 0:
            values["straggler_score"] = round(median_step / step, 3)
            values["step_time_p50_ms"] = step
            values["median_step_time_p50_ms"] = round(median_step, 3)
        if compared:
            values["collectives_compared"] = compared
            values["late_collective_count"] = late.get(m.rank, 0)
            values["late_collective_pct"] = round(100.0 * late.get(m.rank, 0) / compared, 2)
            values["dominant_collective"] = dominant
        out.append(FactSet(scope="straggler", source=Source.TRACE, values=values,
                           location=Location(rank=m.rank)))
    return out


def late_collective_counts(metrics: Sequence[RankMetrics]) -> tuple[dict[int, int], int, str | None]:
    """HTA's straggler view: per rank, how often it starts the dominant collective last.

    The dominant collective is the communication kernel name with the most calls common to all
    ranks; its i-th call on every rank is compared by kernel start time (the ranks' clocks are
    assumed synchronised, as HTA assumes).

    Returns:
        (rank → times it was last, number of calls compared, kernel name).
    """
    common = set.intersection(*(set(m.collectives) for m in metrics)) if metrics else set()
    if not common:
        return {}, 0, None
    dominant = max(sorted(common), key=lambda n: min(len(m.collectives[n]) for m in metrics))
    series = {m.rank: sorted(m.collectives[dominant]) for m in metrics}
    calls = min(len(s) for s in series.values())
    late: dict[int, int] = {}
    for i in range(calls):
        last = max(series, key=lambda r: series[r][i])
        late[last] = late.get(last, 0) + 1
    return late, calls, dominant
