"""What torch.compile's graph breaks cost the step: GPU idle in the windows between a call's graphs.

Why this exists: a graph break splits one call of a compiled function into several graphs. Between
graph k and graph k + 1 the host runs guards, the resume frame and the eager code of the break; the
GPU loses time there only if it runs out of queued work. So the cost of a break is not the host
window itself but the GPU idle inside it, mapped onto GPU time: from the end (on the GPU) of the last
kernel launched up to the end of graph k's host call to the start (on the GPU) of the first kernel
launched once graph k + 1's host call began, less the GPU busy time in between (eager kernels of the
break, other streams) and less the idle after a host sync in the window (a ``.item()`` that often
comes with a break: GD301 measures and estimates that one). A GPU-bound step hides the host window behind its queue and pays ~nothing; a
launch-bound one pays all of it.

Graphs are the ``## Call CompiledFxGraph`` host calls. Forward windows lie between consecutive graphs
inside one outer call (the ``Torch-Compiled Region`` not nested in another; a break resumes in a
region nested inside it). Backward windows lie between consecutive backward graphs (graph calls
outside every region, on the autograd thread) of the backward pass that follows exactly one outer
call with several graphs; when several compiled calls precede one backward pass (a model and a loss
compiled apart) the backward gaps cannot be told apart from call boundaries and are left out.

What it must not do: read files or know rule thresholds.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context, pct
from gpudoctor.trace.events import K_KERNEL, EventTable
from gpudoctor.trace.timeline import Interval, end_times, intersection_length, merge, sync_idle

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue

_REGION = "Torch-Compiled Region"
_FX_CALL = "## Call CompiledFxGraph"


class CompiledCall(msgspec.Struct):
    """One outer call of a compiled function on one host thread, with every region nested in it."""

    frame: str
    thread: int
    start: float
    end: float
    regions: list[int] = msgspec.field(default_factory=list)


def frame_of(name: str) -> str:
    """``Torch-Compiled Region: 3/1`` → ``3`` (the frame id; ``/1`` is the recompile count)."""
    return name.split(":", 1)[-1].strip().split("/")[0]


def compiled_calls(t: EventTable, ctx: Context) -> list[CompiledCall]:
    """The outer calls of compiled functions inside the steps, in time order per thread.

    A graph break resumes in a new frame whose region runs *inside* the outer region's call; a
    function called N times per step (gradient accumulation) has N outer regions of one graph each.
    """
    regions = ctx.host_ops(t, lambda n: n.startswith(_REGION))
    by_thread: dict[int, list[int]] = {}
    for i in regions:
        by_thread.setdefault(t.thread[i], []).append(i)
    calls: list[CompiledCall] = []
    for thread, idx in by_thread.items():
        current: CompiledCall | None = None
        for i in sorted(idx, key=lambda i: (t.ts[i], -t.dur[i])):
            if current is None or t.ts[i] >= current.end:  # not inside the previous outer region
                current = CompiledCall(frame_of(t.names[t.name[i]]), thread, t.ts[i], t.ts[i] + t.dur[i])
                calls.append(current)
            current.regions.append(i)
    return sorted(calls, key=lambda c: c.start)


def graph_break_metrics(t: EventTable, ctx: Context, calls: list[CompiledCall]) -> dict[str, FactValue]:
    """Windows between consecutive graphs of one call, and the GPU idle, eager kernels and host time in them."""
    windows, backward = _windows(t, ctx, calls)
    n = ctx.n_steps
    host_us = sum(b - a for _, a, b in windows)
    out: dict[str, FactValue] = {
        "graph_break_windows_per_step": round(len(windows) / n, 2),
        "graph_break_backward_windows_per_step": round(backward / n, 2),
        "graph_break_host_ms_per_step": round(host_us / 1000.0 / n, 3),
    }
    if not ctx.device:  # a CPU-only trace: no GPU timeline to lose time on
        return out
    if not windows:  # no break: nothing to map onto the GPU (and no pass over its events)
        out.update({"graph_break_gpu_idle_ms_per_step": 0.0, "graph_break_gpu_idle_pct": 0.0,
                    "graph_break_eager_kernels_per_step": 0.0, "graph_break_eager_kernel_ms_per_step": 0.0})
        return out
    ts, end, kind = t.ts, end_times(t), t.kind
    np = ctx.np
    if np is not None:  # the two passes over every device event on arrays; the windows' loop as it is
        launches = _launches_by_thread_np(np, t, ctx)
        busy = _busy_np(t, ctx)
    else:
        launches = _launches_by_thread(t, ctx)
        busy = merge((ts[i], end[i]) for i in ctx.device if end[i] > ts[i])
    busy_ends = [b for _, b in busy]
    after_sync = sync_idle(ctx.sync_waits(t), [a for a, _ in busy])
    sync_ends = [b for _, b in after_sync]
    idle_us = eager_us = 0.0
    eager = 0
    for thread, a, b in windows:
        times, events = launches.get(thread, ([], []))
        before = bisect.bisect_right(times, a)   # events[:before] were launched by graph k or earlier
        after = bisect.bisect_left(times, b)     # events[after:] by graph k + 1 or later
        between = events[before:after]
        kernels = [i for i in between if kind[i] == K_KERNEL]
        eager += len(kernels)
        eager_us += sum(end[i] - ts[i] for i in kernels)
        if before == 0 or after == len(events):
            continue  # the window's GPU edge lies outside the trace
        gpu_from = end[events[before - 1]]
        gpu_to = ts[events[after]]
        if gpu_to > gpu_from:  # idle after a host sync in the window is GD301's (the sync's own cost)
            idle = (gpu_to - gpu_from) - _overlap(busy, busy_ends, gpu_from, gpu_to)
            idle_us += max(0.0, idle - _overlap(after_sync, sync_ends, gpu_from, gpu_to))
    step_us = sum(b - a for _, a, b in ctx.steps)
    out.update({
        "graph_break_gpu_idle_ms_per_step": round(idle_us / 1000.0 / n, 3),
        "graph_break_gpu_idle_pct": pct(idle_us, step_us) or 0.0,
        "graph_break_eager_kernels_per_step": round(eager / n, 1),
        "graph_break_eager_kernel_ms_per_step": round(eager_us / 1000.0 / n, 3),
    })
    return out


def _windows(t: EventTable, ctx: Context, calls: list[CompiledCall]) -> tuple[list[tuple[int, float, float]], int]:
    """Host windows ``(thread, end of graph k, start of graph k + 1)`` inside the steps; how many are backward."""
    ts, dur, thread = t.ts, t.dur, t.thread
    call_starts = [c.start for c in calls]  # ``calls`` is in time order over all threads
    on_thread: dict[int, tuple[list[float], list[int]]] = {}
    for k, c in enumerate(calls):
        starts, index = on_thread.setdefault(c.thread, ([], []))
        starts.append(c.start)
        index.append(k)
    forward: dict[int, list[int]] = {}   # call index → its graph calls
    outside: dict[int, list[int]] = {}   # thread → graph calls outside every region: backward graphs
    for i in ctx.host_ops(t, lambda n: n.startswith(_FX_CALL)):
        starts, index = on_thread.get(thread[i], ([], []))
        k = bisect.bisect_right(starts, ts[i]) - 1
        if k >= 0 and ts[i] <= calls[index[k]].end:
            forward.setdefault(index[k], []).append(i)
        else:
            outside.setdefault(thread[i], []).append(i)
    windows: list[tuple[int, float, float]] = []
    for graphs in forward.values():
        windows += _gaps(graphs, ts, dur, thread)
    n_forward = len(windows)
    for idx in outside.values():
        # one backward pass: the graph calls after the same number of outer calls have started
        passes: dict[int, list[int]] = {}
        for i in idx:
            passes.setdefault(bisect.bisect_right(call_starts, ts[i]) - 1, []).append(i)
        previous = -1
        for last_call in sorted(passes):
            since = [k for k in range(previous + 1, last_call + 1) if forward.get(k)]
            if len(since) == 1 and len(forward[since[0]]) >= 2:  # the pass of exactly one broken call
                windows += _gaps(passes[last_call], ts, dur, thread)
            previous = last_call
    inside = [w for w in windows if ctx.in_steps(w[1])]
    backward = sum(1 for k, w in enumerate(windows) if k >= n_forward and ctx.in_steps(w[1]))
    return inside, backward


def _gaps(graphs: list[int], ts: Sequence[float], dur: Sequence[float],
          thread: Sequence[int]) -> list[tuple[int, float, float]]:
    """Host gaps between consecutive graph calls (a graph call nested in another one is skipped)."""
    out: list[tuple[int, float, float]] = []
    prev_end: float | None = None
    for i in sorted(graphs, key=ts.__getitem__):
        start = ts[i]
        if prev_end is not None:
            if start < prev_end:
                continue
            out.append((thread[i], prev_end, start))
        prev_end = start + dur[i]
    return out


def _launches_by_thread(t: EventTable, ctx: Context) -> dict[int, tuple[list[float], list[int]]]:
    """Per host thread: launch times of the device events it launched (sorted) and those events."""
    rows: dict[int, list[tuple[float, int]]] = {}
    ts, thread = t.ts, t.thread
    for i, launch in ctx.device_launches(t).items():
        rows.setdefault(thread[launch], []).append((ts[launch], i))
    out: dict[int, tuple[list[float], list[int]]] = {}
    for th, items in rows.items():
        items.sort()
        out[th] = ([a for a, _ in items], [i for _, i in items])
    return out


def _launches_by_thread_np(np: Any, t: EventTable, ctx: Context) -> dict[int, tuple[list[float], list[int]]]:
    """The numpy path of :func:`_launches_by_thread`: one stable sort by launch time (the device
    events ascend, so ties stay in index order, as the tuples sort), then one by thread."""
    col = vectorized.column
    dev, launch = ctx.device_array(t), ctx.device_launch_array(t)
    found = launch >= 0
    dev, launch = dev[found], launch[found]
    if not len(dev):
        return {}
    thread, when = col(t, "thread")[launch], col(t, "ts")[launch]
    order = np.argsort(when, kind="stable")
    order = order[np.argsort(thread[order], kind="stable")]
    thread, when, dev = thread[order], when[order], dev[order]
    present, first = np.unique(thread, return_index=True)
    bounds = [*first.tolist(), len(thread)]
    per = {th: (when[a:b].tolist(), dev[a:b].tolist()) for th, a, b in zip(present.tolist(), bounds, bounds[1:])}
    seen = np.minimum.reduceat(order, first)  # each thread's first device event: the dict's order
    return {th: per[th] for th in present[np.argsort(seen)].tolist()}


def _busy_np(t: EventTable, ctx: Context) -> list[Interval]:
    """The numpy path of the device events' busy union (the events with a positive length), as a list."""
    dev = ctx.device_array(t)
    start, end = vectorized.column(t, "ts")[dev], vectorized.ends(t)[dev]
    positive = end > start
    starts, ends = vectorized.merge(start[positive], end[positive])
    return list(zip(starts.tolist(), ends.tolist()))


def _overlap(spans: list[Interval], ends: list[float], lo: float, hi: float) -> float:
    """Length of ``spans`` (merged and sorted, so their ends ascend too; ``ends`` theirs) inside [lo, hi]."""
    k = first = bisect.bisect_right(ends, lo)
    while k < len(spans) and spans[k][0] < hi:
        k += 1
    return intersection_length(spans[first:k], [(lo, hi)])
