"""Per-rank performance metrics from one trace: the numbers every trace rule is judged on.

Why this exists: rules need plain, unit-named numbers (``idle_pct``, ``dataloader_pct``,
``gemm_fp32_simt_pct`` …); HTA gives some of them as tables and no verdicts. Here each metric is
computed once per rank from the columnar :class:`~gpudoctor.trace.reader.EventTable`, with HTA's
definitions where HTA has one (temporal breakdown, comm/compute overlap, idle-time breakdown), and
per ``ProfilerStep#N`` where steps exist. A metric that the trace cannot support is ``None`` (the
engine then reports "not evaluated"), never 0.

What it must not do: read files, know rule thresholds, or import anything heavy.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.model import FactValue
from gpudoctor.trace import kernels as kn
from gpudoctor.trace.reader import (
    K_ANNOTATION,
    K_CPU_OP,
    K_GPU_ANNOTATION,
    K_KERNEL,
    K_MEMCPY,
    K_MEMSET,
    K_OTHER,
    K_RUNTIME,
    EventTable,
    RankTrace,
)
from gpudoctor.trace.timeline import hta_device_events, intersection_length, merge, step_spans, total

SMALL_KERNEL_US = 10.0
LONG_GAP_US = 100_000.0
_HOST_KINDS = (K_CPU_OP, K_ANNOTATION, K_OTHER)
_SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
               "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
               "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")
_WANTED_PREFIXES = ("enumerate(DataLoader)", "Optimizer.step#", "Torch-Compiled Region", "## Call CompiledFxGraph")
_COMPILE_WORK = ("compile_inner", "_compile.", "call_user_compiler", "compile_fx", "inductor_compile",
                 "backend_compile", "dynamo_compile")


@dataclass
class RankMetrics:
    """Everything measured on one rank: facts for the rules, rows for the tables."""

    rank: int
    values: dict[str, FactValue]
    step_rows: list[dict[str, Any]] = field(default_factory=list)
    collectives: dict[str, list[float]] = field(default_factory=dict)  # kernel name → start times (µs)


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole > 0 else None


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def compute_rank_metrics(trace: RankTrace) -> RankMetrics:
    """All metrics of one rank's trace."""
    t = trace.events
    values: dict[str, FactValue] = {"trace_events": len(t)}
    steps = step_spans(t)
    values["step_count"] = len(steps) or None
    values["has_steps"] = bool(steps)
    values.update(_temporal(t))
    if steps:
        durations = [(b - a) / 1000.0 for _, a, b in steps]
        values["step_time_p50_ms"] = _r(statistics.median(durations))
        values["step_time_max_ms"] = _r(max(durations))
    ctx = _Context(t, steps)
    values.update(_kernel_mix(t, ctx))
    values.update(_launches(t, ctx))
    values.update(_gaps(t, ctx))
    if steps:
        values.update(_dataloader(t, ctx))
        values.update(_syncs_and_copies(t, ctx))
        values.update(_optimizer(t, ctx))
        values.update(_compile(t, ctx))
    values.update(_memory(trace))
    return RankMetrics(trace.rank, values, _step_rows(t, ctx), _collectives(t, ctx))


class _Context:
    """Shared look-ups: which step a host time falls in, correlation → launch, kernels per step."""

    def __init__(self, t: EventTable, steps: list[tuple[int, float, float]]) -> None:
        self.steps = steps
        self.step_starts = [a for _, a, _ in steps]
        self.n_steps = len(steps)
        self.launch_by_corr: dict[int, int] = {}
        self.device: list[int] = []
        self.sync_calls: list[int] = []
        #: host events of the few names the metrics look for, by name id
        self.host_by_name: dict[int, list[int]] = {}
        #: per host thread, ``aten::`` op indices (for "which op issued this sync")
        self.aten_by_thread: dict[int, list[int]] = {}
        names = t.names
        wanted = {i for i, n in enumerate(names) if n.startswith(_WANTED_PREFIXES)
                  or any(w in n for w in _COMPILE_WORK)}
        aten = {i for i, n in enumerate(names) if n.startswith("aten::")}
        syncs = {i for i, n in enumerate(names) if n in _SYNC_CALLS}
        kind, name, corr, stream, thread = t.kind, t.name, t.correlation, t.stream, t.thread
        # K_KERNEL, K_MEMCPY and K_MEMSET are 4, 5 and 6.
        self.device = [i for i, k in enumerate(kind) if K_KERNEL <= k <= K_MEMSET]
        runtime = [i for i, k in enumerate(kind) if k == K_RUNTIME]
        self.launch_by_corr = {corr[i]: i for i in runtime if corr[i] >= 0}
        self.sync_calls = [i for i in runtime if name[i] in syncs]
        interesting = wanted | aten
        for i in [i for i, nid in enumerate(name) if nid in interesting]:
            if stream[i] >= 0 or kind[i] not in _HOST_KINDS:
                continue
            nid = name[i]
            if nid in wanted:
                self.host_by_name.setdefault(nid, []).append(i)
            elif kind[i] == K_CPU_OP:
                self.aten_by_thread.setdefault(thread[i], []).append(i)

    def host_ops(self, t: EventTable, predicate: Any) -> list[int]:
        """Host events inside the steps whose name satisfies ``predicate`` (names pre-selected above)."""
        out: list[int] = []
        for nid, idx in self.host_by_name.items():
            if predicate(t.names[nid]):
                out.extend(i for i in idx if self.in_steps(t.ts[i]))
        return sorted(out)

    def step_of(self, ts_us: float) -> int | None:
        """Index (0-based, into ``steps``) of the step whose host span holds ``ts_us``."""
        k = bisect.bisect_right(self.step_starts, ts_us) - 1
        if k >= 0 and ts_us <= self.steps[k][2]:
            return k
        return None

    def step_of_device(self, t: EventTable, i: int) -> int | None:
        """Step of a GPU event, by the host time of the call that launched it."""
        launch = self.launch_by_corr.get(t.correlation[i])
        return self.step_of(t.ts[launch]) if launch is not None else None

    def in_steps(self, ts_us: float) -> bool:
        return self.step_of(ts_us) is not None


def _temporal(t: EventTable) -> dict[str, FactValue]:
    sel = hta_device_events(t)
    if not sel.index:
        return {}
    names, name = t.names, t.name
    everything = merge(zip(sel.start, sel.end))
    kernel_time = everything[-1][1] - everything[0][0]
    if kernel_time <= 0:
        return {}
    busy = total(everything)
    kinds = [kn.hta_kernel_type(names[name[i]]) for i in sel.index]
    comp = merge((s, e) for k, s, e in zip(kinds, sel.start, sel.end) if k == kn.COMPUTATION)
    comm = merge((s, e) for k, s, e in zip(kinds, sel.start, sel.end) if k == kn.COMMUNICATION)
    mem = merge((s, e) for k, s, e in zip(kinds, sel.start, sel.end) if k == kn.MEMORY)
    compute_time = total(comp)
    idle = kernel_time - busy
    out: dict[str, FactValue] = {
        "kernel_time_us": round(kernel_time, 1),
        "idle_pct": _pct(idle, kernel_time),
        "compute_pct": _pct(compute_time, kernel_time),
        "non_compute_pct": _pct(kernel_time - compute_time - idle, kernel_time),
        "memory_pct": _pct(total(mem), kernel_time),
        "last_step_dropped": sel.dropped_last_step,
    }
    if comm:
        comm_time = total(comm)
        out["comm_pct"] = _pct(comm_time, kernel_time)
        out["overlap_pct"] = _pct(intersection_length(comm, comp), comm_time)
    else:
        out["comm_pct"] = 0.0
    return out


def _kernel_mix(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    names, name, dur = t.names, t.name, t.dur
    compute_us = 0.0
    gemm: Counter[str] = Counter()
    layout_us = 0.0
    comm_us = 0.0
    for i in ctx.device:
        if t.kind[i] != K_KERNEL:
            continue
        n = names[name[i]]
        if kn.is_communication(n):
            comm_us += dur[i]
            continue
        compute_us += dur[i]
        prec = kn.gemm_precision(n)
        if prec is not None:
            gemm[prec] += dur[i]
        elif kn.is_layout_transform(n):
            layout_us += dur[i]
    if compute_us <= 0:
        return {}
    gemm_us = sum(gemm.values())
    out: dict[str, FactValue] = {
        "compute_kernel_ms": round(compute_us / 1000.0, 3),
        "gemm_time_pct": _pct(gemm_us, compute_us),
        "layout_transform_pct": _pct(layout_us, compute_us),
    }
    if gemm_us > 0:
        out["gemm_fp32_simt_pct"] = _pct(gemm[kn.FP32_SIMT], gemm_us)
        out["gemm_tf32_pct"] = _pct(gemm[kn.TF32], gemm_us)
        out["gemm_lowp_pct"] = _pct(gemm[kn.LOW_PRECISION], gemm_us)
        out["gemm_unknown_pct"] = _pct(gemm[kn.UNKNOWN], gemm_us)
    if ctx.n_steps:
        out["layout_transform_ms_per_step"] = round(layout_us / 1000.0 / ctx.n_steps, 3)
        out["comm_ms_per_step"] = round(comm_us / 1000.0 / ctx.n_steps, 3)
    return out


def _launches(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    kernels = [i for i in ctx.device if t.kind[i] == K_KERNEL]
    if not kernels:
        return {}
    durs = sorted(t.dur[i] for i in kernels)
    delays = []
    for i in kernels:
        launch = ctx.launch_by_corr.get(t.correlation[i])
        if launch is not None:
            delays.append(t.ts[i] - t.ts[launch])
    out: dict[str, FactValue] = {
        "kernel_count": len(kernels),
        "kernel_p50_us": _r(statistics.median(durs)),
        "small_kernel_pct": _pct(sum(1 for d in durs if d < SMALL_KERNEL_US), len(durs)),
        "launch_delay_p50_us": _r(statistics.median(delays)) if delays else None,
    }
    if ctx.n_steps:
        in_steps = sum(1 for i in kernels if ctx.step_of_device(t, i) is not None)
        out["kernels_per_step"] = round(in_steps / ctx.n_steps, 1)
    out.update(_idle_breakdown(t, ctx))
    return out


def _idle_breakdown(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    """HTA-style idle breakdown: a gap is host wait when the next work was launched after it began."""
    order = sorted(ctx.device, key=lambda i: t.ts[i])
    host_wait = kernel_wait = 0.0
    busy_until = None
    for i in order:
        start, end = t.ts[i], t.ts[i] + t.dur[i]
        if busy_until is not None and start > busy_until:
            gap = start - busy_until
            launch = ctx.launch_by_corr.get(t.correlation[i])
            if launch is not None and t.ts[launch] + t.dur[launch] > busy_until:
                host_wait += gap
            else:
                kernel_wait += gap
        busy_until = end if busy_until is None else max(busy_until, end)
    idle = host_wait + kernel_wait
    if idle <= 0:
        return {"host_wait_pct": 0.0}
    return {"host_wait_pct": _pct(host_wait, idle), "kernel_wait_pct": _pct(kernel_wait, idle)}


def _gaps(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    busy = merge((t.ts[i], t.ts[i] + t.dur[i]) for i in ctx.device)
    if len(busy) < 1:
        return {}
    gaps = [b[0] - a[1] for a, b in zip(busy, busy[1:])]
    long_gaps = [g for g in gaps if g > LONG_GAP_US]
    return {
        "max_gpu_gap_ms": round(max(gaps, default=0.0) / 1000.0, 3),
        "gpu_gaps_over_100ms": len(long_gaps),
        "gpu_gap_total_ms": round(sum(long_gaps) / 1000.0, 3),
    }


def _dataloader(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    ops = ctx.host_ops(t, lambda n: n.startswith("enumerate(DataLoader)") and "__next__" in n)
    step_total = sum(b - a for _, a, b in ctx.steps)
    if not ops:
        return {"dataloader_pct": 0.0, "dataloader_ms_per_step": 0.0}
    dl = total(merge((t.ts[i], t.ts[i] + t.dur[i]) for i in ops))
    return {"dataloader_pct": _pct(dl, step_total),
            "dataloader_ms_per_step": round(dl / 1000.0 / ctx.n_steps, 3)}


def _outer_aten_ops(t: EventTable, ctx: _Context) -> dict[int, tuple[list[float], list[int]]]:
    """Per thread: start times and indices of outermost ``aten::`` ops, for bisecting."""
    out: dict[int, tuple[list[float], list[int]]] = {}
    for thread, idx in ctx.aten_by_thread.items():
        idx.sort(key=lambda i: (t.ts[i], -t.dur[i]))
        starts: list[float] = []
        outer: list[int] = []
        end = float("-inf")
        for i in idx:
            if t.ts[i] >= end:
                outer.append(i)
                starts.append(t.ts[i])
                end = t.ts[i] + t.dur[i]
        out[thread] = (starts, outer)
    return out


def _syncs_and_copies(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    names = t.names
    outer = _outer_aten_ops(t, ctx)
    syncs = 0
    sync_us = 0.0
    kinds: Counter[str] = Counter()
    copy_syncs = 0
    copies = _memcpy_launches(t, ctx)
    for i in ctx.sync_calls:
        n = names[t.name[i]]
        if not ctx.in_steps(t.ts[i]):
            continue
        starts, ops = outer.get(t.thread[i], ([], []))
        k = bisect.bisect_right(starts, t.ts[i]) - 1
        op = ops[k] if k >= 0 and t.ts[i] <= t.ts[ops[k]] + t.dur[ops[k]] else None
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
    memcpy = [i for i in ctx.device if t.kind[i] == K_MEMCPY and ctx.step_of_device(t, i) is not None]
    pageable = [i for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD (Pageable")]
    dtoh = [i for i in memcpy if names[t.name[i]].startswith("Memcpy DtoH")]
    return {
        "host_syncs_per_step": round(syncs / n, 2),
        "host_sync_ms_per_step": round(sync_us / 1000.0 / n, 3),
        "host_sync_pct": _pct(sync_us, step_us),
        "host_sync_kinds": ", ".join(f"{k}×{v}" for k, v in kinds.most_common(4)) or "none",
        "copy_syncs_per_step": round(copy_syncs / n, 2),
        "dtoh_copies_per_step": round(len(dtoh) / n, 2),
        "h2d_copies_per_step": round(sum(1 for i in memcpy if names[t.name[i]].startswith("Memcpy HtoD")) / n, 2),
        "pageable_h2d_per_step": round(len(pageable) / n, 2),
        "pageable_h2d_mb_per_step": round(sum(max(t.nbytes[i], 0) for i in pageable) / 1e6 / n, 3),
        "pageable_h2d_ms_per_step": round(sum(t.dur[i] for i in pageable) / 1000.0 / n, 3),
    }


def _memcpy_launches(t: EventTable, ctx: _Context) -> dict[int, tuple[list[float], list[str]]]:
    """Per host thread: launch times of GPU memcpys and their direction (``HtoD``, ``DtoH`` …)."""
    rows: dict[int, list[tuple[float, str]]] = {}
    for i in ctx.device:
        if t.kind[i] != K_MEMCPY:
            continue
        launch = ctx.launch_by_corr.get(t.correlation[i])
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


def _optimizer(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    ops = ctx.host_ops(t, lambda n: n.startswith("Optimizer.step#"))
    if not ops:
        return {}
    spans = sorted((t.ts[i], t.ts[i] + t.dur[i], t.thread[i]) for i in ops)
    span_starts = [a for a, _, _ in spans]
    launched = 0
    multi = 0
    for i in ctx.device:
        if t.kind[i] != K_KERNEL:
            continue
        launch = ctx.launch_by_corr.get(t.correlation[i])
        if launch is None:
            continue
        lt, th = t.ts[launch], t.thread[launch]
        k = bisect.bisect_right(span_starts, lt) - 1
        if k >= 0 and lt <= spans[k][1] and spans[k][2] == th:
            launched += 1
            multi += kn.is_multi_tensor(t.names[t.name[i]])
    n = ctx.n_steps
    return {
        "optimizer_kernels_per_step": round(launched / n, 1),
        "optimizer_multi_tensor_kernels_per_step": round(multi / n, 1),
        "optimizer_ms_per_step": round(sum(b - a for a, b, _ in spans) / 1000.0 / n, 3),
    }


def _compile(t: EventTable, ctx: _Context) -> dict[str, FactValue]:
    regions = ctx.host_ops(t, lambda n: n.startswith("Torch-Compiled Region"))
    if not regions:  # nothing compiled: no graph can break or recompile
        return {"compiled_graphs_per_step": 0.0, "recompiled_frames": 0, "compiles_in_steps": 0}
    names = t.names
    fx_calls = ctx.host_ops(t, lambda n: n.startswith("## Call CompiledFxGraph"))
    frames = {names[t.name[i]].split(":", 1)[-1].strip().split("/")[0] for i in regions}
    recompiled = {names[t.name[i]] for i in regions if not names[t.name[i]].rstrip().endswith("/0")}
    compile_ops = ctx.host_ops(t, lambda n: any(w in n for w in _COMPILE_WORK))
    n = ctx.n_steps
    return {
        "compiled_graphs_per_step": round(len(regions) / n, 2),
        "compiled_frames": len(frames),
        "compiled_fx_graph_calls_per_step": round(len(fx_calls) / n, 2),
        "recompiled_frames": len(recompiled),
        "compiles_in_steps": len(compile_ops),
        "compile_ms_in_steps": round(sum(t.dur[i] for i in compile_ops) / 1000.0, 3),
    }


def _memory(trace: RankTrace) -> dict[str, FactValue]:
    """Peak CUDA memory from the profiler's memory events (``profile_memory=True``)."""
    t = trace.events
    if not t.memory_allocated:
        return {}
    allocated = max(t.memory_allocated)
    reserved = max(t.memory_reserved, default=-1.0)
    out: dict[str, FactValue] = {"mem_peak_mib": round(allocated / 2**20, 1)}
    if reserved > 0:
        out["mem_reserved_peak_mib"] = round(reserved / 2**20, 1)
    if trace.device_memory_bytes:
        out["mem_total_mib"] = round(trace.device_memory_bytes / 2**20, 1)
        out["mem_peak_used_mib"] = round(max(allocated, reserved) / 2**20, 1)
        out["mem_peak_pct"] = _pct(max(allocated, reserved), trace.device_memory_bytes)
    return out


def _step_rows(t: EventTable, ctx: _Context) -> list[dict[str, Any]]:
    if not ctx.steps:
        return []
    busy: list[list[tuple[float, float]]] = [[] for _ in ctx.steps]
    kernels = [0] * ctx.n_steps
    for i in ctx.device:
        k = ctx.step_of_device(t, i)
        if k is not None:
            busy[k].append((t.ts[i], t.ts[i] + t.dur[i]))
            kernels[k] += t.kind[i] == K_KERNEL
    dl = [0.0] * ctx.n_steps
    for i in ctx.host_ops(t, lambda n: n.startswith("enumerate(DataLoader)")):
        k = ctx.step_of(t.ts[i])
        if k is not None:
            dl[k] += t.dur[i]
    rows = []
    for k, (num, a, b) in enumerate(ctx.steps):
        span = b - a
        rows.append({
            "step": num,
            "step_time_ms": round(span / 1000.0, 3),
            "dataloader_ms": round(dl[k] / 1000.0, 3),
            "gpu_busy_ms": round(total(merge(busy[k])) / 1000.0, 3),
            "kernels": kernels[k],
        })
    return rows


def _collectives(t: EventTable, ctx: _Context) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for i in ctx.device:
        if t.kind[i] == K_KERNEL and kn.is_communication(t.names[t.name[i]]):
            out.setdefault(t.names[t.name[i]], []).append(t.ts[i])
    return out


__all__ = ["K_GPU_ANNOTATION", "RankMetrics", "compute_rank_metrics"]
