"""Turns per-rank trace metrics into fact sets for the rules engine (scopes rank, run, straggler).

Why this exists: rules speak in facts, not in traces. One ``rank`` fact set per trace file, one
``run`` fact set for the whole set of files (rank count, device, world size), and — when at least
two ranks are present — one ``straggler`` fact set per rank comparing it with the others. The score
is the live side's: median time *outside* collective waits per step of the faster half of the ranks
÷ this rank's (in synchronous data parallelism every rank's step time is equal — the fast ranks wait
in the all-reduce — so step time alone cannot name the slow rank). When a rank's trace shows no
collective at all, the score falls back to NVIDIA resiliency-ext's step-time ratio (median over
ranks of the median step time ÷ this rank's), which is also kept as ``step_time_score``. HTA's view
(how often this rank starts the dominant collective last) comes alongside.

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
    steps = {m.rank: _positive(m.values.get("step_time_p50_ms")) for m in metrics}
    numeric = [v for v in steps.values() if v is not None]
    median_step = statistics.median(numeric) if len(numeric) >= 2 else None
    outside = {m.rank: _positive(m.values.get("outside_collective_ms_p50")) for m in metrics}
    by_outside = all(v is not None for v in outside.values())
    own_ms = outside if by_outside else steps
    known = sorted(v for v in own_ms.values() if v is not None)
    reference: float | None
    if by_outside:
        faster = known[: max(1, len(known) // 2)]
        reference = statistics.median(faster)
        basis = "time outside collective waits"
    else:
        faster = [v for v in known if median_step is not None and v <= median_step]
        reference = median_step
        basis = "step time (no collective waits in the traces)"
    loader = {m.rank: _number(m.values.get("dataloader_ms_per_step")) for m in metrics}
    fast_loader = [x for r, v in own_ms.items()
                   if v is not None and v in faster and (x := loader[r]) is not None]
    ref_loader = statistics.median(fast_loader) if fast_loader else None
    late, compared, dominant = late_collective_counts(metrics)
    out = []
    for m in metrics:
        values: dict[str, FactValue] = {"rank_count": len(metrics)}
        step = steps.get(m.rank)
        if median_step is not None and step is not None:
            values["step_time_score"] = round(median_step / step, 3)
            values["step_time_p50_ms"] = step
            values["median_step_time_p50_ms"] = round(median_step, 3)
        own = own_ms.get(m.rank)
        if reference is not None and own is not None:
            values["straggler_score"] = round(reference / own, 3)
            values["straggler_ms"] = round(own, 3)
            values["reference_ms"] = round(reference, 3)
            values["score_basis"] = basis
            if by_outside:
                values["outside_collective_ms"] = round(own, 3)
                values["reference_outside_ms"] = round(reference, 3)
                wait = _number(m.values.get("collective_wait_ms_p50"))
                if wait is not None:
                    values["collective_wait_ms"] = wait
            if own > reference:
                values.update(_likely_cause(own - reference, loader.get(m.rank), ref_loader))
        if compared:
            values["collectives_compared"] = compared
            values["late_collective_count"] = late.get(m.rank, 0)
            values["late_collective_pct"] = round(100.0 * late.get(m.rank, 0) / compared, 2)
            values["dominant_collective"] = dominant
        out.append(FactSet(scope="straggler", source=Source.TRACE, values=values,
                           location=Location(rank=m.rank)))
    return out


def _likely_cause(excess_ms: float, own_loader: float | None, ref_loader: float | None) -> dict[str, FactValue]:
    """``input`` when this rank's extra DataLoader time per step explains at least half of its extra
    time (as the live side decides), else ``compute``."""
    if own_loader is not None and ref_loader is not None and own_loader - ref_loader >= 0.5 * excess_ms:
        return {"straggler_cause": "input", "cause_detail":
                f"its DataLoader takes {own_loader:.1f} ms/step vs {ref_loader:.1f} ms on the faster ranks"}
    detail = f"{excess_ms:.1f} ms/step more work outside collectives than the faster ranks"
    if own_loader is not None and ref_loader is not None:
        detail += f" with about the same DataLoader time ({own_loader:.1f} vs {ref_loader:.1f} ms/step)"
    return {"straggler_cause": "compute", "cause_detail": detail}


def _number(value: FactValue | None) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _positive(value: FactValue | None) -> float | None:
    v = _number(value)
    return v if v is not None and v > 0 else None


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
