"""Per-rank performance metrics from one trace: the numbers every trace rule is judged on.

Why this exists: rules need plain, unit-named numbers (``idle_pct``, ``dataloader_pct``,
``gemm_fp32_simt_pct`` …); HTA gives some of them as tables and no verdicts. Here each metric is
computed once per rank from the columnar :class:`~gpudoctor.trace.reader.EventTable`, with HTA's
definitions where HTA has one (temporal breakdown, comm/compute overlap — both tested against HTA's
numbers), and per ``ProfilerStep#N`` where steps exist. The idle-time split into host wait / kernel
wait is HTA-like but over all streams merged, not HTA's per-stream table. A metric that the trace cannot support is ``None`` (the
engine then reports "not evaluated"), never 0.

What it must not do: read files, know rule thresholds, or import anything heavy (numpy only through
:func:`.vectorized.numpy_for`, for a table of ≥ 1 M events).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from gpudoctor.quantiles import median
from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.attention import attention_metrics
from gpudoctor.trace.bottleneck import bottleneck_metrics
from gpudoctor.trace.comm import hta_type_arrays, hta_type_spans
from gpudoctor.trace.context import HOST_KINDS, Context, pct, rounded
from gpudoctor.trace.fusion import fusion_metrics
from gpudoctor.trace.gaps import gap_metrics
from gpudoctor.trace.reader import (
    K_GPU_ANNOTATION,
    K_KERNEL,
    EventTable,
    RankTrace,
)
from gpudoctor.trace.steps import (
    compile_metrics,
    dataloader_metrics,
    optimizer_metrics,
    step_rows,
    sync_and_copy_metrics,
)
from gpudoctor.trace.timeline import (
    end_times,
    graph_recording_steps,
    hta_device_arrays,
    hta_device_events,
    intersection_length,
    merge,
    plausible_steps,
    step_spans,
    total,
)
from gpudoctor.trace.vectorized import Ints, numpy_for

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue

SMALL_KERNEL_US = 10.0
#: Steps that must remain after leaving out the leading CUDA-graph recording steps (else all are kept:
#: a loop that records in most steps is what it is, not warming up).
MIN_STEADY_STEPS = 2
#: Runtime calls that replay a captured CUDA graph.
_GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "hipGraphLaunch"})
#: host-side events during which the rank is blocked in (or running) a collective: the process
#: group's own annotations (``gloo:all_reduce``, ``nccl:all_reduce`` …), the ``c10d::`` ops
#: (``c10d::allreduce_`` …) and ``record_param_comms``.
HOST_COLLECTIVE_RE = re.compile(r"^(gloo|nccl|mpi|ucc|xccl):|^c10d::|^record_param_comms$")

class RankMetrics(msgspec.Struct):
    """Everything measured on one rank: facts for the rules, rows for the tables."""

    rank: int
    values: dict[str, FactValue]
    step_rows: list[dict[str, Any]] = msgspec.field(default_factory=list)
    collectives: dict[str, list[float]] = msgspec.field(default_factory=dict)  # kernel name → start times (µs)


def compute_rank_metrics(trace: RankTrace, processes: int = 1) -> RankMetrics:
    """All metrics of one rank's trace.

    ``processes=2`` (one trace read, a second core allowed): on a trace of at least
    :data:`BESIDE_MIN_EVENTS` events, a forked child computes the fusion and step-picture metrics
    while this process computes the rest (:class:`_Beside`); the values are the same, in the same
    order, as in one process.
    """
    t = trace.events
    values: dict[str, FactValue] = {"trace_events": len(t)}
    steps, implausible = plausible_steps(step_spans(t))
    trace.notes.extend(f"rank {trace.rank}: {note}" for note in implausible)
    # Steps that record CUDA graphs are warm-up, not the loop: left out when at least two others remain
    recording = graph_recording_steps(t, steps)
    if recording and len(steps) - recording < MIN_STEADY_STEPS:
        recording = 0
    values["cuda_graph_recording_steps_left_out"] = recording
    if recording:
        trace.notes.append(f"rank {trace.rank}: the first {recording} of {len(steps)} profiled steps recorded CUDA "
                           f"graphs (cudaGraphInstantiate, CUDAGraphNode.record) and are left out of the step "
                           f"times, the step picture and the estimates; the other {len(steps) - recording} replay them.")
        steps = steps[recording:]
    values["step_count"] = len(steps) or None
    values["has_steps"] = bool(steps)
    beside = _Beside.start(trace, steps) if processes >= 2 and len(t) >= BESIDE_MIN_EVENTS else None
    values.update(_temporal(t))
    if steps:
        durations = [(b - a) / 1000.0 for _, a, b in steps]
        values["step_time_p50_ms"] = rounded(median(durations))
        # the mean, which per-step means (DataLoader, syncs …) are shares of; on a trace without GPU work too
        values["profiled_step_ms"] = rounded(sum(b - a for _, a, b in steps) / 1000.0 / len(steps))
        values["step_time_max_ms"] = rounded(max(durations))
    ctx = Context(t, steps)
    values.update(_kernel_mix(t, ctx))
    values.update(_launches(t, ctx))
    values.update(gap_metrics(t, ctx))
    if beside is None:
        values.update(fusion_metrics(t, ctx))  # torch.compile / CUDA-graph / autocast-cast time
    head = len(values)  # where the fusion metrics go when the child computes them
    rows = step_rows(t, ctx)
    if steps:
        values.update(dataloader_metrics(t, ctx))
        values.update(sync_and_copy_metrics(t, ctx))
        values.update(optimizer_metrics(t, ctx))
        values.update(compile_metrics(t, ctx))
        values.update(attention_metrics(t, ctx))
        for row, ops in zip(rows, aten_ops_per_step(t, ctx)):
            row["aten_ops"] = ops  # same work or more work: GD601's post-hoc cause
        per_step = outside_collective_steps(t, ctx)
        if per_step:  # per step too: GD601 post-hoc asks whether a rank is slower in most steps
            values["outside_collective_ms_p50"] = rounded(median(out for _, out in per_step))
            values["collective_wait_ms_p50"] = rounded(median(wait for wait, _ in per_step))
            for row, (wait, out) in zip(rows, per_step):
                row["collective_wait_ms"], row["outside_collective_ms"] = round(wait, 3), round(out, 3)
    values.update(_memory(trace))
    collectives = _collectives(t, ctx)
    if beside is None:
        values.update(bottleneck_metrics(t, ctx, trace.compute_major, trace.device_name))
    else:
        fusion, picture = beside.result()
        items = list(values.items())
        values = dict(items[:head])
        values.update(fusion)
        values.update(items[head:])
        values.update(picture)
    if values.get("gpu_paced_steps"):
        trace.notes.append(f"rank {trace.rank}: the kernels of the profiled steps ran up to "
                           f"{values['gpu_behind_host_ms']:.0f} ms after the last step's host span ended (the "
                           f"loop had queued ahead of the GPU): the step picture and the estimates follow each "
                           f"step's kernels on the GPU ({values['step_time_ms']:.1f} ms per step), not its "
                           f"{values['profiled_step_ms']:.1f} ms host span.")
    return RankMetrics(trace.rank, values, rows, collectives)


#: Events from which a second process computing part of the metrics saves more than forking costs
#: (docs/bench-history.md, "One trace on two cores").
BESIDE_MIN_EVENTS = 100_000


class _Beside:
    """The fusion and step-picture metrics of one trace, computed by a forked child meanwhile.

    They are the two largest independent groups (~45% of the metrics on df_index_resolver) and read
    only the table and a :class:`Context`. The child is forked before anything is computed and
    builds its own context and look-ups (each process fills its own: nothing crosses between them
    but the result, two small dicts), so that neither waits for the other. Not started where the
    process may not fork (other threads).
    """

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    def start(cls, trace: RankTrace, steps: list[tuple[int, float, float]]) -> _Beside | None:
        from gpudoctor.forkpool import ForkPool, can_fork

        if not can_fork():
            return None
        t = trace.events

        def both() -> tuple[dict[str, FactValue], dict[str, FactValue]]:
            ctx = Context(t, steps)
            return (fusion_metrics(t, ctx),
                    bottleneck_metrics(t, ctx, trace.compute_major, trace.device_name))

        return cls(ForkPool(both, [()], 1))

    def result(self) -> tuple[dict[str, FactValue], dict[str, FactValue]]:
        """The child's two dicts (its exceptions raised here; :class:`WorkerDied` if it died)."""
        try:
            out: tuple[dict[str, FactValue], dict[str, FactValue]] = self._pool.results()[0]
            return out
        finally:
            self._pool.close()


def _temporal(t: EventTable) -> dict[str, FactValue]:
    np = numpy_for(t)
    if np is not None:
        return _temporal_np(np, t)
    sel = hta_device_events(t)
    if not sel.index:
        return {}
    everything = merge(zip(sel.start, sel.end))
    kernel_time = everything[-1][1] - everything[0][0]
    if kernel_time <= 0:
        return {}
    busy = total(everything)
    by_type = hta_type_spans(t)
    comp = by_type.get(kn.COMPUTATION, [])
    comm = by_type.get(kn.COMMUNICATION, [])
    mem = by_type.get(kn.MEMORY, [])
    compute_time = total(comp)
    idle = kernel_time - busy
    out: dict[str, FactValue] = {
        "kernel_time_us": round(kernel_time, 1),
        "idle_pct": pct(idle, kernel_time),
        "compute_pct": pct(compute_time, kernel_time),
        "non_compute_pct": pct(kernel_time - compute_time - idle, kernel_time),
        "memory_pct": pct(total(mem), kernel_time),
        "last_step_dropped": sel.dropped_last_step,
    }
    if comm:
        comm_time = total(comm)
        out["comm_pct"] = pct(comm_time, kernel_time)
        out["overlap_pct"] = pct(intersection_length(comm, comp), comm_time)
    else:
        out["comm_pct"] = 0.0
    return out


def _temporal_np(np: Any, t: EventTable) -> dict[str, FactValue]:
    """The numpy path of :func:`_temporal`."""
    sel = hta_device_arrays(np, t)
    if not len(sel.index):
        return {}
    starts, ends = vectorized.merge(sel.start, sel.end)
    kernel_time = float(ends[-1] - starts[0])
    if kernel_time <= 0:
        return {}
    busy = vectorized.total(starts, ends)
    by_type = hta_type_arrays(np, t)
    nothing = (starts[:0], ends[:0])
    comp = by_type.get(kn.COMPUTATION, nothing)
    comm = by_type.get(kn.COMMUNICATION, nothing)
    compute_time = vectorized.total(*comp)
    idle = kernel_time - busy
    out: dict[str, FactValue] = {
        "kernel_time_us": round(kernel_time, 1),
        "idle_pct": pct(idle, kernel_time),
        "compute_pct": pct(compute_time, kernel_time),
        "non_compute_pct": pct(kernel_time - compute_time - idle, kernel_time),
        "memory_pct": pct(vectorized.total(*by_type.get(kn.MEMORY, nothing)), kernel_time),
        "last_step_dropped": sel.dropped_last_step,
    }
    if len(comm[0]):
        comm_time = vectorized.total(*comm)
        out["comm_pct"] = pct(comm_time, kernel_time)
        out["overlap_pct"] = pct(vectorized.intersection_length(*comm, *comp), comm_time)
    else:
        out["comm_pct"] = 0.0
    return out


def _kernel_classes_np(np: Any, t: EventTable, ctx: Context) -> tuple[Any, Any, Any, list[str]]:
    """Per name id, from ``ctx.kernel_classes``: communication (bool), precision (index into the
    returned list of precisions, -1 for none), layout transform (bool)."""
    classes = ctx.kernel_classes(t)
    comm = np.zeros(len(t.names), dtype=bool)
    layout = np.zeros(len(t.names), dtype=bool)
    prec = np.full(len(t.names), -1, dtype=np.int64)
    precisions = sorted({info.precision for info in classes.values() if info.precision is not None})
    for nid, info in classes.items():
        comm[nid], layout[nid] = info.communication, info.layout_transform
        if info.precision is not None:
            prec[nid] = precisions.index(info.precision)
    return comm, prec, layout, precisions


def _kernel_mix(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    np = numpy_for(t)
    if np is not None:
        return _kernel_mix_np(np, t, ctx)
    name, dur, kind = t.name, t.dur, t.kind
    classes = ctx.kernel_classes(t)
    compute_us = 0.0
    gemm: Counter[str] = Counter()
    layout_us = 0.0
    comm_us = 0.0
    for i in ctx.device:
        if kind[i] != K_KERNEL:
            continue
        info = classes[name[i]]
        if info.communication:
            comm_us += dur[i]
            continue
        compute_us += dur[i]
        prec = info.precision
        if prec is not None:
            gemm[prec] += dur[i]
        elif info.layout_transform:
            layout_us += dur[i]
    if compute_us <= 0:
        return {}
    return _kernel_mix_facts(compute_us, gemm, layout_us, comm_us, ctx.n_steps)


def _kernel_mix_facts(compute_us: float, gemm: Mapping[str, float], layout_us: float, comm_us: float,
                      n_steps: int) -> dict[str, FactValue]:
    """The kernel-mix facts from their sums (one place for both paths of :func:`_kernel_mix`); ``gemm``:
    µs per GEMM precision, in the order the kernels first meet each."""
    gemm_us = sum(gemm.values())
    out: dict[str, FactValue] = {
        "compute_kernel_ms": round(compute_us / 1000.0, 3),
        "gemm_time_pct": pct(gemm_us, compute_us),
        "layout_transform_pct": pct(layout_us, compute_us),
    }
    if gemm_us > 0:
        out["gemm_fp32_simt_pct"] = pct(gemm.get(kn.FP32_SIMT, 0.0), gemm_us)
        out["gemm_tf32_pct"] = pct(gemm.get(kn.TF32, 0.0), gemm_us)
        out["gemm_lowp_pct"] = pct(gemm.get(kn.LOW_PRECISION, 0.0), gemm_us)
        out["gemm_unknown_pct"] = pct(gemm.get(kn.UNKNOWN, 0.0), gemm_us)
    if n_steps:
        out["layout_transform_ms_per_step"] = round(layout_us / 1000.0 / n_steps, 3)
        out["comm_ms_per_step"] = round(comm_us / 1000.0 / n_steps, 3)
    return out


def _kernel_mix_np(np: Any, t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """The numpy path of :func:`_kernel_mix`: each sum over its kernels in event order."""
    kernels = vectorized.kind_positions(t, (K_KERNEL,))
    is_comm, prec, layout, precisions = _kernel_classes_np(np, t, ctx)
    name, dur = vectorized.column(t, "name")[kernels], vectorized.column(t, "dur")[kernels]
    comm = is_comm[name]
    compute = ~comm
    compute_us = vectorized.ordered_sum(dur[compute])
    if compute_us <= 0:
        return {}
    comm_us = vectorized.ordered_sum(dur[comm])
    precision = np.where(compute, prec[name], -1)
    layout_us = vectorized.ordered_sum(dur[compute & (precision < 0) & layout[name]])
    found, first = np.unique(precision[precision >= 0], return_index=True)
    gemm: dict[str, float] = {}
    for p in found[np.argsort(first)].tolist():  # the keys in the order the pure loop meets them
        gemm[precisions[p]] = vectorized.ordered_sum(dur[precision == p])
    return _kernel_mix_facts(compute_us, gemm, layout_us, comm_us, ctx.n_steps)


def _launches(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    np = numpy_for(t)
    if np is not None:
        return _launches_np(np, t, ctx)
    kind, ts, dur = t.kind, t.ts, t.dur
    kernels = [i for i in ctx.device if kind[i] == K_KERNEL]
    if not kernels:
        return {}
    durs = sorted([dur[i] for i in kernels])
    launches = ctx.device_launches(t)
    delays = [ts[i] - ts[launches[i]] for i in kernels if i in launches]
    out: dict[str, FactValue] = {
        "kernel_count": len(kernels),
        "kernel_p50_us": rounded(median(durs)),
        "small_kernel_pct": pct(bisect.bisect_left(durs, SMALL_KERNEL_US), len(durs)),  # durs ascend
        "launch_delay_p50_us": rounded(median(delays)) if delays else None,
    }
    if ctx.n_steps:
        in_steps = [kind[i] for i in ctx.device_steps(t)].count(K_KERNEL)
        out["kernels_per_step"] = round(in_steps / ctx.n_steps, 1)
        graph_ids = [i for i, n in enumerate(t.names) if n in _GRAPH_LAUNCHES]
        replays = sum(1 for i in t.positions_of(graph_ids) if ctx.in_steps(ts[i])) if graph_ids else 0
        out["cuda_graph_launches_per_step"] = round(replays / ctx.n_steps, 1)
    out.update(_idle_breakdown(t, ctx))
    return out


def _launches_np(np: Any, t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """The numpy path of :func:`_launches`."""
    kernels = vectorized.kind_positions(t, (K_KERNEL,))
    if not len(kernels):
        return {}
    ts = vectorized.column(t, "ts")
    durs = np.sort(vectorized.column(t, "dur")[kernels])
    device = ctx.device_array(t)
    is_kernel = vectorized.column(t, "kind")[device] == K_KERNEL
    launch = ctx.device_launch_array(t)[is_kernel]
    launched = launch >= 0
    delays = ts[kernels[launched]] - ts[launch[launched]]
    out: dict[str, FactValue] = {
        "kernel_count": len(kernels),
        "kernel_p50_us": rounded(vectorized.median(durs)),
        "small_kernel_pct": pct(int(np.searchsorted(durs, SMALL_KERNEL_US, side="left")), len(durs)),
        "launch_delay_p50_us": rounded(vectorized.median(delays)) if len(delays) else None,
    }
    if ctx.n_steps:
        in_steps = int(np.count_nonzero(ctx.device_step_array(t)[is_kernel] >= 0))
        out["kernels_per_step"] = round(in_steps / ctx.n_steps, 1)
        graph_ids = [i for i, n in enumerate(t.names) if n in _GRAPH_LAUNCHES]
        replays = sum(1 for i in t.positions_of(graph_ids) if ctx.in_steps(t.ts[i])) if graph_ids else 0
        out["cuda_graph_launches_per_step"] = round(replays / ctx.n_steps, 1)
    out.update(_idle_breakdown(t, ctx))
    return out


def _idle_breakdown(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """HTA-style idle breakdown: a gap is host wait when the next work was launched after it began."""
    np = numpy_for(t)
    if np is not None:
        return _idle_breakdown_np(np, t, ctx)
    ts, end = t.ts, end_times(t)
    order = sorted(ctx.device, key=ts.__getitem__)
    launches = ctx.device_launches(t)
    host_wait = kernel_wait = 0.0
    busy_until = None
    for i in order:
        start = ts[i]
        if busy_until is not None and start > busy_until:
            gap = start - busy_until
            launch = launches.get(i)
            if launch is not None and end[launch] > busy_until:
                host_wait += gap
            else:
                kernel_wait += gap
        finish = end[i]
        if busy_until is None or finish > busy_until:
            busy_until = finish
    idle = host_wait + kernel_wait
    if idle <= 0:
        return {"host_wait_pct": 0.0}
    return {"host_wait_pct": pct(host_wait, idle), "kernel_wait_pct": pct(kernel_wait, idle)}


def _idle_breakdown_np(np: Any, t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """The numpy path of :func:`_idle_breakdown`: the pure loop's ``busy_until`` before each event is
    the running maximum of the earlier ends; each kind of wait is added in time order."""
    device = ctx.device_array(t)
    if not len(device):
        return {"host_wait_pct": 0.0}
    ts, end = vectorized.column(t, "ts"), vectorized.ends(t)
    order = np.argsort(ts[device], kind="stable")
    events, launch = device[order], ctx.device_launch_array(t)[order]
    start = ts[events][1:]
    busy_until = np.maximum.accumulate(end[events])[:-1]
    waited = start > busy_until
    gap = (start - busy_until)[waited]
    launch, busy_until = launch[1:][waited], busy_until[waited]
    host = launch >= 0
    host[host] = end[launch[host]] > busy_until[host]
    host_wait, kernel_wait = vectorized.ordered_sum(gap[host]), vectorized.ordered_sum(gap[~host])
    idle = host_wait + kernel_wait
    if idle <= 0:
        return {"host_wait_pct": 0.0}
    return {"host_wait_pct": pct(host_wait, idle), "kernel_wait_pct": pct(kernel_wait, idle)}


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
        out["mem_peak_pct"] = pct(max(allocated, reserved), trace.device_memory_bytes)
    return out


def aten_ops_per_step(t: EventTable, ctx: Context) -> list[int]:
    """Host ``aten::`` ops started in each step (nested ones included): how much work a rank did.

    Two ranks of one job that run the same ops the same number of times do the same work; if one
    takes longer, the same work ran slower (CPU contention, a slower GPU) rather than extra work.
    """
    np = numpy_for(t)
    if np is not None:
        return _aten_ops_per_step_np(np, t, ctx)
    counts = [0] * ctx.n_steps
    starts, ends = ctx.step_starts, [b for _, _, b in ctx.steps]
    nexts = [*starts[1:], float("inf")]
    for ops in ctx.aten_by_thread.values():
        # An op counts for the last step that starts at or before it (ctx.step_of), if it starts by
        # that step's end: counted over the ops' sorted start times by two bisections per step.
        when = sorted(map(t.ts.__getitem__, ops))
        for k, (a, b, nxt) in enumerate(zip(starts, ends, nexts)):
            first = bisect.bisect_left(when, a)
            last = bisect.bisect_right(when, b) if b < nxt else bisect.bisect_left(when, nxt)
            if last > first:
                counts[k] += last - first
    return counts


def _aten_ops_per_step_np(np: Any, t: EventTable, ctx: Context) -> list[int]:
    """The numpy path of :func:`aten_ops_per_step`: the threads' ops counted together (a step's
    count is the sum of its per-thread counts, and each of those is a count of sorted times)."""
    if not ctx.n_steps:
        return []
    ops = [np.array(idx, dtype=np.int64) for idx in ctx.aten_by_thread.values()]
    if not ops:
        return [0] * ctx.n_steps
    when = np.sort(vectorized.column(t, "ts")[np.concatenate(ops)])
    starts, ends = ctx.step_start_array(), ctx.step_end_array()
    nexts = np.append(starts[1:], np.inf)
    first = np.searchsorted(when, starts, side="left")
    last = np.where(ends < nexts, np.searchsorted(when, ends, side="right"), np.searchsorted(when, nexts, side="left"))
    counts: list[int] = np.maximum(last - first, 0).tolist()
    return counts


def outside_collective_steps(t: EventTable, ctx: Context) -> list[tuple[float, float]]:
    """Per step: (time blocked in collectives, time outside them = step time − that), in ms.

    In synchronous data parallelism every rank's step time is the same — the fast ranks wait in the
    all-reduce for the slow one — so the time a rank spends *outside* collective waits is what
    tells a slow rank apart (the live side scores the same way). Time in collectives per step is
    the larger of two measures, both clipped to the step: the union of the host-side collective
    events (:data:`HOST_COLLECTIVE_RE`; on gloo these span the whole exchange, peer wait included)
    and the union of the communication kernels launched in that step (NCCL on the GPU: the kernel
    runs, spinning, until every peer has joined). Empty when the trace shows no collective at all.
    """
    if not ctx.n_steps:
        return []
    coll_names = {i for i, n in enumerate(t.names) if HOST_COLLECTIVE_RE.search(n)}
    host: list[list[tuple[float, float]]] = [[] for _ in range(ctx.n_steps)]
    device: list[list[tuple[float, float]]] = [[] for _ in range(ctx.n_steps)]
    found = False
    if coll_names:
        starts = ctx.step_starts
        disjoint = all(b <= a2 for (_, _, b), (_, a2, _) in zip(ctx.steps, ctx.steps[1:]))
        stream, kind, ts, ends, steps = t.stream, t.kind, t.ts, end_times(t), ctx.steps
        bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right
        for i in t.positions_of(coll_names):
            if stream[i] >= 0 or kind[i] not in HOST_KINDS:
                continue
            begin, end = ts[i], ends[i]
            # only the steps that can overlap [begin, end]: from the one holding begin to the last starting before end
            first = bisect_right(starts, begin) - 1 if disjoint else 0
            for k in range(first if first > 0 else 0, bisect_left(starts, end)):
                _, a, b = steps[k]
                clipped_start = begin if begin > a else a  # max(a, begin), without the call
                clipped_end = end if end < b else b        # min(b, end)
                if clipped_end > clipped_start:
                    host[k].append((clipped_start, clipped_end))
                    found = True
    comm_ids = _communication_ids(t, ctx)
    np = numpy_for(t) if comm_ids else None
    if np is not None:
        found = _communication_spans_np(np, t, ctx, comm_ids, device) or found
    elif comm_ids:  # no communication kernel: no device event to look at
        kind, name, ts, dur, step_of = t.kind, t.name, t.ts, t.dur, ctx.device_steps(t)
        for i in ctx.device:
            if kind[i] != K_KERNEL or name[i] not in comm_ids:
                continue
            step = step_of.get(i)
            if step is not None:
                device[step].append((ts[i], ts[i] + dur[i]))
                found = True
    if not found:
        return []
    out = []
    for k, (_, a, b) in enumerate(ctx.steps):
        wait = max(total(merge(host[k])), total(merge(device[k])))
        out.append((wait / 1000.0, max(0.0, (b - a) - wait) / 1000.0))
    return out


def _communication_spans_np(np: Any, t: EventTable, ctx: Context, comm_ids: set[int],
                            device: list[list[tuple[float, float]]]) -> bool:
    """The numpy path of :func:`outside_collective_steps`' device side: the communication kernels
    found by arrays, then appended to their steps' lists (in event order); whether there was one."""
    among, kernels = _communication_kernels_np(np, t, ctx, comm_ids)
    step = ctx.device_step_array(t)[among]
    kernels = kernels[step >= 0]
    begins = vectorized.column(t, "ts")[kernels]
    finishes = begins + vectorized.column(t, "dur")[kernels]
    for k, a, b in zip(step[step >= 0].tolist(), begins.tolist(), finishes.tolist()):
        device[k].append((a, b))
    return bool(len(kernels))


def _communication_ids(t: EventTable, ctx: Context) -> set[int]:
    """Name ids of the device events that are communication kernels (NCCL/RCCL)."""
    return {nid for nid, info in ctx.kernel_classes(t).items() if info.communication}


def _communication_kernels_np(np: Any, t: EventTable, ctx: Context, comm_ids: set[int]) -> tuple[Ints, Ints]:
    """The communication kernels (kernels named one of ``comm_ids``), ascending: their positions
    among ``ctx.device_array``'s device events, and their event indices."""
    device = ctx.device_array(t)
    named = np.zeros(len(t.names), dtype=bool)
    named[list(comm_ids)] = True
    k = np.flatnonzero((vectorized.column(t, "kind")[device] == K_KERNEL) & named[vectorized.column(t, "name")[device]])
    return k, device[k]


def _collectives(t: EventTable, ctx: Context) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    comm_ids = _communication_ids(t, ctx)
    if not comm_ids:
        return out
    np = numpy_for(t)
    if np is not None:
        return _collectives_np(np, t, ctx, comm_ids)
    kind, name, names, ts = t.kind, t.name, t.names, t.ts
    for i in ctx.device:
        if kind[i] == K_KERNEL and name[i] in comm_ids:
            out.setdefault(names[name[i]], []).append(ts[i])
    return out


def _collectives_np(np: Any, t: EventTable, ctx: Context, comm_ids: set[int]) -> dict[str, list[float]]:
    """The numpy path of :func:`_collectives`: per name, in the order the names first occur."""
    _, kernels = _communication_kernels_np(np, t, ctx, comm_ids)
    name, ts = vectorized.column(t, "name")[kernels], vectorized.column(t, "ts")[kernels]
    found, first = np.unique(name, return_index=True)
    ids: dict[str, list[int]] = {}
    for nid in found[np.argsort(first)].tolist():
        ids.setdefault(t.names[nid], []).append(nid)
    return {n: ts[np.isin(name, same)].tolist() for n, same in ids.items()}


__all__ = ["K_GPU_ANNOTATION", "RankMetrics", "compute_rank_metrics"]
