"""The step picture: one rank's profiled steps split into GPU busy by kernel class and GPU idle by host activity.

Why this exists: what bounds a step, and what a fix can gain, is read off these parts, which add up
to the step (the list and the rules are :mod:`.bottleneck`'s docstring). Here the parts are computed
as *unions of spans* inside the steps' wall time — where streams overlap, the first class wins
(communication, then GEMM/conv, then fusible, memcpy, other) — and, beside them, the GEMM/conv time by
precision class, a *duration sum* from the GPU-time table (:mod:`.gputime`). The interval primitives
both paths use live here too (pure lists and numpy arrays, with the same float additions).

What it must not do: read files, know rule thresholds, name a fact, or look at the host's own work
(that is :mod:`.hostfloor`'s).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Sequence
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

from gpudoctor.bottleneck import PARTS
from gpudoctor.trace import kernels as kn
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_MEMCPY, K_MEMSET, EventTable
from gpudoctor.trace.gputime import WINDOW, WINDOW_LAUNCHED, gpu_time
from gpudoctor.trace.timeline import (
    Interval,
    end_times,
    intersection_length,
    merge,
    subtract,
    sync_idle,
    total,
)
from gpudoctor.trace.vectorized import column, numpy_for, ordered_sum
from gpudoctor.trace.vectorized import ends as end_column

if TYPE_CHECKING:
    from gpudoctor.trace.vectorized import Floats, Ints


_GEMM_KEYS = ("gemm", "gemm_fp32_simt", "gemm_tf32", "gemm_lowp", "matmul_fp32_simt", "conv_fp32_simt",
              "attention_fp32_simt", "gemm_unknown_matmul", "gemm_unknown_conv", "gemm_lowp_unaligned")


#: The GPU classes in priority order (where streams overlap the first one wins).
_CLASS_ORDER = ("gpu:communication", "gpu:gemm/conv", "gpu:fusible", "gpu:memcpy", "gpu:other")


def _gpu_class(kind: int, info: kn.KernelClass) -> str:
    """The step-picture class of a device event of this kind and name."""
    if kind in (K_MEMCPY, K_MEMSET):
        return "gpu:memcpy"
    if info.communication:
        return "gpu:communication"
    if info.precision is not None:
        return "gpu:gemm/conv"
    if info.fusion is not None:
        return "gpu:fusible"
    return "gpu:other"


#: The GPU work launched in a window's steps ends this many times the steps' own (host) length after the
#: first of it starts: the loop had queued far ahead of the GPU, and its steps are the GPU's.
GPU_PACED_RATIO = 1.5


def gpu_paced_steps(t: EventTable, ctx: Context) -> list[tuple[int, float, float]] | None:
    """The steps as the GPU ran them, when it ran far behind the host; else None.

    A GPU-bound loop queues steps ahead of the GPU. When a profile window starts, the queue drains and
    the window's steps are enqueued in a few ms each, their kernels running long after:
    examples/tf32_off.py on the H200 had 3 ms ``ProfilerStep`` spans and 43 ms of kernels per step,
    run from 36 to 253 ms after the first step began. Clipped to the host's spans, the step picture
    saw 2.6 ms of GEMMs per 3 ms step; GD201/GD202 said 1.82× for a fix measured at 4.6–5.3×.

    Each step here runs on the GPU from the end of the previous step's last kernel (the first step:
    from its own first kernel) to the end of its own last kernel, by the launches inside the steps
    (:meth:`Context.device_steps`). A step that launched nothing gets no GPU time.
    """
    n = ctx.n_steps
    np = ctx.np
    if np is not None:
        step = ctx.device_step_array(t)
        inside = step >= 0
        if not inside.any():
            return None
        dev = ctx.device_array(t)[inside]
        ts = column(t, "ts")[dev]
        ends = ts + column(t, "dur")[dev]
        first = float(ts.min())
        last = np.full(n, -np.inf)
        np.maximum.at(last, step[inside], ends)
        step_end = last.tolist()
    else:
        launched = ctx.device_steps(t)
        if not launched:
            return None
        ts, dur = t.ts, t.dur
        first = min(ts[i] for i in launched)
        step_end = [-float("inf")] * n
        for i, k in launched.items():
            e = ts[i] + dur[i]
            if e > step_end[k]:
                step_end[k] = e
    host_us = sum(b - a for _, a, b in ctx.steps)
    if max(step_end) - first <= GPU_PACED_RATIO * host_us:
        return None
    out: list[tuple[int, float, float]] = []
    at = first
    for (sid, _, _), end in zip(ctx.steps, step_end):
        end = max(end, at)
        out.append((sid, at, end))
        at = end
    return out


def partition(t: EventTable, ctx: Context) -> tuple[dict[str, float], dict[str, float]]:
    """µs per part over all steps (:data:`~gpudoctor.bottleneck.PARTS`); GEMM/conv µs by class (:func:`_add_gemm`)."""
    np = numpy_for(t)
    if np is not None:
        return _partition_np(np, t, ctx)
    parts = dict.fromkeys(PARTS, 0.0)
    lo, hi = ctx.steps[0][1], ctx.steps[-1][2]
    ts, end = t.ts, end_times(t)
    # The device events with a positive length that overlap the steps, selected by C-level passes.
    dev = ctx.device
    starts = list(map(ts.__getitem__, dev))
    ends = list(map(end.__getitem__, dev))
    keep = [b > a and b > lo and a < hi for a, b in zip(starts, ends)]
    sel = list(compress(dev, keep))
    spans = list(compress(zip(starts, ends), keep))
    # One class per (kind, name id), not one name classification per event.
    keys = list(zip(map(t.kind.__getitem__, sel), map(t.name.__getitem__, sel)))
    kernel_classes = ctx.kernel_classes(t)
    order = _CLASS_ORDER
    class_of = {key: order.index(_gpu_class(key[0], kernel_classes[key[1]])) for key in dict.fromkeys(keys)}
    by_class: list[list[Interval]] = [[] for _ in order]  # each class's spans, in event order: one pass
    for key, span in zip(keys, spans):
        by_class[class_of[key]].append(span)
    merged = {cls: merge(spans) for cls, spans in zip(order, by_class)}
    gemm_us = _gemm_us(t, ctx)
    busy, covered = _first_class_wins([merged[cls] for cls in order])
    busy_by_class = dict(zip(order, busy))
    covered_starts = [a for a, _ in covered]
    loader = ctx.input_waits(t)
    after_sync = sync_idle(ctx.sync_waits(t), covered_starts, until=hi)
    for _, a, b in ctx.steps:
        for cls in order:
            parts[cls] += total(clip(busy_by_class[cls], a, b))
        idle = span_minus(a, b, clip(covered, a, b))
        step_loader = clip(loader, a, b)
        input_idle = intersection_length(idle, step_loader)
        rest = subtract(idle, step_loader) if step_loader else idle
        sync_us = intersection_length(rest, clip(after_sync, a, b))
        parts["idle:input wait"] += input_idle
        parts["idle:host sync"] += sync_us
        parts["idle:host/launch"] += total(idle) - input_idle - sync_us
    return parts, gemm_us


def _partition_np(np: Any, t: EventTable, ctx: Context) -> tuple[dict[str, float], dict[str, float]]:
    """The numpy path of :func:`partition`: the same parts, every per-event and per-piece pass over arrays.

    Each per-step sum adds the same floats in the same order as the pure loop (:func:`window_sums`),
    so the parts come out bit-identical; only the few sync calls and DataLoader ops stay Python lists.
    The step picture of the 1.1 GB synthetic trace (434 k device events, 2.2 M host events, 1136
    steps): 1.15 CPU-s pure, 0.13 s here.
    """
    parts = dict.fromkeys(PARTS, 0.0)
    steps = ctx.steps
    lo, hi = steps[0][1], steps[-1][2]
    step_lo = np.array([a for _, a, _ in steps], dtype=np.float64)
    step_hi = np.array([b for _, _, b in steps], dtype=np.float64)
    ts, end, kind, name = column(t, "ts"), end_column(t), column(t, "kind"), column(t, "name")
    # The device events with a positive length that overlap the steps.
    dev = ctx.device_array(t)
    starts, stops = ts[dev], end[dev]
    keep = (stops > starts) & (stops > lo) & (starts < hi)
    sel, starts, stops = dev[keep], starts[keep], stops[keep]
    # One class per (kind, name id): a look-up table with a row per device kind present.
    kernel_classes = ctx.kernel_classes(t)
    sel_kind = kind[sel]
    kinds = np.flatnonzero(np.bincount(sel_kind, minlength=256)).tolist()
    table = np.zeros((max(len(kinds), 1), len(t.names)), dtype=np.int8)
    for row, k in enumerate(kinds):
        for nid, info in kernel_classes.items():
            table[row, nid] = _CLASS_ORDER.index(_gpu_class(k, info))
    row_of = np.zeros(256, dtype=np.intp)
    row_of[kinds] = np.arange(len(kinds))
    cls = table[row_of[sel_kind], name[sel]]
    gemm_us = _gemm_us(t, ctx)
    own, (covered_lo, covered_hi) = _first_class_wins_np(np, starts, stops, cls, len(_CLASS_ORDER))
    loader = ctx.input_waits(t)
    waits = ctx.sync_waits(t)
    # sync_idle needs of the busy starts only the first one at or after each sync's end: those few.
    at = np.searchsorted(covered_lo, np.array([b for _, b in waits], dtype=np.float64), side="left")
    nexts = sorted(set(covered_lo[at[at < len(covered_lo)]].tolist()))
    after_sync = sync_idle(waits, nexts, until=hi)
    loader_lo, loader_hi = bounds(np, loader)
    sync_lo, sync_hi = bounds(np, after_sync)
    for cls_name, (own_lo, own_hi) in zip(_CLASS_ORDER, own):
        piece_lo, piece_hi, counts = clip_np(np, own_lo, own_hi, step_lo, step_hi)
        parts[cls_name] = ordered_sum(window_sums(np, piece_hi - piece_lo, counts))
    # GPU idle per step: the gaps between the covered pieces, less the DataLoader's, less the syncs'
    idle_lo, idle_hi, idle_counts = gaps_np(np, *clip_np(np, covered_lo, covered_hi, step_lo, step_hi),
                                             step_lo, step_hi)
    idle = window_sums(np, idle_hi - idle_lo, idle_counts)
    input_idle = overlap_np(np, idle_lo, idle_hi, idle_counts, loader_lo, loader_hi)
    if len(loader_lo):
        rest_lo, rest_hi, per_gap = gaps_np(np, *clip_np(np, loader_lo, loader_hi, idle_lo, idle_hi),
                                             idle_lo, idle_hi)
        rest_counts = _regroup(np, per_gap, idle_counts)
    else:
        rest_lo, rest_hi, rest_counts = idle_lo, idle_hi, idle_counts
    sync_us = overlap_np(np, rest_lo, rest_hi, rest_counts, sync_lo, sync_hi)
    parts["idle:input wait"] = ordered_sum(input_idle)
    parts["idle:host sync"] = ordered_sum(sync_us)
    parts["idle:host/launch"] = ordered_sum(idle - input_idle - sync_us)
    return parts, gemm_us


def _launched_or_window(launched: dict[str, float], in_window: dict[str, float]) -> dict[str, float]:
    """GEMM µs by class of the kernels launched inside the steps — or, when those are less than half of
    the GEMM time the steps' window holds, of every GEMM kernel in the window.

    A GPU-bound loop queues many steps ahead: on examples/tf32_off.py (H200, 3 ms steps) every GEMM
    that ran in the 5-step window had been launched before the profiler started, so none counted,
    the classes came out 0 ms, GD201 estimated 1.00× for a 5× fix and GD202's trace block judged
    TF32 clean — and withdrew the live GD202. The window's kernels are the same model's.
    """
    return launched if launched["gemm"] >= 0.5 * in_window["gemm"] else in_window


def _gemm_us(t: EventTable, ctx: Context) -> dict[str, float]:
    """GEMM/conv µs by class (:func:`_add_gemm`) from the GPU-time table: of the kernels in the steps'
    window launched inside the steps, or of all in the window (:func:`_launched_or_window`)."""
    table = gpu_time(t, ctx)
    sums = []
    for scope in (WINDOW_LAUNCHED, WINDOW):
        acc = dict.fromkeys(_GEMM_KEYS, 0.0)
        for (kind, nid), us in table.rows(scope).items():
            info = table.classes[nid]
            if _gpu_class(kind, info) == "gpu:gemm/conv":
                _add_gemm(acc, info, us)
        sums.append(acc)
    return _launched_or_window(*sums)


def _add_gemm(acc: dict[str, float], info: kn.KernelClass, dur: float) -> None:
    """``dur`` µs of a GEMM/conv kernel of class ``info`` added to each of its classes' sums."""
    precision, is_conv, is_attention, unaligned = info.precision, info.convolution, info.fp32_attention, info.unaligned_lowp
    acc["gemm"] += dur
    if precision == kn.FP32_SIMT:
        acc["gemm_fp32_simt"] += dur
        acc["conv_fp32_simt" if is_conv else "matmul_fp32_simt"] += dur
        if is_attention:   # part of the matmuls: TF32 does not change it, bf16 swaps it for flash attention
            acc["attention_fp32_simt"] += dur
    elif precision == kn.TF32:
        acc["gemm_tf32"] += dur
    elif precision == kn.LOW_PRECISION:
        acc["gemm_lowp"] += dur
        if unaligned:
            acc["gemm_lowp_unaligned"] += dur
    else:
        acc["gemm_unknown_conv" if is_conv else "gemm_unknown_matmul"] += dur


START = operator.itemgetter(0)


END = operator.itemgetter(1)


def clip(intervals: Sequence[Interval], lo: float, hi: float) -> list[Interval]:
    """``intervals`` (merged and sorted, so their ends ascend) clipped to [lo, hi].

    Two bisections find the pieces that overlap; only the first and the last can stick out (the
    others lie between them), so only those two are clipped.
    """
    first = bisect.bisect_right(intervals, lo, key=END)
    last = bisect.bisect_left(intervals, hi, first, key=START)
    out = list(intervals[first:last])
    if out:
        a, b = out[0]
        if a < lo:
            out[0] = (a, b) = (lo, b)
        if b > hi:
            out[0] = (a, hi)
        a, b = out[-1]
        if b > hi:
            out[-1] = (a, hi)
    return out


def span_minus(a: float, b: float, cut: Sequence[Interval]) -> list[Interval]:
    """``[(a, b)]`` minus ``cut`` (merged, sorted, clipped to [a, b]): the gaps between the cut's pieces.

    The same as ``subtract([(a, b)], cut)`` (merged pieces are separated by gaps of positive length),
    without its per-piece bookkeeping.
    """
    lows = [a, *map(END, cut)]
    highs = [*map(START, cut), b]
    return [(low, high) for low, high in zip(lows, highs) if low < high]


def _first_class_wins(classes: Sequence[Sequence[Interval]]) -> tuple[list[list[Interval]], list[Interval]]:
    """Each class's own time where classes overlap (the first one wins), and the union of all of them.

    ``classes``: merged, sorted interval lists in priority order. Class k's own time is its intervals
    minus those of classes 0…k-1, as maximal pieces (what subtracting the union of the earlier
    classes from it gives); the union is :func:`merge` of everything. One sweep over the sorted edges
    (each class is 0 or 1 deep, its intervals being merged) instead of one subtraction and one
    re-merge of the growing union per class; every end point is an input end point, unchanged. A
    piece is written only where the winning class changes (not one per edge), and the edges are
    sorted by position alone: the order of the edges at one position does not matter, all of them
    are applied before the next position is looked at.
    """
    edges: list[tuple[float, int]] = []
    for k, spans in enumerate(classes):  # (edge, class bit) pairs made by C-level iterators, not a nested comprehension
        edges += zip(chain.from_iterable(spans), repeat(1 << k))
    edges.sort(key=START)
    own: list[list[Interval]] = [[] for _ in classes]
    union: list[Interval] = []
    if not edges:
        return own, union
    winner_of = [(mask & -mask).bit_length() - 1 for mask in range(1 << len(classes))]  # lowest set bit; -1 for 0
    active = 0  # bit k: class k is inside one of its intervals
    owner = -1  # the class whose piece is open (-1: none), since owner_from
    owner_from = union_from = 0.0
    at = edges[0][0]
    for x, bit in edges:
        if x != at:  # every edge at ``at`` is applied: ``active`` holds on [at, x)
            winner = winner_of[active]
            if winner != owner:
                if owner >= 0:
                    own[owner].append((owner_from, at))
                else:
                    union_from = at
                if winner < 0:
                    union.append((union_from, at))
                owner, owner_from = winner, at
            at = x
        active ^= bit
    if owner >= 0:  # the last position closes every interval (each toggles its bit twice)
        own[owner].append((owner_from, at))
        union.append((union_from, at))
    return own, union


def _first_class_wins_np(np: Any, starts: Floats, ends: Floats, cls: Ints,
                         n_classes: int) -> tuple[list[tuple[Floats, Floats]], tuple[Floats, Floats]]:
    """The numpy path of :func:`_first_class_wins`, from each interval's class (``cls``).

    Each class's intervals are merged first; its merged pieces are then 0 or 1 deep with gaps of
    positive length between them, so after all the edges at one position the running sum of the
    edges' signed class bits is the set of classes open there, as the pure sweep's XOR gives it.
    The winner changes where its pieces start and end; those positions are input end points.
    """
    empty = starts[:0]
    # by start (stable: fast on nearly sorted starts), then by class (stable again): each class's
    # intervals one slice, sorted by start
    order = np.argsort(starts, kind="stable")
    order = order[np.argsort(cls[order], kind="stable")]
    bounds = np.searchsorted(cls[order], np.arange(n_classes + 1)).tolist()
    s, e = starts[order], ends[order]
    merged = [union_np(np, s[a:b], e[a:b], ordered=True) for a, b in zip(bounds, bounds[1:])]
    pos = np.concatenate([edge for pair in merged for edge in pair])
    if not len(pos):
        return [(empty, empty) for _ in range(n_classes)], (empty, empty)
    bits = np.concatenate([np.full(len(lows), sign << k, dtype=np.int64)
                           for k, (lows, _) in enumerate(merged) for sign in (1, -1)])
    order = np.argsort(pos, kind="stable")
    pos = pos[order]
    last = np.empty(len(pos), dtype=bool)  # the last edge at each position
    np.not_equal(pos[1:], pos[:-1], out=last[:-1])
    last[-1] = True
    active = np.cumsum(bits[order])[last]
    at = pos[last]
    lowest = np.array([(m & -m).bit_length() - 1 for m in range(1 << n_classes)], dtype=np.int64)
    winner = lowest[active]  # the class that owns [at[i], at[i + 1]); -1: none (the last one is -1)
    before = np.concatenate(([-1], winner[:-1]))
    change = np.flatnonzero(winner != before)
    owner, piece_lo, piece_hi = winner[change[:-1]], at[change[:-1]], at[change[1:]]
    own = [(piece_lo[owner == k], piece_hi[owner == k]) for k in range(n_classes)]
    busy, was_busy = winner >= 0, before >= 0
    union = (at[busy & ~was_busy], at[~busy & was_busy])
    return own, union


def bounds(np: Any, intervals: Sequence[Interval]) -> tuple[Floats, Floats]:
    """A short interval list as two arrays, starts and ends."""
    if not intervals:
        return np.zeros(0), np.zeros(0)
    lows, highs = zip(*intervals)
    return np.array(lows, dtype=np.float64), np.array(highs, dtype=np.float64)


def _ranges(np: Any, first: Ints, counts: Ints) -> Ints:
    """``first[j], first[j] + 1, … (counts[j] of them)`` for every j, one after the other."""
    n = int(counts.sum())
    if not n:
        return np.zeros(0, dtype=np.intp)
    return np.repeat(first - (np.cumsum(counts) - counts), counts) + np.arange(n)


def clip_np(np: Any, starts: Floats, ends: Floats, lo: Floats, hi: Floats) -> tuple[Floats, Floats, Ints]:
    """:func:`clip` of one merged, sorted interval list to many windows [lo[j], hi[j]].

    The clipped pieces of every window one after the other (starts, ends), and how many each window has.
    Clipping every piece gives the same floats as clipping the first and the last only: the others lie
    inside the window.
    """
    first = np.searchsorted(ends, lo, side="right")
    counts = np.maximum(np.searchsorted(starts, hi, side="left"), first) - first
    idx = _ranges(np, first, counts)
    window = np.repeat(np.arange(len(lo)), counts)
    return np.maximum(starts[idx], lo[window]), np.minimum(ends[idx], hi[window]), counts


def gaps_np(np: Any, starts: Floats, ends: Floats, counts: Ints, lo: Floats, hi: Floats) -> tuple[Floats, Floats, Ints]:
    """:func:`span_minus` of many windows: each window [lo[j], hi[j]] minus its clipped pieces
    (``counts[j]`` of ``starts``/``ends``, from :func:`clip_np`): the gaps one after the other, and
    how many each window has.

    Also :func:`~gpudoctor.trace.timeline.subtract` of windows that are merged, sorted, disjoint pieces themselves (its output
    for one base piece is that piece minus the cut's pieces that overlap it).
    """
    sizes = counts + 1
    n = int(sizes.sum())
    heads = np.cumsum(sizes) - sizes
    tails = heads + counts
    lows, highs = np.empty(n), np.empty(n)
    inner = np.ones(n, dtype=bool)
    inner[heads] = False
    lows[heads] = lo
    lows[inner] = ends
    inner[heads] = True
    inner[tails] = False
    highs[tails] = hi
    highs[inner] = starts
    keep = lows < highs
    kept = np.concatenate(([0], np.cumsum(keep)))
    return lows[keep], highs[keep], kept[heads + sizes] - kept[heads]


def _regroup(np: Any, inner_counts: Ints, outer_counts: Ints) -> Ints:
    """Counts per outer window, from counts per inner window (``outer_counts[j]`` inner ones each)."""
    at = np.concatenate(([0], np.cumsum(inner_counts)))
    bounds = np.concatenate(([0], np.cumsum(outer_counts)))
    return at[bounds[1:]] - at[bounds[:-1]]


def overlap_np(np: Any, starts: Floats, ends: Floats, counts: Ints, other_lo: Floats, other_hi: Floats) -> Floats:
    """:func:`.timeline.intersection_length` per window: of each window's pieces (``counts[j]`` of
    ``starts``/``ends``, sorted) with a merged, sorted interval list, the positive overlaps added in
    the order the two-pointer walk meets them (by piece, then by interval)."""
    if not len(other_lo) or not len(starts):
        return np.zeros(len(counts))
    first = np.searchsorted(other_hi, starts, side="right")
    pairs = np.maximum(np.searchsorted(other_lo, ends, side="left") - first, 0)
    piece = np.repeat(np.arange(len(starts)), pairs)
    other = _ranges(np, first, pairs)
    overlap = np.minimum(ends[piece], other_hi[other]) - np.maximum(starts[piece], other_lo[other])
    np.maximum(overlap, 0.0, out=overlap)  # a non-positive overlap is not added; 0.0 adds nothing
    return window_sums(np, overlap, _regroup(np, pairs, counts))


def window_sums(np: Any, values: Floats, counts: Ints) -> Floats:
    """Per window (``counts[j]`` consecutive ``values`` each), its values added left to right, as
    ``sum()`` of a list adds them (numpy's ``sum`` adds pairwise; its ``cumsum`` does not).

    The windows become the columns of a zero-padded grid whose rows are then accumulated: one
    sequential addition per grid cell, the padding adding 0.0 (nothing). A grid far larger than the
    values (one window much longer than the others) is left for one cumulative sum per window.
    """
    n = len(counts)
    width = int(counts.max()) if n else 0
    if not width:
        return np.zeros(n)
    heads = np.cumsum(counts) - counts
    if width * n > 4 * len(values) + (1 << 20):
        return np.array([float(np.cumsum(values[a:a + c])[-1]) if c else 0.0
                         for a, c in zip(heads.tolist(), counts.tolist())])
    grid = np.zeros((width, n))
    window = np.repeat(np.arange(n), counts)
    grid[np.arange(len(values)) - heads[window], window] = values
    out: Floats = np.cumsum(grid, axis=0)[-1]
    return out


def union_np(np: Any, starts: Floats, ends: Floats, ordered: bool = False) -> tuple[Floats, Floats]:
    """:func:`merge` of intervals none of which is inverted, as arrays (``ordered``: sorted by start already).

    Sorted by start alone (a stable sort, fast on nearly sorted starts): with no inverted interval
    the order of the intervals that start together changes neither where a group starts nor its end
    (the largest end in it).
    """
    if not len(starts):
        return starts, ends
    if ordered:
        s, e = starts, ends
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], np.maximum.accumulate(e)[:-1], out=new[1:])
    firsts = np.flatnonzero(new)
    return s[firsts], np.maximum.reduceat(e, firsts)

