"""Turns per-rank trace metrics into fact sets for the rules engine (scopes rank, run, straggler).

Why this exists: rules speak in facts, not in traces. One ``rank`` fact set per trace file, one
``run`` fact set for the whole set of files (rank count, device, world size), and — when at least
two ranks are present — one ``straggler`` fact set per rank comparing it with the others. The score
is the live side's: median time *outside* collective waits per step of the faster half of the ranks
÷ this rank's (in synchronous data parallelism every rank's step time is equal — the fast ranks wait
in the all-reduce — so step time alone cannot name the slow rank). When a rank's trace shows no
collective at all, the score falls back to NVIDIA resiliency-ext's step-time ratio (median over
ranks of the median step time ÷ this rank's), which is also kept as ``step_time_score``. HTA's view
(how often this rank starts the dominant collective last) comes alongside. The score's reference and
the likely cause come from :mod:`gpudoctor.straggler`, which the live side uses too; GD601's
thresholds from its rule file.

What it must not do: read files or evaluate rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from gpudoctor.model import FactSet, FactValue, Location, Source
from gpudoctor.quantiles import median
from gpudoctor.straggler import RankEvidence, faster_half_reference, likely_cause, thresholds
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
        # what the DataLoader's workers could still gain is not in a trace: a live session replaces this
        # with its measured bound when it analyses its profile window (pipeline.judge_traces' context)
        "loader_bound_text": "",
    }
    steps = [m.values.get("step_time_p50_ms") for m in metrics]
    numeric = [s for s in steps if isinstance(s, (int, float))]
    if numeric:
        values["median_step_time_p50_ms"] = round(median(numeric), 3)
    return FactSet(scope="run", source=Source.TRACE, values={k: v for k, v in values.items() if v is not None})


def straggler_factsets(metrics: Sequence[RankMetrics], options: Mapping[str, Any] | None = None) -> list[FactSet]:
    """One ``straggler`` fact set per rank when two or more ranks are present.

    Args:
        metrics: Each rank's trace metrics.
        options: The user's GD601 option overrides (the rule file gives the rest).
    """
    if len(metrics) < 2:
        return []
    limits = thresholds(options)
    steps = {m.rank: _positive(m.values.get("step_time_p50_ms")) for m in metrics}
    numeric = [v for v in steps.values() if v is not None]
    median_step = median(numeric) if len(numeric) >= 2 else None
    outside = {m.rank: _positive(m.values.get("outside_collective_ms_p50")) for m in metrics}
    by_outside = all(v is not None for v in outside.values())
    own_ms = outside if by_outside else steps
    known = sorted(v for v in own_ms.values() if v is not None)
    reference: float | None
    if by_outside:
        faster = known[: max(1, len(known) // 2)]
        reference = faster_half_reference(known)
        basis = "time outside collective waits"
    else:
        faster = [v for v in known if median_step is not None and v <= median_step]
        reference = median_step
        basis = "step time (no collective waits in the traces)"
    fast_ranks = [r for r, v in own_ms.items() if v is not None and v in faster]
    work = {m.rank: _Work.of(m) for m in metrics}
    late, compared, dominant = late_collective_counts(metrics)
    slower = slower_step_counts(metrics, "outside_collective_ms" if by_outside else "step_time_ms")
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
                fast = [work[r].evidence(own_ms[r] or 0.0) for r in fast_ranks]
                cause, detail = likely_cause(work[m.rank].evidence(own), fast, reference, limits)
                values.update({"straggler_cause": cause, "cause_detail": detail})
        if m.rank in slower:
            count, steps_compared = slower[m.rank]
            values["steps_compared"] = steps_compared
            values["slower_step_count"] = count
            values["slower_step_pct"] = round(100.0 * count / steps_compared, 1) if steps_compared else 0.0
        if compared:
            values["collectives_compared"] = compared
            values["late_collective_count"] = late.get(m.rank, 0)
            values["late_collective_pct"] = round(100.0 * late.get(m.rank, 0) / compared, 2)
            values["dominant_collective"] = dominant
        out.append(FactSet(scope="straggler", source=Source.TRACE, values=values,
                           location=Location(rank=m.rank)))
    return out


def slower_step_counts(metrics: Sequence[RankMetrics], column: str) -> dict[int, tuple[int, int]]:
    """rank → (steps in which it was slower than the median of the other ranks, steps compared).

    A median over four profiled steps can be pulled down by two steps in which a healthy rank was
    descheduled; a real straggler is slower than its peers in (nearly) every step. Steps are matched
    by their ``ProfilerStep#N`` number (by position when the ranks share no number); ``column`` is
    the per-step row field compared (time outside collectives, else step time).
    """
    series: dict[int, dict[int, float]] = {}
    for m in metrics:
        series[m.rank] = {int(row["step"]): float(row[column]) for row in m.step_rows
                          if isinstance(row.get(column), (int, float))}
    if len(series) < 2 or any(not s for s in series.values()):
        return {}
    common = sorted(set.intersection(*(set(s) for s in series.values())))
    if not common:  # different step numbers (ranks profiled at different times): compare by position
        n = min(len(s) for s in series.values())
        series = {r: dict(enumerate(v for _, v in sorted(s.items())[:n])) for r, s in series.items()}
        common = list(range(n))
    out = {}
    for rank, own in series.items():
        count = sum(1 for k in common
                    if own[k] > median(s[k] for r, s in series.items() if r != rank))
        out[rank] = (count, len(common))
    return out


class _Work(msgspec.Struct, frozen=True):
    """What a rank did per step (medians): DataLoader time, host ``aten::`` ops, GPU busy time."""

    loader_ms: float | None = None
    aten_ops: float | None = None
    gpu_busy_ms: float | None = None

    @classmethod
    def of(cls, m: RankMetrics) -> _Work:
        def med(key: str) -> float | None:
            xs = [float(v) for row in m.step_rows if isinstance(v := row.get(key), (int, float))]
            return median(xs) if xs else None
        # GPU time outside collective kernels: a fast rank's NCCL kernels spin while they wait for the
        # slow rank and would make the fast rank look "busier" (measured on 2×H200).
        return cls(_number(m.values.get("dataloader_ms_per_step")), med("aten_ops"),
                   med("gpu_compute_ms") if any("gpu_compute_ms" in r for r in m.step_rows) else med("gpu_busy_ms"))

    def evidence(self, outside_ms: float) -> RankEvidence:
        """This rank's work as the shared straggler module's evidence."""
        return RankEvidence(outside_ms, input_ms=self.loader_ms, aten_ops=self.aten_ops,
                            gpu_busy_ms=self.gpu_busy_ms, from_trace=True)


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
