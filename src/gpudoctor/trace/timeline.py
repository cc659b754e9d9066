"""Interval arithmetic on GPU timelines, with Holistic Trace Analysis' definitions.

Why this exists: idle / compute / non-compute time and comm/compute overlap must agree with HTA 0.5.0
(within 0.5 points on its own test traces), so the event selection (HTA drops GPU work launched from
the last ``ProfilerStep``), the nanosecond rounding and the interval merge are reproduced here
exactly, in plain Python over sorted lists instead of pandas.

What it must not do: classify kernels by name (that is :mod:`.kernels`) or know about rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress
from operator import gt

from gpudoctor.trace.reader import K_PYTHON, EventTable

_PROFILER_STEP = "ProfilerStep"
_SYNC_NAMES = ("Event Sync", "Context Sync")
STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals, as HTA's ``merge_kernel_intervals`` computes it (sorted by start).

    An interval starts a new group when it starts after every earlier interval's end (the running
    maximum); a group ends at the largest end in it. The running maximum and the group starts are
    found with C-level ``accumulate``/``compress``; Python only runs once per group.
    """
    items = sorted(intervals)
    n = len(items)
    if n == 0:
        return []
    starts = [a for a, _ in items]
    ends = [b for _, b in items]
    running_max = list(accumulate(ends, max))
    firsts = [0, *compress(range(1, n), map(gt, starts[1:], running_max))]
    lasts = [*firsts[1:], n]
    # A group's end is the running maximum at its last interval (earlier groups end before it starts),
    # unless its first interval is inverted (end < start, possible after HTA's ns rounding).
    return [(starts[f], running_max[last - 1] if ends[f] >= starts[f] else max(ends[f:last]))
            for f, last in zip(firsts, lasts)]


def total(merged: Sequence[Interval]) -> float:
    """Summed length of merged intervals (HTA sums ``end - ts``, negatives included)."""
    return sum([b - a for a, b in merged])


def intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of the overlap of two merged, sorted interval lists."""
    i = j = 0
    out = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            out += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


@dataclass
class DeviceSelection:
    """The device events HTA's analyses use, with HTA's rounding applied.

    Attributes:
        index: Event indices (into the :class:`EventTable`) of the selected device events.
        start: Their (rounded) start times, µs.
        end: Their (rounded) end times, µs.
        dropped_last_step: Whether work of the last ``ProfilerStep`` was left out, as HTA does.
    """

    index: list[int]
    start: list[float]
    end: list[float]
    dropped_last_step: bool


def hta_device_events(t: EventTable) -> DeviceSelection:
    """Select device events as HTA 0.5.0 does before its temporal breakdown.

    HTA keeps a GPU event (stream ≥ 0 and correlation ≥ 0, or an ``Event Sync``/``Context Sync``)
    only if its correlation id belongs to a host event that starts before the last ``ProfilerStep``
    starts; other events with a stream must start before it too. This applies only when at least
    two distinct ``ProfilerStep`` names exist. ns-resolution traces are rounded: start up, end down.
    Computed once per table (the temporal breakdown and the kernel-type split both use it).
    """
    cached = t.cache.get("hta_device_events")
    if cached is None:
        cached = t.cache["hta_device_events"] = _hta_device_events(t)
    return cached


def _hta_device_events(t: EventTable) -> DeviceSelection:
    names = t.names
    step_ids = {i for i, n in enumerate(names) if _PROFILER_STEP in n}
    sync_ids = {i for i, n in enumerate(names) if n in _SYNC_NAMES}
    kind, name, ts, dur = t.kind, t.name, t.ts, t.dur
    stream, corr = t.stream, t.correlation
    n = len(kind)
    # Device candidates: HTA's "GPU kernels" (stream and correlation ≥ 0, or a sync by name) and
    # the other events that carry a stream.
    device = list(compress(range(n), map((-1).__ne__, stream)))
    if sync_ids:
        device = sorted({*device, *(i for i, nid in enumerate(name) if nid in sync_ids)})
    is_gpu = {i for i in device if (stream[i] >= 0 and corr[i] >= 0) or name[i] in sync_ids}
    rounding = t.ns_resolution
    dropped = False
    if len(step_ids) >= 2:
        step_starts = [ts[i] for i in compress(range(n), map(step_ids.__contains__, name))
                       if kind[i] != K_PYTHON and i not in is_gpu]
        last_start = max(step_starts)
        if rounding:
            last_start = math.ceil(last_start)
        # ceil(ts) < L  <=>  ts <= L - 1 for an integer L (rounding), else ts < L.
        limit = float(last_start - 1 if rounding else last_start)
        early = bytearray(map(limit.__ge__ if rounding else limit.__gt__, ts))  # 1: starts before the limit
        for i in is_gpu:
            early[i] = 0
        allowed = set(compress(corr, early))
        for i in is_gpu:
            early[i] = 1 if (ts[i] <= limit if rounding else ts[i] < limit) else 0
        index = [i for i in device if kind[i] != K_PYTHON and stream[i] != -1
                 and (corr[i] in allowed if i in is_gpu else early[i])]
        dropped = True
    else:
        index = [i for i in device if kind[i] != K_PYTHON and stream[i] != -1]
    if rounding:
        start = [float(math.ceil(ts[i])) for i in index]
        end = [float(math.floor(ts[i] + dur[i])) for i in index]
    else:
        start = [ts[i] for i in index]
        end = [ts[i] + dur[i] for i in index]
    return DeviceSelection(index, start, end, dropped)


def step_spans(t: EventTable) -> list[tuple[int, float, float]]:
    """``(step number, start µs, end µs)`` of each host-side ``ProfilerStep#N``, in time order."""
    by_step: dict[int, tuple[float, float]] = {}
    step_names = {i: int(m.group(1)) for i, n in enumerate(t.names) if (m := STEP_RE.search(n))}
    if not step_names:
        return []
    for i in [i for i, nid in enumerate(t.name) if nid in step_names]:
        num = step_names[t.name[i]]
        if t.stream[i] >= 0 or t.kind[i] == 7:  # 7: GPU-side annotation
            continue
        span = (t.ts[i], t.ts[i] + t.dur[i])
        old = by_step.get(num)
        if old is None or span[1] - span[0] > old[1] - old[0]:
            by_step[num] = span
    return sorted(((k, a, b) for k, (a, b) in by_step.items()), key=lambda s: s[1])
