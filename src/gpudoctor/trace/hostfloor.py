"""The host's side of a step: its own work, its waits for the GPU, and the host floor.

Why this exists: a fix that shortens GPU work gains only down to what the host needs on its own.
``host_floor_ms`` is the step minus the time the host spends blocked waiting for the GPU (in sync
calls, and in kernel launches once the launch queue is full), with the profiler's own slow-down of
the host's work taken off (:data:`HOST_PROFILER_INFLATION`); beside it the host's traced work in
the steps (union over threads), of it the DataLoader's, the untraced stretches and the allocator's
time. Pure and numpy paths give the same floats.

What it must not do: read files, know rule thresholds, or name a fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_ANNOTATION, K_CPU_OP, K_OTHER, K_RUNTIME, EventTable
from gpudoctor.trace.partition import (
    START,
    bounds,
    clip,
    clip_np,
    gaps_np,
    overlap_np,
    span_minus,
    union_np,
    window_sums,
)
from gpudoctor.trace.timeline import Interval, end_times, intersection_length, merge, total
from gpudoctor.trace.vectorized import column, numpy_for, ordered_sum
from gpudoctor.trace.vectorized import ends as end_column
from gpudoctor.trace.vectorized import merge as merge_np
from gpudoctor.trace.vectorized import total as total_np

if TYPE_CHECKING:
    from gpudoctor.trace.vectorized import Floats

#: A kernel launch that takes longer than this is blocked on a full launch queue (µs).
LAUNCH_BLOCKED_US = 50.0


#: How much longer the host's own work takes while torch.profiler records every op than without it
#: (Kineto's per-op bookkeeping). Measured on the H200 (the impact_calibration.py probe (docs/bench-history.md)): a launch-bound
#: MLP's profiled host time 7.66 ms/step vs 4.31 unprofiled (1.78×), ResNet-50 bf16 channels_last 44.3
#: vs 37.3 (1.19×). The host floor divides the host's active time (DataLoader waits excepted) by this,
#: and the unprofiled step estimate (``step_time_ms``) takes the difference off the profiled step — off
#: its GPU idle outside the input wait, which the host's own speed does not set.
HOST_PROFILER_INFLATION = 1.6


_LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaGraphLaunch", "hipLaunchKernel", "hipExtModuleLaunchKernel")


_HOST_ACTIVE_KINDS = frozenset({K_CPU_OP, K_ANNOTATION, K_RUNTIME, K_OTHER})


_HOST_ACTIVE_MASK = bytes(1 if k in _HOST_ACTIVE_KINDS else 0 for k in range(256))


#: A stretch of the step this long (µs) with no traced op on any host thread is the host's own work
#: (Python between ops, forking DataLoader workers, writing a file) — or its own waiting — not the
#: profiler's bookkeeping, which comes in µs-long slivers between ops (HOST_PROFILER_INFLATION).
UNTRACED_HOST_US = 1000.0


_ALLOCATOR_CALLS = ("cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaHostAlloc")


def host_floor(step_us: float, blocked_us: float, active_us: float, loader_us: float) -> float:
    """The step if the GPU took no time: the host's unblocked work, less what the profiler adds to it."""
    unblocked = max(0.0, step_us - blocked_us)
    own_work = max(0.0, active_us - blocked_us - loader_us)
    return min(unblocked, loader_us + own_work / HOST_PROFILER_INFLATION)



def host_time(t: EventTable, ctx: Context) -> tuple[float, float, tuple[float, float, float]]:
    """Over the steps: µs the host is blocked on the GPU; µs in the allocator; µs of the host's traced
    work, of it in the DataLoader, and of untraced stretches (:func:`_host_active`)."""
    np = numpy_for(t)
    loader = ctx.input_waits(t)
    if np is None:
        blocked, alloc = _host_blocked(t, ctx)
        return blocked, alloc, _host_active(t, ctx, loader)
    step_lo = np.array([a for _, a, _ in ctx.steps], dtype=np.float64)
    step_hi = np.array([b for _, _, b in ctx.steps], dtype=np.float64)
    blocked, alloc = _host_blocked_np(np, t, ctx, step_lo, step_hi)
    return blocked, alloc, _host_active_np(np, t, ctx, step_lo, step_hi, *bounds(np, loader))


def _host_blocked(t: EventTable, ctx: Context) -> tuple[float, float]:
    """µs the host waits for the GPU inside the steps (syncs, launches on a full queue); µs in the allocator."""
    blocked: list[Interval] = [(t.ts[i], t.ts[i] + t.dur[i]) for i in ctx.sync_calls if ctx.in_steps(t.ts[i])]
    alloc = 0.0
    names = t.names
    launch_ids = {i for i, n in enumerate(names) if n in _LAUNCH_CALLS}
    alloc_ids = {i for i, n in enumerate(names) if n in _ALLOCATOR_CALLS}
    if launch_ids or alloc_ids:
        name, ts, dur = t.name, t.ts, t.dur
        for i in ctx.launch_by_corr.values():  # every runtime call with a correlation id
            nid = name[i]
            if nid in launch_ids and dur[i] > LAUNCH_BLOCKED_US and ctx.in_steps(ts[i]):
                blocked.append((ts[i] + LAUNCH_BLOCKED_US, ts[i] + dur[i]))
            elif nid in alloc_ids and ctx.in_steps(ts[i]):
                alloc += dur[i]
    return total(merge(blocked)), alloc


def _host_blocked_np(np: Any, t: EventTable, ctx: Context, step_lo: Floats, step_hi: Floats) -> tuple[float, float]:
    """The numpy path of :func:`_host_blocked` (``step_lo``/``step_hi``: the steps' spans).

    The launches and allocator calls are found by name over the columns, and kept where they are
    :attr:`Context.launch_by_corr`'s calls — runtime calls with a correlation id, the last one of each
    id — told from the columns too (that dict of every runtime call is not made for the few here).
    The allocator's µs are added in event order (the pure loop adds them in the dict's order: the
    same unless two runtime calls share a correlation id).
    """
    blocked: list[Interval] = [(t.ts[i], t.ts[i] + t.dur[i]) for i in ctx.sync_calls if ctx.in_steps(t.ts[i])]
    alloc = 0.0
    names = t.names
    code = np.zeros(len(names), dtype=np.int8)  # 1: a launch, 2: an allocator call
    code[[i for i, n in enumerate(names) if n in _ALLOCATOR_CALLS]] = 2
    code[[i for i, n in enumerate(names) if n in _LAUNCH_CALLS]] = 1
    lows, highs = bounds(np, blocked)
    if code.any():
        ts, dur, corr, kind = column(t, "ts"), column(t, "dur"), column(t, "correlation"), column(t, "kind")
        call = code[column(t, "name")]
        cand = np.flatnonzero(((call == 1) & (dur > LAUNCH_BLOCKED_US)) | (call == 2))
        cand = cand[(kind[cand] == K_RUNTIME) & (corr[cand] >= 0)]
        when = ts[cand]
        k = np.searchsorted(step_lo, when, side="right") - 1
        cand = cand[(k >= 0) & (when <= step_hi[np.maximum(k, 0)])]
        ids, calls = ctx.launch_by_corr_arrays(t)  # kept where launch_by_corr keeps them
        cand = cand[calls[np.searchsorted(ids, corr[cand])] == cand]
        launches = cand[call[cand] == 1]
        lows = np.concatenate((lows, ts[launches] + LAUNCH_BLOCKED_US))
        highs = np.concatenate((highs, ts[launches] + dur[launches]))
        alloc = ordered_sum(dur[cand[call[cand] == 2]])
    return total_np(*merge_np(lows, highs)), alloc


def _host_active(t: EventTable, ctx: Context, loader: Sequence[Interval]) -> tuple[float, float, float]:
    """µs the host's threads run training work inside the steps (union over threads), of it in the
    DataLoader, and µs of stretches of :data:`UNTRACED_HOST_US` or more in which no host thread runs a
    traced op (see ``host_untraced_ms_per_step``)."""
    lo, hi = ctx.steps[0][1], ctx.steps[-1][2]
    # host kinds by a byte table over the kind column (host events carry no stream), less the few
    # ProfilerStep events themselves (found by name): the columns are then selected by C-level passes
    host = bytearray(t.kind.translate(_HOST_ACTIVE_MASK))
    for i in t.positions_of([nid for nid, n in enumerate(t.names) if n.startswith("ProfilerStep")]):
        host[i] = 0
    merged = _union_of_runs(compress(t.ts, host), compress(end_times(t), host), lo, hi)
    inside = in_loader = untraced = 0.0
    for _, a, b in ctx.steps:
        step_merged = clip(merged, a, b)
        inside += total(step_merged)
        in_loader += intersection_length(step_merged, clip(loader, a, b))
        untraced += sum(gap for gap in (high - low for low, high in span_minus(a, b, step_merged))
                        if gap >= UNTRACED_HOST_US)
    return inside, in_loader, untraced


def _host_active_np(np: Any, t: EventTable, ctx: Context, step_lo: Floats, step_hi: Floats,
                    loader_lo: Floats, loader_hi: Floats) -> tuple[float, float, float]:
    """The numpy path of :func:`_host_active` (``step_lo``/``step_hi``: the steps' spans, the loader's
    merged spans as arrays)."""
    lo, hi = ctx.steps[0][1], ctx.steps[-1][2]
    ts = column(t, "ts")
    not_step = np.ones(len(t.names), dtype=bool)  # (a table over the names: a profile has ~1 k ProfilerStep#N)
    not_step[[nid for nid, n in enumerate(t.names) if n.startswith("ProfilerStep")]] = False
    host = np.frombuffer(_HOST_ACTIVE_MASK, dtype=np.uint8).view(bool)[column(t, "kind")]
    host &= not_step[column(t, "name")]
    host &= ts >= lo
    host &= ts <= hi
    merged_lo, merged_hi = union_np(np, ts[host], end_column(t)[host])
    piece_lo, piece_hi, counts = clip_np(np, merged_lo, merged_hi, step_lo, step_hi)
    in_loader = overlap_np(np, piece_lo, piece_hi, counts, loader_lo, loader_hi)
    gap_lo, gap_hi, gap_counts = gaps_np(np, piece_lo, piece_hi, counts, step_lo, step_hi)
    gaps = gap_hi - gap_lo
    untraced = window_sums(np, np.where(gaps >= UNTRACED_HOST_US, gaps, 0.0), gap_counts)
    return (ordered_sum(window_sums(np, piece_hi - piece_lo, counts)), ordered_sum(in_loader),
            ordered_sum(untraced))


def _union_of_runs(starts: Iterable[float], ends: Iterable[float], lo: float, hi: float) -> list[Interval]:
    """:func:`merge` of the intervals that start in [lo, hi] (none inverted).

    Host events come nearly in time order (a few descents where Kineto's per-thread blocks meet), so
    the intervals are merged as they are read, with no tuple per event and no sort: one that starts
    inside the open group extends it, one after it opens the next group, and one before the group's
    start begins a new run, whose pieces are merged once more at the end (the union's connected
    pieces are the same whatever the order they were found in, end points included).
    """
    inf = float("inf")
    out: list[Interval] = []
    group_start = running = -inf
    runs = False
    for a, b in zip(starts, ends):
        if a < lo or a > hi:
            continue
        if a > running:  # after the open group: the next one (the first piece, -inf to -inf, is dropped)
            out.append((group_start, running))
            group_start, running = a, b
        elif a >= group_start:  # inside the open group
            if b > running:
                running = b
        else:  # before the open group's start: a new ascending run
            out.append((group_start, running))
            group_start, running = a, b
            runs = True
    if not out:
        return out
    out.append((group_start, running))
    del out[0]
    if not runs:
        return out
    # The runs' pieces merged once more: none is inverted, so pieces that start together may come in
    # any order (sorted by start alone, with a C-level key) and one running end does (no HTA rounding).
    out.sort(key=START)
    merged: list[Interval] = []
    group_start, running = out[0]
    for a, b in out:
        if a > running:
            merged.append((group_start, running))
            group_start, running = a, b
        elif b > running:
            running = b
    merged.append((group_start, running))
    return merged

