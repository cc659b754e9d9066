"""Long stretches without GPU work, and what the host did meanwhile (GD304's facts).

Why this exists: a gap of 100 ms or more is a pause of the whole device, but what fills it decides
who fixes it: the loop waiting for its next batch is GD102's, the host's own work (a checkpoint, an
evaluation, logging, a batch made on the CPU) is GD304's. On accelerate's cv_example window (H200)
the one 137 ms gap was 128 ms of ``DataLoader.__next__``, and GD304 counted all of it as host work
"to move off the step". Here each long gap is split into the loop's waits for data and the rest, and
the rest is named: the outermost host ops that ran in it, and what no traced op covers.

What it must not do: judge (the rule does), or walk every event in Python on a big table (numpy
picks the few host ops inside the gaps first).
"""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING

from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context, is_input_wait
from gpudoctor.trace.events import K_ANNOTATION, K_CPU_OP, EventTable
from gpudoctor.trace.timeline import Interval, end_times, intersection_length, merge, subtract, total
from gpudoctor.trace.vectorized import numpy_for

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue

#: A gap at least this long (µs) is a pause worth a finding of its own.
LONG_GAP_US = 100_000.0
#: How many host ops the text names, and the least time in the gaps (µs) for one to be named.
TOP_OPS = 3
MIN_SHOWN_US = 500.0
_HOST_OP_KINDS = bytes(1 if k in (K_CPU_OP, K_ANNOTATION) else 0 for k in range(256))


def gap_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """The longest gap between GPU work, the long gaps' total, and what filled them on the host."""
    found = _gaps(t, ctx)
    if found is None:
        return {}
    longest, long_gaps = found
    values: dict[str, FactValue] = {
        "max_gpu_gap_ms": round(longest / 1000.0, 3),
        "gpu_gaps_over_100ms": len(long_gaps),
        "gpu_gap_total_ms": round(total(long_gaps) / 1000.0, 3),
    }
    if long_gaps:
        values.update(_what_filled(t, ctx, long_gaps))
    else:
        values.update({"gpu_gap_input_ms": 0.0, "gpu_gap_host_ms": 0.0, "gpu_gap_host_ops": ""})
    return values


def _gaps(t: EventTable, ctx: Context) -> tuple[float, list[Interval]] | None:
    """The longest stretch between two merged GPU busy intervals, and those over :data:`LONG_GAP_US`
    (None without GPU work). A big table's gaps stay in numpy: only the long ones become tuples."""
    np = numpy_for(t)
    if np is not None:
        device = ctx.device_array(t)
        starts, ends = vectorized.merge(vectorized.column(t, "ts")[device], vectorized.ends(t)[device])
        if len(starts) < 1:
            return None
        gaps = starts[1:] - ends[:-1]
        long = np.flatnonzero(gaps > LONG_GAP_US)
        return (float(gaps.max()) if len(gaps) else 0.0,
                list(zip(ends[:-1][long].tolist(), starts[1:][long].tolist())))
    ts, end = t.ts, end_times(t)
    busy = merge([(ts[i], end[i]) for i in ctx.device])
    if not busy:
        return None
    pairs = [(a[1], b[0]) for a, b in zip(busy, busy[1:])]
    return max((b - a for a, b in pairs), default=0.0), [(a, b) for a, b in pairs if b - a > LONG_GAP_US]


def _what_filled(t: EventTable, ctx: Context, long_gaps: list[Interval]) -> dict[str, FactValue]:
    """The long gaps' time in the loop's waits for data, the rest, and the host ops that ran in the rest."""
    waits = ctx.input_waits(t)
    input_us = intersection_length(long_gaps, waits)
    rest = subtract(long_gaps, waits)
    host_us = total(rest)
    values: dict[str, FactValue] = {
        "gpu_gap_input_ms": round(input_us / 1000.0, 3),
        "gpu_gap_host_ms": round(host_us / 1000.0, 3),
    }
    values["gpu_gap_host_ops"] = _name_host_work(t, rest, host_us) if host_us > 0 else ""
    return values


def _name_host_work(t: EventTable, rest: list[Interval], rest_us: float) -> str:
    """The outermost host ops (per thread) by their time inside ``rest``, and the time no op covers:
    "aten::copy_ 61 ms, checkpoint 40 ms; 12 ms not in any traced op"."""
    lo, hi = rest[0][0], rest[-1][1]
    candidates = _host_ops_between(t, lo, hi)
    ts, dur, names, name = t.ts, t.dur, t.names, t.name
    candidates.sort(key=lambda i: (t.thread[i], ts[i], -dur[i]))
    by_name: dict[str, float] = {}
    covered: list[Interval] = []
    thread, outer_end = -1, float("-inf")
    for i in candidates:
        start, end = ts[i], ts[i] + dur[i]
        if t.thread[i] != thread:
            thread, outer_end = t.thread[i], float("-inf")
        if start < outer_end:  # inside an op already counted on this thread
            continue
        outer_end = end
        op_name = names[name[i]]
        if op_name.startswith("ProfilerStep#") or is_input_wait(op_name):
            outer_end = float("-inf")  # the step span holds everything; look at what it holds
            continue
        inside = intersection_length(rest, [(start, end)])
        if inside > 0:
            by_name[op_name] = by_name.get(op_name, 0.0) + inside
            covered.append((start, end))
    shown = max(MIN_SHOWN_US, 0.02 * rest_us)
    top = sorted(by_name.items(), key=lambda item: -item[1])[:TOP_OPS]
    parts = [f"{_short(n)} {_ms(us)}" for n, us in top if us >= shown]
    untraced = rest_us - intersection_length(rest, merge(covered))
    if untraced >= shown:
        parts.append(f"{_ms(untraced)} in no traced op (Python the profiler does not record)")
    return ", ".join(parts)


def _ms(us: float) -> str:
    return f"{us / 1000.0:.0f} ms" if us >= 10_000 else f"{us / 1000.0:.1f} ms"


def _host_ops_between(t: EventTable, lo: float, hi: float) -> list[int]:
    """Indices of host ops and annotations overlapping [lo, hi]: numpy selects them on a big table,
    else one C-level pass picks the host kinds and a comprehension keeps the overlapping ones."""
    np = numpy_for(t)
    if np is not None:
        host = vectorized.kind_positions(t, (K_CPU_OP, K_ANNOTATION))
        start, end = vectorized.column(t, "ts")[host], vectorized.ends(t)[host]
        picked: list[int] = host[(start < hi) & (end > lo)].tolist()
        return picked
    ts, dur = t.ts, t.dur
    return [i for i in compress(range(len(t)), t.kind.translate(_HOST_OP_KINDS))
            if ts[i] < hi and ts[i] + dur[i] > lo]


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[:limit - 1] + "…"


__all__ = ["LONG_GAP_US", "gap_metrics"]
