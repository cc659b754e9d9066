"""Where one rank's step goes, and what bounds it: the bottleneck verdict and the impact facts.

Why this exists: a finding is worth what its fix gains, and that depends on what bounds the step.
Every profiled step's wall time (its host ``ProfilerStep`` span) is split into parts that add up to
the step:

- GPU busy, by kernel class (first class wins where streams overlap): ``gpu:communication``,
  ``gpu:gemm/conv``, ``gpu:fusible`` (eager memory-bound kernels torch.compile fuses),
  ``gpu:memcpy``, ``gpu:other``;
- GPU idle, by what the host was doing: ``idle:input wait`` (inside the DataLoader's ``__next__``),
  ``idle:host sync`` (from the end of a sync call — ``.item()``, ``synchronize``, a sync copy — toward
  the next GPU work: the queue the sync drained, refilled — for at most 1 ms, or the host's wait in
  the sync when longer: :func:`~gpudoctor.trace.timeline.sync_idle`), ``idle:host/launch`` (the rest:
  Python, launches, anything else on the host).

From the same timeline come the facts the impact estimates need: ``gpu_busy_ms_per_step`` (the floor
for a fix that shortens host work) and ``host_floor_ms`` — the step minus the time the host spends
blocked waiting for the GPU (in sync calls, and in kernel launches once the launch queue is full) —
the floor for a fix that shortens GPU work.

What it must not do: read files, know rule thresholds, or render anything.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Sequence
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

from gpudoctor.bottleneck import PARTS, Bottleneck, verdict_from_parts
from gpudoctor.catalog.throughput import ratios_for
from gpudoctor.trace import kernels as kn
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_ANNOTATION, K_CPU_OP, K_MEMCPY, K_MEMSET, K_OTHER, K_RUNTIME, EventTable
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
from gpudoctor.trace.vectorized import merge as merge_np
from gpudoctor.trace.vectorized import total as total_np

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue
    from gpudoctor.trace.vectorized import Floats, Ints

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


def _clip(intervals: Sequence[Interval], lo: float, hi: float) -> list[Interval]:
    """``intervals`` (merged and sorted, so their ends ascend) clipped to [lo, hi].

    Two bisections find the pieces that overlap; only the first and the last can stick out (the
    others lie between them), so only those two are clipped.
    """
    first = bisect.bisect_right(intervals, lo, key=_END)
    last = bisect.bisect_left(intervals, hi, first, key=_START)
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


_START = operator.itemgetter(0)
_END = operator.itemgetter(1)


def bottleneck_metrics(t: EventTable, ctx: Context, compute_major: int | None = None,
                       device_name: str | None = None) -> dict[str, FactValue]:
    """Impact facts and the step-part shares of one rank (empty without steps and GPU work)."""
    out: dict[str, FactValue] = {}
    out.update({k: v for k, v in ratios_for(compute_major, device_name).items()})
    if not ctx.steps or not ctx.device:
        return out
    parts, blocked_us, alloc_us, gemm_us, (active_us, loader_us, untraced_us) = _partition(t, ctx)
    n = ctx.n_steps
    host_step_us = step_us = sum(b - a for _, a, b in ctx.steps)
    paced = gpu_paced_steps(t, ctx)
    if paced is not None:  # the GPU's side of the picture from the GPU's own steps; the host's stays
        parts, _, _, gemm_us, _ = _partition(t, Context(t, paced))
        step_us = sum(b - a for _, a, b in paced)
        out["gpu_paced_steps"] = True
        out["gpu_behind_host_ms"] = round((paced[-1][2] - ctx.steps[-1][2]) / 1000.0, 3)
    if not step_us > 0:  # no time to share out (plausible_steps leaves no zero-length host step)
        return out
    step_ms = step_us / 1000.0 / n
    gpu_busy = sum(v for k, v in parts.items() if k.startswith("gpu:")) / 1000.0 / n
    own_host_us = max(0.0, active_us - loader_us)
    # Kineto's bookkeeping slows the host, so it can lengthen only the GPU idle the host causes — not
    # the wait for DataLoader workers, which it does not trace (a bursty loader's 50 ms/step of input
    # idle on pytorch/examples ImageNet was taken off the step, and GD102 estimated 1.13x for 1.46x).
    input_idle_us = parts["idle:input wait"]
    unprofiled_us = max(gpu_busy * 1000.0 * n + input_idle_us,
                        step_us - own_host_us * (1.0 - 1.0 / HOST_PROFILER_INFLATION))
    out.update({
        "step_time_ms": round(unprofiled_us / 1000.0 / n, 3),
        "gpu_busy_ms_per_step": round(gpu_busy, 3),
        "gpu_idle_ms_per_step": round(step_ms - gpu_busy, 3),
        "host_floor_ms": round(_host_floor(host_step_us, blocked_us, active_us, loader_us) / 1000.0 / n, 3),
        "host_active_ms_per_step": round(active_us / 1000.0 / n, 3),
        "host_untraced_ms_per_step": round(untraced_us / 1000.0 / n, 3),
        "sync_gpu_idle_ms_per_step": round(parts["idle:host sync"] / 1000.0 / n, 3),
        "input_gpu_idle_ms_per_step": round(parts["idle:input wait"] / 1000.0 / n, 3),
        "allocator_ms_per_step": round(alloc_us / 1000.0 / n, 3),
    })
    classes = _gemm_classes(gemm_us, parts["gpu:gemm/conv"])
    for cls, us in classes.items():
        out[f"{cls}_ms_per_step"] = round(us / 1000.0 / n, 3)
    if gpu_busy > 0:
        out["matmul_fp32_simt_pct_of_gpu"] = round(100.0 * classes["matmul_fp32_simt"] / 1000.0 / n / gpu_busy, 2)
        out["fp32_simt_pct_of_gpu"] = round(100.0 * classes["gemm_fp32_simt"] / 1000.0 / n / gpu_busy, 2)
        out["gemm_lowp_unaligned_pct_of_gpu"] = round(100.0 * classes["gemm_lowp_unaligned"] / 1000.0 / n / gpu_busy, 2)
    out["sync_gpu_idle_pct"] = round(100.0 * parts["idle:host sync"] / step_us, 2) if step_us > 0 else 0.0
    for name in PARTS:
        out["part_" + _slug(name) + "_ms"] = round(parts[name] / 1000.0 / n, 3)
    verdict = verdict_from_parts({p: parts[p] / 1000.0 / n for p in PARTS}, step_ms,
                                 allocator_ms=alloc_us / 1000.0 / n)
    out["bound"] = verdict.bound
    out["bound_share_pct"] = verdict.share_pct
    return out


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


def _host_floor(step_us: float, blocked_us: float, active_us: float, loader_us: float) -> float:
    """The step if the GPU took no time: the host's unblocked work, less what the profiler adds to it."""
    unblocked = max(0.0, step_us - blocked_us)
    own_work = max(0.0, active_us - blocked_us - loader_us)
    return min(unblocked, loader_us + own_work / HOST_PROFILER_INFLATION)


def _slug(part: str) -> str:
    return part.replace(":", "_").replace("/", "_").replace(" ", "_")


def parts_from_facts(values: dict[str, Any]) -> dict[str, float]:
    """The step parts (ms per step) back from a rank's facts."""
    return {p: float(values.get("part_" + _slug(p) + "_ms") or 0.0) for p in PARTS}


_GEMM_KEYS = ("gemm", "gemm_fp32_simt", "gemm_tf32", "gemm_lowp", "matmul_fp32_simt", "conv_fp32_simt",
              "attention_fp32_simt", "gemm_unknown_matmul", "gemm_unknown_conv", "gemm_lowp_unaligned")
#: The GPU classes in priority order (where streams overlap the first one wins).
_CLASS_ORDER = ("gpu:communication", "gpu:gemm/conv", "gpu:fusible", "gpu:memcpy", "gpu:other")


def _partition(t: EventTable, ctx: Context) -> tuple[dict[str, float], float, float, dict[str, float],
                                                    tuple[float, float, float]]:
    """µs per part over all steps; µs the host is blocked on the GPU; µs in the allocator; GEMM µs by class."""
    np = numpy_for(t)
    if np is not None:
        return _partition_np(np, t, ctx)
    parts = dict.fromkeys(PARTS, 0.0)
    gemm_us = dict.fromkeys(_GEMM_KEYS, 0.0)
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
    gemm_events: list[int] = []
    for key, i, span in zip(keys, sel, spans):
        k = class_of[key]
        by_class[k].append(span)
        if k == 1:  # gpu:gemm/conv
            gemm_events.append(i)
    merged = {cls: merge(spans) for cls, spans in zip(order, by_class)}
    launched_in_step = ctx.device_steps(t)
    gemm_kind: dict[int, tuple[str | None, bool, bool, bool]] = {}
    names, name, dur = t.names, t.name, t.dur
    in_window = dict.fromkeys(_GEMM_KEYS, 0.0)
    for i in gemm_events:
        nid = name[i]
        if nid not in gemm_kind:
            gemm_kind[nid] = _gemm_kind(names[nid])
        _add_gemm(in_window, gemm_kind[nid], dur[i])
        if i in launched_in_step:
            _add_gemm(gemm_us, gemm_kind[nid], dur[i])
    gemm_us = _launched_or_window(gemm_us, in_window)
    busy, covered = _first_class_wins([merged[cls] for cls in order])
    busy_by_class = dict(zip(order, busy))
    covered_starts = [a for a, _ in covered]
    loader = ctx.input_waits(t)
    after_sync = sync_idle(ctx.sync_waits(t), covered_starts, until=hi)
    blocked, alloc = _host_blocked(t, ctx)
    active = _host_active(t, ctx, loader)
    for _, a, b in ctx.steps:
        for cls in order:
            parts[cls] += total(_clip(busy_by_class[cls], a, b))
        idle = _span_minus(a, b, _clip(covered, a, b))
        step_loader = _clip(loader, a, b)
        input_idle = intersection_length(idle, step_loader)
        rest = subtract(idle, step_loader) if step_loader else idle
        sync_us = intersection_length(rest, _clip(after_sync, a, b))
        parts["idle:input wait"] += input_idle
        parts["idle:host sync"] += sync_us
        parts["idle:host/launch"] += total(idle) - input_idle - sync_us
    return parts, blocked, alloc, gemm_us, active


def _partition_np(np: Any, t: EventTable, ctx: Context) -> tuple[dict[str, float], float, float, dict[str, float],
                                                                 tuple[float, float, float]]:
    """The numpy path of :func:`_partition`: the same parts, every per-event and per-piece pass over arrays.

    Each per-step sum adds the same floats in the same order as the pure loop (:func:`_window_sums`),
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
    dev, launched = ctx.device_array(t), ctx.device_step_array(t) >= 0  # launched inside a step
    starts, stops = ts[dev], end[dev]
    keep = (stops > starts) & (stops > lo) & (starts < hi)
    sel, starts, stops, launched = dev[keep], starts[keep], stops[keep], launched[keep]
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
    is_gemm = cls == _CLASS_ORDER.index("gpu:gemm/conv")
    gemm_us = _launched_or_window(_gemm_us_np(np, t, sel[is_gemm & launched]), _gemm_us_np(np, t, sel[is_gemm]))
    own, (covered_lo, covered_hi) = _first_class_wins_np(np, starts, stops, cls, len(_CLASS_ORDER))
    loader = ctx.input_waits(t)
    waits = ctx.sync_waits(t)
    # sync_idle needs of the busy starts only the first one at or after each sync's end: those few.
    at = np.searchsorted(covered_lo, np.array([b for _, b in waits], dtype=np.float64), side="left")
    nexts = sorted(set(covered_lo[at[at < len(covered_lo)]].tolist()))
    after_sync = sync_idle(waits, nexts, until=hi)
    blocked, alloc = _host_blocked_np(np, t, ctx, step_lo, step_hi)
    loader_lo, loader_hi = _bounds(np, loader)
    sync_lo, sync_hi = _bounds(np, after_sync)
    active = _host_active_np(np, t, ctx, step_lo, step_hi, loader_lo, loader_hi)
    for cls_name, (own_lo, own_hi) in zip(_CLASS_ORDER, own):
        piece_lo, piece_hi, counts = _clip_np(np, own_lo, own_hi, step_lo, step_hi)
        parts[cls_name] = ordered_sum(_window_sums(np, piece_hi - piece_lo, counts))
    # GPU idle per step: the gaps between the covered pieces, less the DataLoader's, less the syncs'
    idle_lo, idle_hi, idle_counts = _gaps_np(np, *_clip_np(np, covered_lo, covered_hi, step_lo, step_hi),
                                             step_lo, step_hi)
    idle = _window_sums(np, idle_hi - idle_lo, idle_counts)
    input_idle = _overlap_np(np, idle_lo, idle_hi, idle_counts, loader_lo, loader_hi)
    if len(loader_lo):
        rest_lo, rest_hi, per_gap = _gaps_np(np, *_clip_np(np, loader_lo, loader_hi, idle_lo, idle_hi),
                                             idle_lo, idle_hi)
        rest_counts = _regroup(np, per_gap, idle_counts)
    else:
        rest_lo, rest_hi, rest_counts = idle_lo, idle_hi, idle_counts
    sync_us = _overlap_np(np, rest_lo, rest_hi, rest_counts, sync_lo, sync_hi)
    parts["idle:input wait"] = ordered_sum(input_idle)
    parts["idle:host sync"] = ordered_sum(sync_us)
    parts["idle:host/launch"] = ordered_sum(idle - input_idle - sync_us)
    return parts, blocked, alloc, gemm_us, active


def _launched_or_window(launched: dict[str, float], in_window: dict[str, float]) -> dict[str, float]:
    """GEMM µs by class of the kernels launched inside the steps — or, when those are less than half of
    the GEMM time the steps' window holds, of every GEMM kernel in the window.

    A GPU-bound loop queues many steps ahead: on examples/tf32_off.py (H200, 3 ms steps) every GEMM
    that ran in the 5-step window had been launched before the profiler started, so none counted,
    the classes came out 0 ms, GD201 estimated 1.00× for a 5× fix and GD202's trace block judged
    TF32 clean — and withdrew the live GD202. The window's kernels are the same model's.
    """
    return launched if launched["gemm"] >= 0.5 * in_window["gemm"] else in_window


def _gemm_us_np(np: Any, t: EventTable, gemm: Ints) -> dict[str, float]:
    """The numpy path of :func:`_partition`'s GEMM µs by class, over the GEMM/conv events launched
    inside the steps (``gemm``, ascending).

    Each class is the events' durations added in event order, as the pure loop of :func:`_add_gemm`
    adds them; which classes a name adds to is asked of :func:`_add_gemm` itself, once per name.
    """
    out = dict.fromkeys(_GEMM_KEYS, 0.0)
    if not len(gemm):
        return out
    nids, durations = column(t, "name")[gemm], column(t, "dur")[gemm]
    member = {key: np.zeros(len(t.names), dtype=bool) for key in _GEMM_KEYS}
    for nid in np.flatnonzero(np.bincount(nids, minlength=len(t.names))).tolist():
        probe = dict.fromkeys(_GEMM_KEYS, 0.0)
        _add_gemm(probe, _gemm_kind(t.names[nid]), 1.0)
        for key, hit in probe.items():
            if hit:
                member[key][nid] = True
    for key, names in member.items():
        if names.any():
            out[key] = ordered_sum(durations[names[nids]])
    return out


def _bounds(np: Any, intervals: Sequence[Interval]) -> tuple[Floats, Floats]:
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


def _clip_np(np: Any, starts: Floats, ends: Floats, lo: Floats, hi: Floats) -> tuple[Floats, Floats, Ints]:
    """:func:`_clip` of one merged, sorted interval list to many windows [lo[j], hi[j]].

    The clipped pieces of every window one after the other (starts, ends), and how many each window has.
    Clipping every piece gives the same floats as clipping the first and the last only: the others lie
    inside the window.
    """
    first = np.searchsorted(ends, lo, side="right")
    counts = np.maximum(np.searchsorted(starts, hi, side="left"), first) - first
    idx = _ranges(np, first, counts)
    window = np.repeat(np.arange(len(lo)), counts)
    return np.maximum(starts[idx], lo[window]), np.minimum(ends[idx], hi[window]), counts


def _gaps_np(np: Any, starts: Floats, ends: Floats, counts: Ints, lo: Floats, hi: Floats) -> tuple[Floats, Floats, Ints]:
    """:func:`_span_minus` of many windows: each window [lo[j], hi[j]] minus its clipped pieces
    (``counts[j]`` of ``starts``/``ends``, from :func:`_clip_np`): the gaps one after the other, and
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


def _overlap_np(np: Any, starts: Floats, ends: Floats, counts: Ints, other_lo: Floats, other_hi: Floats) -> Floats:
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
    return _window_sums(np, overlap, _regroup(np, pairs, counts))


def _window_sums(np: Any, values: Floats, counts: Ints) -> Floats:
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


def _union_np(np: Any, starts: Floats, ends: Floats, ordered: bool = False) -> tuple[Floats, Floats]:
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
    merged = [_union_np(np, s[a:b], e[a:b], ordered=True) for a, b in zip(bounds, bounds[1:])]
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
    edges.sort(key=_START)
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


def _span_minus(a: float, b: float, cut: Sequence[Interval]) -> list[Interval]:
    """``[(a, b)]`` minus ``cut`` (merged, sorted, clipped to [a, b]): the gaps between the cut's pieces.

    The same as ``subtract([(a, b)], cut)`` (merged pieces are separated by gaps of positive length),
    without its per-piece bookkeeping.
    """
    lows = [a, *map(_END, cut)]
    highs = [*map(_START, cut), b]
    return [(low, high) for low, high in zip(lows, highs) if low < high]




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
        step_merged = _clip(merged, a, b)
        inside += total(step_merged)
        in_loader += intersection_length(step_merged, _clip(loader, a, b))
        untraced += sum(gap for gap in (high - low for low, high in _span_minus(a, b, step_merged))
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
    merged_lo, merged_hi = _union_np(np, ts[host], end_column(t)[host])
    piece_lo, piece_hi, counts = _clip_np(np, merged_lo, merged_hi, step_lo, step_hi)
    in_loader = _overlap_np(np, piece_lo, piece_hi, counts, loader_lo, loader_hi)
    gap_lo, gap_hi, gap_counts = _gaps_np(np, piece_lo, piece_hi, counts, step_lo, step_hi)
    gaps = gap_hi - gap_lo
    untraced = _window_sums(np, np.where(gaps >= UNTRACED_HOST_US, gaps, 0.0), gap_counts)
    return (ordered_sum(_window_sums(np, piece_hi - piece_lo, counts)), ordered_sum(in_loader),
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
    out.sort(key=_START)
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


def _gemm_kind(name: str) -> tuple[str | None, bool, bool, bool]:
    """A GEMM/conv kernel's precision class, whether it is a convolution, whether fp32 fused attention,
    whether a 16-bit GEMM on unaligned operands."""
    low = name.lower()
    is_conv = any(h in low for h in ("conv", "winograd", "fft", "dgrad", "wgrad", "fprop", "implicit"))
    return kn.gemm_precision(name), is_conv, kn.is_fp32_attention(name), kn.is_unaligned_lowp_gemm(name)


def _add_gemm(acc: dict[str, float], kind: tuple[str | None, bool, bool, bool], dur: float) -> None:
    precision, is_conv, is_attention, unaligned = kind
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


def _gemm_classes(gemm_us: dict[str, float], part_gemm_us: float) -> dict[str, float]:
    """µs per precision class, scaled to the GEMM/conv part of the step picture.

    The classes come from the kernels launched inside the steps; the picture's part is the GEMM time
    inside the steps' wall time. When the GPU runs behind the host the two differ, and the picture is
    what the step is made of. GEMMs whose names carry no precision count as fp32 when the run has no
    bf16/fp16 GEMM at all (autocast off: cuBLAS' plain fp32 kernels often carry no hint).
    """
    launched = gemm_us["gemm"]
    scale = part_gemm_us / launched if launched > 0 else 0.0
    no_lowp = gemm_us["gemm_lowp"] == 0.0
    matmul = gemm_us["matmul_fp32_simt"] + (gemm_us["gemm_unknown_matmul"] if no_lowp else 0.0)
    conv = gemm_us["conv_fp32_simt"] + (gemm_us["gemm_unknown_conv"] if no_lowp else 0.0)
    return {"gemm": part_gemm_us, "gemm_fp32_simt": (matmul + conv) * scale, "matmul_fp32_simt": matmul * scale,
            "conv_fp32_simt": conv * scale, "attention_fp32_simt": gemm_us["attention_fp32_simt"] * scale, "gemm_tf32": gemm_us["gemm_tf32"] * scale,
            "gemm_lowp": gemm_us["gemm_lowp"] * scale, "gemm_lowp_unaligned": gemm_us["gemm_lowp_unaligned"] * scale}


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
    lows, highs = _bounds(np, blocked)
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


def rank_bottleneck(values: dict[str, Any], rank: int | None) -> Bottleneck | None:
    """The verdict of one rank from its facts (None without step parts)."""
    if values.get("step_time_ms") is None:  # no step parts: no steps, or no GPU work in them
        return None
    parts = parts_from_facts(values)
    # the parts add up to the profiled step — or, pictured on the GPU (gpu_paced_steps), to its step there
    step = sum(parts.values()) if values.get("gpu_paced_steps") else values.get("profiled_step_ms") or values.get("step_time_ms")
    if not isinstance(step, (int, float)) or step <= 0:
        return None
    where = f" on rank {rank}" if rank is not None else ""
    return verdict_from_parts(parts, float(step), float(values.get("allocator_ms_per_step") or 0.0), where)
