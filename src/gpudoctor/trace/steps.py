"""Per-step host-side metrics: DataLoader share, host syncs, copies, optimizer, torch.compile.

Why this exists: these metrics are all "what the host does inside ``ProfilerStep#N``" — they need
steps, the outermost ``aten::`` op around a call, and the launch that ties a GPU copy or kernel to
the host. They are computed only when the trace has steps.

What it must not do: read files or know rule thresholds.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import TYPE_CHECKING, Any

from gpudoctor.trace import vectorized
from gpudoctor.trace.context import COMPILE_WORK, Context, pct
from gpudoctor.trace.events import K_KERNEL, K_MEMCPY, EventTable
from gpudoctor.trace.graphbreaks import compiled_calls, frame_of, graph_break_metrics
from gpudoctor.trace.timeline import end_times, merge, total
from gpudoctor.trace.vectorized import Floats, Ints

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue


def dataloader_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    waits = ctx.input_waits(t)
    step_total = sum(b - a for _, a, b in ctx.steps)
    if not waits:
        return {"dataloader_pct": 0.0, "dataloader_ms_per_step": 0.0}
    dl = total(waits)
    return {"dataloader_pct": pct(dl, step_total),
            "dataloader_ms_per_step": round(dl / 1000.0 / ctx.n_steps, 3)}


def sync_and_copy_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    names = t.names
    syncs = 0
    sync_us = 0.0
    kinds: Counter[str] = Counter()
    copy_syncs = 0
    copies = _memcpy_launches(t, ctx)
    for i in ctx.sync_calls:
        n = names[t.name[i]]
        if not ctx.in_steps(t.ts[i]):
            continue
        op = ctx.issuing_op(t, i)
        op_name = names[t.name[op]] if op is not None else n
        if op is not None and op_name in ("aten::to", "aten::_to_copy", "aten::copy_") and \
                _copy_kind_in(t, copies, op) == "HtoD":
            copy_syncs += 1  # the wait of a pageable H2D copy: GD302's business
            continue
        syncs += 1
        sync_us += t.dur[i]
        kinds[op_name] += 1
    step_us = sum(b - a for _, a, b in ctx.steps)
    n = ctx.n_steps
    out: dict[str, FactValue] = {
        "host_syncs_per_step": round(syncs / n, 2),
        "host_sync_ms_per_step": round(sync_us / 1000.0 / n, 3),
        "host_sync_pct": pct(sync_us, step_us),
        "host_sync_kinds": ", ".join(f"{k}×{v}" for k, v in kinds.most_common(4)) or "none",
        "copy_syncs_per_step": round(copy_syncs / n, 2),
    }
    np = ctx.np
    if np is not None:
        out.update(_copies_np(np, t, ctx))
        return out
    kind, in_steps = t.kind, ctx.device_steps(t)
    memcpy = [i for i in ctx.device if kind[i] == K_MEMCPY and i in in_steps]
    pageable = [i for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD (Pageable")]
    dtoh = [i for i in memcpy if names[t.name[i]].startswith("Memcpy DtoH")]
    out.update({
        "dtoh_copies_per_step": round(len(dtoh) / n, 2),
        "h2d_copies_per_step": round(sum(1 for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD")) / n, 2),
        "pageable_h2d_per_step": round(len(pageable) / n, 2),
        "pageable_h2d_mb_per_step": round(sum(max(t.nbytes[i], 0) for i in pageable) / 1e6 / n, 3),
        "pageable_h2d_ms_per_step": round(sum(t.dur[i] for i in pageable) / 1000.0 / n, 3),
    })
    return out


def _copies_np(np: Any, t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """The numpy path of :func:`sync_and_copy_metrics`' copy counts: the steps' memcpys by name id."""
    col = vectorized.column
    n = ctx.n_steps
    dev = ctx.device_array(t)
    memcpy = dev[(col(t, "kind")[dev] == K_MEMCPY) & (ctx.device_step_array(t) >= 0)]
    nid = col(t, "name")[memcpy]

    def named(prefix: str) -> Any:
        table = np.zeros(len(t.names), dtype=bool)
        table[[i for i, name in enumerate(t.names) if name.startswith(prefix)]] = True
        return table[nid]

    pageable = memcpy[named("Memcpy HtoD (Pageable")]
    return {
        "dtoh_copies_per_step": round(int(named("Memcpy DtoH").sum()) / n, 2),
        "h2d_copies_per_step": round(int(named("Memcpy HtoD").sum()) / n, 2),
        "pageable_h2d_per_step": round(len(pageable) / n, 2),
        "pageable_h2d_mb_per_step": round(int(np.maximum(col(t, "nbytes")[pageable], 0).sum()) / 1e6 / n, 3),
        "pageable_h2d_ms_per_step": round(vectorized.ordered_sum(col(t, "dur")[pageable]) / 1000.0 / n, 3),
    }


def _memcpy_launches(t: EventTable, ctx: Context) -> dict[int, tuple[list[float], list[str]]]:
    """Per host thread: launch times of GPU memcpys and their direction (``HtoD``, ``DtoH`` …)."""
    rows: dict[int, list[tuple[float, str]]] = {}
    np = ctx.np
    if np is not None:  # the memcpys found by their kind, their launches by the context's array
        dev, calls = ctx.device_array(t), ctx.device_launch_array(t)
        found = (vectorized.column(t, "kind")[dev] == K_MEMCPY) & (calls >= 0)
        for i, at in zip(dev[found].tolist(), calls[found].tolist()):
            rows.setdefault(t.thread[at], []).append((t.ts[at], t.names[t.name[i]][7:11]))
    else:
        kind, corr, launch_by_corr = t.kind, t.correlation, ctx.launch_by_corr
        for i in ctx.device:
            if kind[i] != K_MEMCPY:
                continue
            launch = launch_by_corr.get(corr[i])
            if launch is not None:
                rows.setdefault(t.thread[launch], []).append((t.ts[launch], t.names[t.name[i]][7:11]))
    out = {}
    for thread, items in rows.items():
        items.sort()
        out[thread] = ([a for a, _ in items], [b for _, b in items])
    return out


def _copy_kind_in(t: EventTable, copies: dict[int, tuple[list[float], list[str]]], op: int) -> str:
    """Direction of the first GPU memcpy launched inside host op ``op``, or ''."""
    times, kinds = copies.get(t.thread[op], ([], []))
    k = bisect.bisect_left(times, t.ts[op])
    if k < len(times) and times[k] <= t.ts[op] + t.dur[op]:
        return kinds[k]
    return ""


def optimizer_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    ops = ctx.host_ops(t, lambda n: n.startswith("Optimizer.step#"))
    if not ops:
        return {}
    spans = sorted((t.ts[i], t.ts[i] + t.dur[i], t.thread[i]) for i in ops)
    n = ctx.n_steps
    span_ms = round(sum(b - a for a, b, _ in spans) / 1000.0 / n, 3)
    np = ctx.np
    if np is not None:
        launched, multi = _optimizer_kernels_np(np, t, ctx, spans)
        return {"optimizer_kernels_per_step": round(launched / n, 1),
                "optimizer_multi_tensor_kernels_per_step": round(multi / n, 1),
                "optimizer_ms_per_step": span_ms}
    span_starts = [a for a, _, _ in spans]
    launched = 0
    multi = 0
    kind, ts, thread, name = t.kind, t.ts, t.thread, t.name
    classes = ctx.kernel_classes(t)
    bisect_right = bisect.bisect_right
    for i, launch in ctx.device_launches(t).items():  # the device events with a launch, in event order
        if kind[i] != K_KERNEL:
            continue
        lt = ts[launch]
        k = bisect_right(span_starts, lt) - 1
        if k >= 0 and lt <= spans[k][1] and spans[k][2] == thread[launch]:
            launched += 1
            multi += classes[name[i]].multi_tensor
    return {
        "optimizer_kernels_per_step": round(launched / n, 1),
        "optimizer_multi_tensor_kernels_per_step": round(multi / n, 1),
        "optimizer_ms_per_step": span_ms,
    }


def _optimizer_kernels_np(np: Any, t: EventTable, ctx: Context,
                          spans: list[tuple[float, float, int]]) -> tuple[int, int]:
    """The numpy path of :func:`optimizer_metrics`' loop: the kernels launched in the last span that
    starts at or before their launch (on its thread), and how many of them are multi-tensor ones."""
    col = vectorized.column
    dev, launch = ctx.device_array(t), ctx.device_launch_array(t)
    chosen = (launch >= 0) & (col(t, "kind")[dev] == K_KERNEL)
    dev, launch = dev[chosen], launch[chosen]
    starts, ends, threads = (np.array(v) for v in zip(*spans))
    when = col(t, "ts")[launch]
    k = np.searchsorted(starts, when, side="right") - 1
    inside = k >= 0
    at = k[inside]
    inside[inside] = (when[inside] <= ends[at]) & (threads[at] == col(t, "thread")[launch[inside]])
    multi = ctx.class_array(t, "multi_tensor")[col(t, "name")[dev[inside]]]
    return int(inside.sum()), int(multi.sum())


def compile_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    regions = ctx.host_ops(t, lambda n: n.startswith("Torch-Compiled Region"))
    if not regions:  # nothing compiled: no graph can break or recompile
        return {"compiled_graphs_per_step": 0.0, "compiled_graphs_per_call": 0.0, "recompiled_frames": 0,
                "compiles_in_steps": 0}
    names = t.names
    fx_calls = ctx.host_ops(t, lambda n: n.startswith("## Call CompiledFxGraph"))
    frames = {frame_of(names[t.name[i]]) for i in regions}
    recompiled = {names[t.name[i]] for i in regions if not names[t.name[i]].rstrip().endswith("/0")}
    compile_ops = ctx.host_ops(t, lambda n: any(w in n for w in COMPILE_WORK))
    n = ctx.n_steps
    calls = compiled_calls(t, ctx)
    per_call: dict[str, list[int]] = {}  # outer frame → regions nested in each of its calls
    for call in calls:
        per_call.setdefault(call.frame, []).append(len(call.regions))
    outer_calls = len(calls)
    return {
        "compiled_graphs_per_step": round(len(regions) / n, 2),
        "compiled_calls_per_step": round(outer_calls / n, 2),
        "compiled_graphs_per_call": round(max(sum(c) / len(c) for c in per_call.values()), 2),
        "compiled_frames": len(frames),
        "compiled_fx_graph_calls_per_step": round(len(fx_calls) / n, 2),
        "recompiled_frames": len(recompiled),
        "compiles_in_steps": len(compile_ops),
        "compile_ms_in_steps": round(sum(t.dur[i] for i in compile_ops) / 1000.0, 3),
        **graph_break_metrics(t, ctx, calls),
    }


def step_rows(t: EventTable, ctx: Context) -> list[dict[str, Any]]:
    if not ctx.steps:
        return []
    np = ctx.np
    if np is not None:
        return _step_rows_np(np, t, ctx)
    busy: list[list[tuple[float, float]]] = [[] for _ in ctx.steps]
    compute: list[list[tuple[float, float]]] = [[] for _ in ctx.steps]   # busy without collectives
    kernels = [0] * ctx.n_steps
    comm_names = {nid for nid, info in ctx.kernel_classes(t).items() if info.communication}
    ts, end, name, kind = t.ts, end_times(t), t.name, t.kind
    for i, step in ctx.device_steps(t).items():  # the device events launched inside a step, in event order
        interval = (ts[i], end[i])
        busy[step].append(interval)
        if comm_names and name[i] not in comm_names:  # a fast rank's NCCL kernel spins while it waits
            compute[step].append(interval)
        kernels[step] += kind[i] == K_KERNEL
    dl = [0.0] * ctx.n_steps
    for i in ctx.host_ops(t, lambda n: n.startswith("enumerate(DataLoader)")):
        k = ctx.step_of(t.ts[i])
        if k is not None:
            dl[k] += t.dur[i]
    rows = []
    for k, (num, a, b) in enumerate(ctx.steps):
        span = b - a
        gpu_busy = round(total(merge(busy[k])) / 1000.0, 3)
        rows.append({
            "step": num,
            "step_time_ms": round(span / 1000.0, 3),
            "dataloader_ms": round(dl[k] / 1000.0, 3),
            "gpu_busy_ms": gpu_busy,
            # without communication kernels the compute is the busy time (one merge, not two)
            "gpu_compute_ms": round(total(merge(compute[k])) / 1000.0, 3) if comm_names else gpu_busy,
            "kernels": kernels[k],
        })
    return rows


def _step_rows_np(np: Any, t: EventTable, ctx: Context) -> list[dict[str, Any]]:
    """The numpy path of :func:`step_rows`: each step's busy union from one sort of all the steps'
    device events (by step, then as ``merge`` sorts), the sums per step added in ``total``'s order."""
    col = vectorized.column
    n = ctx.n_steps
    step = ctx.device_step_array(t)
    inside = step >= 0
    dev, step = ctx.device_array(t)[inside], step[inside]
    kernels = np.bincount(step[col(t, "kind")[dev] == K_KERNEL], minlength=n).tolist()
    start, end = col(t, "ts")[dev], vectorized.ends(t)[dev]
    order = _by_step_and_interval(np, step, start, end)
    step, start, end, dev = step[order], start[order], end[order], dev[order]
    busy = _union_per_step(np, step, start, end, n)
    comm = ctx.class_array(t, "communication")
    compute = busy
    if comm.any():  # without communication kernels the compute is the busy time (one merge, not two)
        keep = ~comm[col(t, "name")[dev]]  # a fast rank's NCCL kernel spins while it waits
        compute = _union_per_step(np, step[keep], start[keep], end[keep], n)
    dl = [0.0] * n
    for i in ctx.host_ops(t, lambda name: name.startswith("enumerate(DataLoader)")):
        k = ctx.step_of(t.ts[i])
        if k is not None:
            dl[k] += t.dur[i]
    rows = []
    for k, ((num, a, b), busy_us, compute_us) in enumerate(zip(ctx.steps, busy.tolist(), compute.tolist())):
        gpu_busy = round(busy_us / 1000.0, 3)
        rows.append({
            "step": num,
            "step_time_ms": round((b - a) / 1000.0, 3),
            "dataloader_ms": round(dl[k] / 1000.0, 3),
            "gpu_busy_ms": gpu_busy,
            "gpu_compute_ms": round(compute_us / 1000.0, 3) if compute is not busy else gpu_busy,
            "kernels": kernels[k],
        })
    return rows


def _by_step_and_interval(np: Any, step: Ints, start: Floats, end: Floats) -> Ints:
    """The order of intervals by (step, start, end): a stable sort by start (then by end only where
    two start together), then a stable sort by step unless the steps are in order already."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    if (ordered[1:] == ordered[:-1]).any():
        order = np.lexsort((end, start))
    by_step = step[order]
    if len(by_step) > 1 and (by_step[1:] < by_step[:-1]).any():
        small = by_step.astype(np.int16) if len(by_step) and by_step.max() < 2**15 else by_step
        order = order[np.argsort(small, kind="stable")]  # 16-bit keys: a radix sort
    out: Ints = order
    return out


def _union_per_step(np: Any, step: Ints, start: Floats, end: Floats, n: int) -> Floats:
    """``total(merge(…))`` of each step's intervals, for intervals sorted by (step, start, end).

    An interval starts a new group at its step's first interval or when it starts after the running
    maximum of the earlier ends of its step; a group ends at its largest end (as in
    :func:`.vectorized.merge`); the groups' lengths are added per step in order (``bincount``).
    """
    if not len(step):
        return np.zeros(n)
    first = np.empty(len(step), dtype=bool)
    first[0] = True
    np.not_equal(step[1:], step[:-1], out=first[1:])
    running = _running_max_per_segment(np, end, first)
    new = first.copy()
    new[1:] |= start[1:] > running[:-1]
    groups = np.flatnonzero(new)
    lengths = np.maximum.reduceat(end, groups) - start[groups]
    out: Floats = np.bincount(step[groups], weights=lengths, minlength=n)
    return out


def _running_max_per_segment(np: Any, values: Floats, first: Any) -> Floats:
    """The running maximum of ``values`` within each segment (a segment starts where ``first``).

    The running maximum over all values is the per-segment one when no segment starts below the
    maximum of the segments before it (device work of one step after the last step's: the usual
    case); else a doubling scan, log2(longest segment) rounds of elementwise maxima.
    """
    running = np.maximum.accumulate(values)
    heads = np.flatnonzero(first)[1:]
    if not (running[heads - 1] > values[heads]).any():
        out: Floats = running
        return out
    index = np.arange(len(values))
    position = index - np.maximum.accumulate(np.where(first, index, 0))  # index within its segment
    running = values.copy()
    shift = 1
    longest = int(position.max()) + 1
    while shift < longest:
        nxt = running.copy()
        np.maximum(running[shift:], running[:-shift], out=nxt[shift:], where=position[shift:] >= shift)
        running = nxt
        shift *= 2
    return running
