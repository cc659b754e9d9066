"""Interval arithmetic on GPU timelines, with Holistic Trace Analysis' definitions.

Why this exists: idle / compute / non-compute time and comm/compute overlap must agree with HTA 0.5.0
(within 0.5 points on its own test traces), so the event selection (HTA drops GPU work launched from
the last ``ProfilerStep``), the nanosecond rounding and the interval merge are reproduced here
exactly, in plain Python over sorted lists instead of pandas (over numpy arrays for a table of
≥ 1 M events: :mod:`.vectorized`; the same values).

What it must not do: classify kernels by name (that is :mod:`.kernels`) or know about rules.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections.abc import Iterable, Sequence
from itertools import compress, islice
from typing import Any

import msgspec

from gpudoctor.trace import vectorized
from gpudoctor.trace.masks import doubles, mask_and, mask_not, mask_positions
from gpudoctor.trace.reader import K_PYTHON, EventTable
from gpudoctor.trace.vectorized import Floats, Ints, numpy_for

_PROFILER_STEP = "ProfilerStep"
_SYNC_NAMES = ("Event Sync", "Context Sync")
_PYTHON_MASK = bytes(1 if k == K_PYTHON else 0 for k in range(256))
STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals, as HTA's ``merge_kernel_intervals`` computes it (sorted by start).

    An interval starts a new group when it starts after every earlier interval's end (the running
    maximum); a group ends at the running maximum at its last interval (earlier groups end before
    it starts), unless its first interval is inverted (end < start, possible after HTA's ns
    rounding): then at the largest end in the group. One plain loop after the sort: measured 4×
    faster here than ``accumulate(ends, max)`` and ``compress`` (``max`` is a slow call per item).
    """
    items = sorted(intervals)
    if not items:
        return []
    out: list[Interval] = []
    group_start, running = items[0]
    group_max = running
    inverted = running < group_start
    for start, end in islice(items, 1, None):
        if start > running:
            out.append((group_start, group_max if inverted else running))
            group_start, group_max, inverted = start, end, end < start
        elif end > group_max:
            group_max = end
        if end > running:
            running = end
    out.append((group_start, group_max if inverted else running))
    return out


def total(merged: Sequence[Interval]) -> float:
    """Summed length of merged intervals (HTA sums ``end - ts``, negatives included)."""
    return sum([b - a for a, b in merged])


def intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of the overlap of two merged, sorted interval lists (comparisons, not ``max``/``min`` calls)."""
    i = j = 0
    out = 0.0
    len_a, len_b = len(a), len(b)
    while i < len_a and j < len_b:
        a_start, a_end = a[i]
        b_start, b_end = b[j]
        lo = b_start if b_start > a_start else a_start
        hi = b_end if b_end < a_end else a_end
        if hi > lo:
            out += hi - lo
        if a_end < b_end:
            i += 1
        else:
            j += 1
    return out


def subtract(base: Sequence[Interval], cut: Sequence[Interval]) -> list[Interval]:
    """``base`` minus ``cut`` (both merged and sorted)."""
    out: list[Interval] = []
    j = 0
    for a, b in base:
        cur = a
        while j < len(cut) and cut[j][1] <= cur:
            j += 1
        k = j
        while k < len(cut) and cut[k][0] < b:
            if cut[k][0] > cur:
                out.append((cur, cut[k][0]))
            cur = max(cur, cut[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


#: How long after a sync the host may take to launch the next GPU work for the GPU idle meanwhile to be
#: the sync's (µs), when it waited less than that in the sync. Refilling the queue takes the host
#: 35–75 µs after each per-parameter ``.item()`` of examples/host_sync.py and 0.3–0.6 ms after
#: pytorch/examples DCGAN's per-iteration logging on the H200; 100 ms of the host's own work after
#: a read (a batch made on the CPU, DataLoader workers forked at an epoch start) is that work's idle.
SYNC_REFILL_US = 1000.0


def sync_idle(waits: Iterable[Interval], busy_starts: Sequence[float], until: float | None = None) -> list[Interval]:
    """The GPU idle host syncs cause: from the end of each wait toward the next GPU work, merged.

    ``waits``: each sync's wait, (start, end) (:meth:`~gpudoctor.trace.context.Context.sync_waits`);
    ``busy_starts``: the sorted starts of the merged GPU busy intervals; ``until``: where the idle
    after a sync with no later GPU work ends (None: such a sync causes none).

    A sync drains the queue; the GPU then idles until the host launches new work. That idle is the
    sync's while the host is refilling the queue, for at most :data:`SYNC_REFILL_US` — or as long as
    the host waited in the sync, when that is longer: without the sync the host would have been that
    far ahead, its work after the read overlapping the GPU's (shared/traces/h200/sync_pageable: a
    29 ms wait in ``loss.item()``, then 108 ms of ``aten::randn`` on the CPU: 29 ms are the sync's).
    """
    out: list[Interval] = []
    for start, sync_end in waits:
        k = bisect.bisect_left(busy_starts, sync_end)
        nxt = busy_starts[k] if k < len(busy_starts) else until
        if nxt is not None and nxt > sync_end:
            out.append((sync_end, min(nxt, sync_end + max(sync_end - start, SYNC_REFILL_US))))
    return merge(out)


#: Events per block of a column-wide computation: the block's Python floats are freed before the
#: next block's are made, so their memory is reused instead of growing the process by ~32 bytes per
#: event (end_times over the 2.6 M events of the 1.1 GB synthetic trace: 25 k page faults and
#: ~0.1 CPU-s of the kernel's time in one list, none in blocks).
BLOCK_EVENTS = 1 << 16


def end_times(t: EventTable) -> array:
    """Every event's end (``ts + dur``, the same float as computing it per event), once per table."""
    cached = t.cache.get("end")
    if cached is None and numpy_for(t) is not None:  # numpy's sums, copied: ~10 ms instead of ~90 on 2.6 M events
        cached = t.cache["end"] = array("d", vectorized.ends(t).tobytes())
    if cached is None:
        ts, dur = t.ts, t.dur
        cached = t.cache["end"] = array("d")
        for at in range(0, len(ts), BLOCK_EVENTS):
            cached.frombytes(doubles([a + d for a, d in zip(ts[at:at + BLOCK_EVENTS], dur[at:at + BLOCK_EVENTS])]))
    return cached


class DeviceSelection(msgspec.Struct):
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


class DeviceArrays(msgspec.Struct, frozen=True):
    """:class:`DeviceSelection` as numpy arrays (the numpy path's form): ``index`` int64, ``start``
    and ``end`` float64, ``dropped_last_step``."""

    index: Ints
    start: Floats
    end: Floats
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


def hta_device_arrays(np: Any, t: EventTable) -> DeviceArrays:
    """:func:`hta_device_events` as arrays, computed once per table (numpy path only: ``np`` is numpy).

    The numpy path's own callers take these, not the lists: making the three lists from them costs
    ~25 ms on the 388 k selected events of the 1.1 GB synthetic trace (the arrays: ~25 ms).
    """
    cached: DeviceArrays | None = t.cache.get("np:hta_device_events")
    if cached is None:
        cached = t.cache["np:hta_device_events"] = _hta_device_arrays_np(np, t)
    return cached


def _hta_device_arrays_np(np: Any, t: EventTable) -> DeviceArrays:
    """The numpy path of :func:`_hta_device_events`: the same selection by boolean arrays."""
    names = t.names
    step_ids = {i for i, n in enumerate(names) if _PROFILER_STEP in n}
    sync_ids = {i for i, n in enumerate(names) if n in _SYNC_NAMES}
    col = vectorized.column
    kind, ts, corr, stream = col(t, "kind"), col(t, "ts"), col(t, "correlation"), col(t, "stream")
    gpu = (stream >= 0) & (corr >= 0)
    syncs = vectorized.name_positions(t, sync_ids)
    gpu[syncs] = True
    kept = (stream != -1) & (kind != K_PYTHON)
    rounding = t.ns_resolution
    dropped = False
    if len(step_ids) >= 2:
        steps = vectorized.name_positions(t, step_ids)  # step_spans' look-up (cached) when the names are the same
        last_start = float(ts[steps[(kind[steps] != K_PYTHON) & ~gpu[steps]]].max())
        if rounding:
            last_start = math.ceil(last_start)
        limit = float(last_start - 1 if rounding else last_start)
        early = ts <= limit if rounding else ts < limit
        host = ~gpu
        allowed = corr[host & early & (corr >= 0)]
        if (corr[syncs] < 0).any():  # only a sync can be a GPU event without an id
            allowed = np.concatenate((allowed, corr[host & early & (corr < 0)]))
        chosen = kept & ~gpu & early
        gpu_kept = np.flatnonzero(kept & gpu)
        chosen[gpu_kept[np.isin(corr[gpu_kept], allowed)]] = True
        index = np.flatnonzero(chosen)
        dropped = True
    else:
        index = np.flatnonzero(kept)
    start, end = ts[index], vectorized.ends(t)[index]
    if rounding:  # + 0.0: -0.0 as math.ceil/floor give it (0)
        start, end = np.ceil(start) + 0.0, np.floor(end) + 0.0
    return DeviceArrays(index, start, end, dropped)


def _hta_device_events(t: EventTable) -> DeviceSelection:
    np = numpy_for(t)
    if np is not None:
        arrays = hta_device_arrays(np, t)
        return DeviceSelection(arrays.index.tolist(), arrays.start.tolist(), arrays.end.tolist(), arrays.dropped_last_step)
    names = t.names
    step_ids = {i for i, n in enumerate(names) if _PROFILER_STEP in n}
    sync_ids = {i for i, n in enumerate(names) if n in _SYNC_NAMES}
    kind, ts, dur, corr = t.kind, t.ts, t.dur, t.correlation
    # Device candidates: HTA's "GPU kernels" (stream and correlation ≥ 0, or a sync by name) and
    # the other events that carry a stream — selected by C-level passes over byte masks.
    has_stream = t.not_minus_one("stream")
    gpu = bytearray(mask_and(t.nonnegative("stream"), t.nonnegative("correlation")))
    syncs = t.positions_of(sync_ids) if sync_ids else []
    for i in syncs:
        gpu[i] = 1
    rounding = t.ns_resolution
    dropped = False
    if len(step_ids) >= 2:
        step_starts = [ts[i] for i in t.positions_of(step_ids) if kind[i] != K_PYTHON and not gpu[i]]
        last_start = max(step_starts)
        if rounding:
            last_start = math.ceil(last_start)
        # ceil(ts) < L  <=>  ts <= L - 1 for an integer L (rounding), else ts < L.
        limit = float(last_start - 1 if rounding else last_start)
        # The correlation ids of the other events that start before the limit: those with an id
        # (≥ 0) by C-level selection; -1 (no id) only when a selected GPU event has it too (a sync).
        host = mask_not(gpu)
        with_id = mask_and(host, t.nonnegative("correlation"))
        allowed = _ids_before(compress(corr, with_id), compress(ts, with_id), limit, rounding)
        if any(corr[i] < 0 for i in syncs if gpu[i]):  # only a sync can be a GPU event without an id
            rest = mask_and(host, mask_not(with_id))
            allowed |= _ids_before(compress(corr, rest), compress(ts, rest), limit, rounding)
        # the GPU events whose launch is allowed, and the other device events that start before the limit
        kept = mask_and(has_stream, mask_not(kind.translate(_PYTHON_MASK)))
        gpu_kept = mask_positions(mask_and(kept, gpu))
        gpu_kept = list(compress(gpu_kept, map(allowed.__contains__, map(corr.__getitem__, gpu_kept))))
        other = mask_positions(mask_and(kept, mask_not(gpu)))
        if rounding:
            other = [i for i in other if ts[i] <= limit]
        else:
            other = [i for i in other if ts[i] < limit]
        index = sorted(gpu_kept + other) if other else gpu_kept
        dropped = True
    else:
        index = mask_positions(mask_and(has_stream, mask_not(kind.translate(_PYTHON_MASK))))
    if rounding:
        start = [float(math.ceil(ts[i])) for i in index]
        end = [float(math.floor(ts[i] + dur[i])) for i in index]
    else:
        start = [ts[i] for i in index]
        end = [ts[i] + dur[i] for i in index]
    return DeviceSelection(index, start, end, dropped)


def _ids_before(ids: Iterable[int], starts: Iterable[float], limit: float, rounding: bool) -> set[int]:
    """The ids of the events that start before ``limit`` (at or before it when ``rounding``)."""
    starts = list(starts)
    early = [x <= limit for x in starts] if rounding else [x < limit for x in starts]
    return set(compress(ids, early))


def step_spans(t: EventTable) -> list[tuple[int, float, float]]:
    """``(step number, start µs, end µs)`` of each host-side ``ProfilerStep#N``, in time order."""
    by_step: dict[int, tuple[float, float]] = {}
    step_names = {i: int(m.group(1)) for i, n in enumerate(t.names) if (m := STEP_RE.search(n))}
    if not step_names:
        return []
    np = numpy_for(t)
    for i in t.positions_of(step_names) if np is None else vectorized.name_positions(t, step_names).tolist():
        num = step_names[t.name[i]]
        if t.stream[i] >= 0 or t.kind[i] == 7:  # 7: GPU-side annotation
            continue
        span = (t.ts[i], t.ts[i] + t.dur[i])
        old = by_step.get(num)
        if old is None or span[1] - span[0] > old[1] - old[0]:
            by_step[num] = span
    return sorted(((k, a, b) for k, (a, b) in by_step.items()), key=lambda s: s[1])


#: A first or last step separated from its neighbour by more than this many median step lengths (and
#: at least :data:`OUTLIER_MIN_GAP_US`) is not part of the profile window: ``ProfilerStep#N`` spans are
#: back to back (each runs from one ``prof.step()`` to the next), so such a gap is a moved timestamp.
OUTLIER_GAP_STEPS = 100.0
OUTLIER_MIN_GAP_US = 1e6


def plausible_steps(steps: list[tuple[int, float, float]]) -> tuple[list[tuple[int, float, float]], list[str]]:
    """The steps that can be true, and one sentence per kind left out.

    A step of zero length (its end equals its start: a zero duration, or timestamps so large that a
    float cannot tell them apart) gave ZeroDivisionError; a step moved far away (ts 1e17 in a window of
    ms) flipped the verdict with no note. Both are left out of every metric and named here.
    """
    notes: list[str] = []
    kept = [s for s in steps if s[2] - s[1] > 0.0]
    if len(kept) < len(steps):
        zero = [f"#{k}" for k, a, b in steps if not b - a > 0.0]
        notes.append(f"{len(zero)} ProfilerStep span(s) of zero length left out ({', '.join(zero[:5])}"
                     f"{' …' if len(zero) > 5 else ''}).")
    if len(kept) >= 3:
        lengths = sorted(b - a for _, a, b in kept)
        limit = max(OUTLIER_MIN_GAP_US, OUTLIER_GAP_STEPS * lengths[len(lengths) // 2])
        first, last = 0, len(kept)
        while last - first >= 3 and kept[first + 1][1] - kept[first][2] > limit:
            first += 1
        while last - first >= 3 and kept[last - 1][1] - kept[last - 2][2] > limit:
            last -= 1
        far = kept[:first] + kept[last:]
        if far:
            shown = ", ".join(f"#{k} at ts {a:.6g} µs" for k, a, _ in far[:3])
            notes.append(f"{len(far)} ProfilerStep span(s) far outside the others left out ({shown}; the other "
                         f"steps lie within {kept[first][1]:.6g}–{kept[last - 1][2]:.6g} µs).")
            kept = kept[first:last]
    return kept, notes


#: Calls that capture a CUDA graph: the runtime's instantiation (torch.cuda.graphs by hand, or
#: torch.compile's CUDA-graph trees) and the trees' own record span.
_GRAPH_CAPTURE_CALLS = frozenset({"cudaGraphInstantiate", "cudaGraphInstantiateWithFlags",
                                  "cudaGraphInstantiateWithParams", "hipGraphInstantiate",
                                  "hipGraphInstantiateWithFlags"})
_GRAPH_RECORD_PREFIX = "CUDAGraphNode.record"


def graph_recording_steps(t: EventTable, steps: Sequence[tuple[int, float, float]]) -> int:
    """How many of the first steps capture CUDA graphs (a run of them from the first step on).

    A step that records graphs (torch.compile's ``mode="reduce-overhead"`` warming up and recording,
    a ``torch.cuda.graph`` capture) runs the model eagerly once more and instantiates the graphs: on
    pytorch/examples DCGAN on the H200 the first two steps of a profile window took 191.6 and 55.4 ms
    recording, the three replaying steps after them 11.0–13.2 ms (tests/data/gpu_runs/h200-dcgan/warmup_gate/).
    """
    if not steps:
        return 0
    ids = [i for i, n in enumerate(t.names) if n in _GRAPH_CAPTURE_CALLS or n.startswith(_GRAPH_RECORD_PREFIX)]
    if not ids:
        return 0
    starts = [a for _, a, _ in steps]
    marked: set[int] = set()
    for i in t.positions_of(ids):
        k = bisect.bisect_right(starts, t.ts[i]) - 1
        if k >= 0 and t.ts[i] <= steps[k][2]:
            marked.add(k)
    leading = 0
    while leading in marked:
        leading += 1
    return leading

