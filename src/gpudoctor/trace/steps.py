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

from gpudoctor.trace.context import COMPILE_WORK, Context, pct
from gpudoctor.trace.events import K_KERNEL, K_MEMCPY, EventTable
from gpudoctor.trace.graphbreaks import compiled_calls, frame_of, graph_break_metrics
from gpudoctor.trace.timeline import end_times, merge, total

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue


def dataloader_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    ops = ctx.host_ops(t, lambda n: n.startswith("enumerate(DataLoader)") and "__next__" in n)
    step_total = sum(b - a for _, a, b in ctx.steps)
    if not ops:
        return {"dataloader_pct": 0.0, "dataloader_ms_per_step": 0.0}
    dl = total(merge((t.ts[i], t.ts[i] + t.dur[i]) for i in ops))
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
    kind, in_steps = t.kind, ctx.device_steps(t)
    memcpy = [i for i in ctx.device if kind[i] == K_MEMCPY and i in in_steps]
    pageable = [i for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD (Pageable")]
    dtoh = [i for i in memcpy if names[t.name[i]].startswith("Memcpy DtoH")]
    return {
        "host_syncs_per_step": round(syncs / n, 2),
        "host_sync_ms_per_step": round(sync_us / 1000.0 / n, 3),
        "host_sync_pct": pct(sync_us, step_us),
        "host_sync_kinds": ", ".join(f"{k}×{v}" for k, v in kinds.most_common(4)) or "none",
        "copy_syncs_per_step": round(copy_syncs / n, 2),
        "dtoh_copies_per_step": round(len(dtoh) / n, 2),
        "h2d_copies_per_step": round(sum(1 for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD")) / n, 2),
        "pageable_h2d_per_step": round(len(pageable) / n, 2),
        "pageable_h2d_mb_per_step": round(sum(max(t.nbytes[i], 0) for i in pageable) / 1e6 / n, 3),
        "pageable_h2d_ms_per_step": round(sum(t.dur[i] for i in pageable) / 1000.0 / n, 3),
    }


def _memcpy_launches(t: EventTable, ctx: Context) -> dict[int, tuple[list[float], list[str]]]:
    """Per host thread: launch times of GPU memcpys and their direction (``HtoD``, ``DtoH`` …)."""
    rows: dict[int, list[tuple[float, str]]] = {}
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
    n = ctx.n_steps
    return {
        "optimizer_kernels_per_step": round(launched / n, 1),
        "optimizer_multi_tensor_kernels_per_step": round(multi / n, 1),
        "optimizer_ms_per_step": round(sum(b - a for a, b, _ in spans) / 1000.0 / n, 3),
    }


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
