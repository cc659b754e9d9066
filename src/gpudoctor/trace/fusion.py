"""What torch.compile and CUDA graphs could remove from a step: fusible kernels, casts, launch gaps.

Why this exists: the standard PyTorch 2.x advice — compile the model, replay static steps as CUDA
graphs, keep autocast from re-casting fp32 weights — is only worth giving when the trace shows the
time it would save. This module measures that time per ``ProfilerStep``:

- *fusible* kernels: eager memory-bound kernels (elementwise, normalization, reduction, softmax,
  copy/cast; classified by name in :func:`gpudoctor.trace.kernels.fusion_class`) outside the
  optimizer step, which Inductor turns into fewer fused Triton kernels;
- *autocast casts*: dtype-conversion kernels launched inside an autocast-eligible op (``aten::linear``,
  ``aten::conv2d`` … casting its fp32 weight) or inside autograd's ``ToCopyBackward`` (the gradient
  cast back to fp32);
- *launch gaps*: GPU idle time between kernels while the host had not launched the next one yet
  (gaps up to :data:`LAUNCH_GAP_MAX_US`), which a CUDA graph replay removes, and whether every step
  launches the same kernel sequence (a necessary condition for capturing it).

What it must not do: read files, know rule thresholds, or change the other metrics' behaviour.
"""

from __future__ import annotations

import bisect
import operator
from collections import Counter
from typing import TYPE_CHECKING, Any

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context, pct
from gpudoctor.trace.events import K_KERNEL, EventTable
from gpudoctor.trace.gputime import FUSIBLE, LAUNCHED, gpu_time, in_optimizer_np, optimizer_launch_test
from gpudoctor.trace.timeline import end_times
from gpudoctor.trace.vectorized import Floats, Ints, numpy_for

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue

#: a host-wait gap longer than this is not launch overhead (a sync, input, Python work between steps)
LAUNCH_GAP_MAX_US = 1000.0
_COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
_SECOND = operator.itemgetter(1)
_FACT_OF_CLASS = {kn.FUSE_NORM: "fusible_norm_ms_per_step", kn.FUSE_SOFTMAX: "fusible_reduce_ms_per_step",
                  kn.FUSE_REDUCE: "fusible_reduce_ms_per_step", kn.FUSE_CAST: "fusible_copy_ms_per_step",
                  kn.FUSE_COPY: "fusible_copy_ms_per_step", kn.FUSE_ELEMENTWISE: "fusible_elementwise_ms_per_step"}


def compiled_region_present(t: EventTable) -> bool:
    """Whether anything in the trace ran compiled code (regions, compiled FX graphs, Triton kernels)."""
    return any(n.startswith(("Torch-Compiled Region", "triton")) or "CompiledFxGraph" in n for n in t.names)


def fusion_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """Fusible, cast and launch-gap time per step (facts named in the module docstring).

    The kernel-time sums come from the GPU-time table (:mod:`.gputime`: duration sums, not unions of
    spans); the autocast casts, launch gaps and kernel sequences from the steps' device events.
    """
    out: dict[str, FactValue] = {"compiled_region_present": compiled_region_present(t)}
    n = ctx.n_steps
    if not n:
        return out
    table = gpu_time(t, ctx)
    gpu_us = table.us(LAUNCHED, lambda kind, c: not c.communication)
    if gpu_us <= 0:
        return out
    np = numpy_for(t)
    autocast_us, autocast_kernels, grad_cast_kernels, timing = (
        _per_event_np(np, t, ctx) if np is not None else _per_event(t, ctx))
    by_fact = table.by(FUSIBLE, lambda kind, c: _FACT_OF_CLASS[c.fusion] if c.fusion is not None else None)
    out.update({
        "gpu_kernel_ms_per_step": round(gpu_us / 1000.0 / n, 3),
        "fusible_ms_per_step": round(table.us(FUSIBLE, _ANY) / 1000.0 / n, 3),
        "fusible_pct_of_gpu": pct(table.us(FUSIBLE, _ANY), gpu_us),
        "fusible_kernels_per_step": round(table.count(FUSIBLE, _ANY) / n, 1),
        "compiled_kernel_pct_of_gpu": pct(table.us(LAUNCHED, _compiled), gpu_us),
        "compiled_kernel_ms_per_step": round(table.us(LAUNCHED, _compiled) / 1000.0 / n, 3),
        "cast_ms_per_step": round(table.us(FUSIBLE, _cast) / 1000.0 / n, 3),
        "autocast_cast_ms_per_step": round(autocast_us / 1000.0 / n, 3),
        "autocast_cast_kernels_per_step": round(autocast_kernels / n, 1),
        "autocast_grad_cast_kernels_per_step": round(grad_cast_kernels / n, 1),
        "autocast_cast_pct_of_gpu": pct(autocast_us, gpu_us),
    })
    for fact in sorted(set(_FACT_OF_CLASS.values())):
        out[fact] = round(by_fact.get(fact, 0.0) / 1000.0 / n, 3)
    out.update(timing)
    return out


def _ANY(kind: int, c: kn.KernelClass) -> bool:
    return True


def _compiled(kind: int, c: kn.KernelClass) -> bool:
    return kind == K_KERNEL and c.compiled and not c.communication


def _cast(kind: int, c: kn.KernelClass) -> bool:
    return c.fusion == kn.FUSE_CAST


def _per_event(t: EventTable, ctx: Context) -> tuple[float, int, int, dict[str, FactValue]]:
    """Of the steps' non-communication device events: the autocast casts (µs, kernels, of them
    gradient casts) among the fusible casts, and the launch-gap and kernel-sequence facts."""
    n = ctx.n_steps
    in_optimizer = optimizer_launch_test(t, ctx)
    cast_parent = _CastParents(t, ctx)
    classes = ctx.kernel_classes(t)
    launches = ctx.device_launches(t)
    ts, dur, kind, name, end = t.ts, t.dur, t.kind, t.name, end_times(t)
    autocast_us = 0.0
    autocast_kernels = grad_cast_kernels = 0
    sequences: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    timeline: list[tuple[float, float, float, int]] = []  # (start, end, launch call end, step)
    for i, step in ctx.device_steps(t).items():  # the device events launched inside a step, in event order
        nid = name[i]
        info = classes[nid]
        if info.communication:
            continue
        launch = launches[i]
        timeline.append((ts[i], end[i], end[launch], step))
        if kind[i] != K_KERNEL:
            continue
        sequences[step].append((ts[launch], nid))
        if info.fusion == kn.FUSE_CAST and not in_optimizer(launch):
            where = cast_parent.autocast_kind(launch)
            if where is not None:
                autocast_us += dur[i]
                autocast_kernels += 1
                grad_cast_kernels += where == "backward"
    return autocast_us, autocast_kernels, grad_cast_kernels, {**_launch_gaps(timeline, n),
                                                              **_sequence_facts(sequences)}


def _per_event_np(np: Any, t: EventTable, ctx: Context) -> tuple[float, int, int, dict[str, FactValue]]:
    """The numpy path of :func:`_per_event`. Every sum adds in event order
    (:func:`.vectorized.ordered_sum`), as the pure loop does."""
    n = ctx.n_steps
    col = vectorized.column
    ts, dur, kind, name, end = col(t, "ts"), col(t, "dur"), col(t, "kind"), col(t, "name"), vectorized.ends(t)
    step = ctx.device_step_array(t)
    inside = step >= 0
    dev, launch, step = ctx.device_array(t)[inside], ctx.device_launch_array(t)[inside], step[inside]
    keep = ~ctx.class_array(t, "communication")[name[dev]]
    dev, launch, step = dev[keep], launch[keep], step[keep]
    timeline = (ts[dev], end[dev], end[launch], step)
    kernel = kind[dev] == K_KERNEL
    dev, launch, step = dev[kernel], launch[kernel], step[kernel]
    nid = name[dev]
    casts = np.zeros(len(t.names), dtype=bool)
    casts[[i for i, info in ctx.kernel_classes(t).items() if info.fusion == kn.FUSE_CAST]] = True
    cast = np.flatnonzero(casts[nid])
    cast = cast[~in_optimizer_np(np, t, ctx, launch[cast])]
    where = _autocast_kinds_np(np, t, ctx, launch[cast])
    autocast = where > 0
    autocast_us = vectorized.ordered_sum(dur[dev[cast]][autocast])
    return (autocast_us, int(autocast.sum()), int((where == 2).sum()),
            {**_launch_gaps_np(np, *timeline, n), **_sequence_facts_np(np, step, ts[launch], nid, n)})


def _autocast_kinds_np(np: Any, t: EventTable, ctx: Context, launch: Ints) -> Any:
    """numpy path of :meth:`_CastParents.autocast_kind` for many launches: 1 forward, 2 backward, 0 none."""
    col = vectorized.column
    out = np.zeros(len(launch), dtype=np.int8)
    if not len(launch):
        return out
    ts, thread, name = col(t, "ts"), col(t, "thread"), col(t, "name")
    when, on = ts[launch], thread[launch]
    copy_ops = np.zeros(len(t.names), dtype=bool)
    copy_ops[[i for i, n in enumerate(t.names) if n in _COPY_OPS]] = True
    outer = ctx.outer_aten_arrays(t)
    for th in np.unique(on).tolist():
        if th not in outer:
            continue
        here = np.flatnonzero(on == th)
        starts, ops, ends = outer[th]
        k = np.searchsorted(starts, when[here], side="right") - 1
        held = k >= 0
        held[held] = when[here][held] <= ends[k[held]]
        forward = here[held][~copy_ops[name[ops[k[held]]]]]
        out[forward] = 1
    rest = np.flatnonzero(out == 0)
    if len(rest):
        spans = _CastParents(t, ctx).backward_spans()
        for th in np.unique(on[rest]).tolist():
            items = spans.get(th)
            if not items:
                continue
            here = rest[on[rest] == th]
            starts, ends = (np.array(v) for v in zip(*items))
            k = np.searchsorted(starts, when[here], side="right") - 1
            held = k >= 0
            held[held] = ends[k[held]] >= when[here][held]
            out[here[held]] = 2
    return out


class _CastParents:
    """Which host op a cast kernel came from: autocast inside an op, or autograd's ToCopyBackward."""

    def __init__(self, t: EventTable, ctx: Context) -> None:
        self.t = t
        self.ctx = ctx
        self._backward: dict[int, list[tuple[float, float]]] | None = None

    def autocast_kind(self, launch: int) -> str | None:
        """``"forward"`` (autocast casting a weight inside an op), ``"backward"`` (autograd casting its
        gradient back to fp32 in ``ToCopyBackward``: the weight is trainable) or None (not autocast)."""
        t = self.t
        op = self._outer_op(t.thread[launch], t.ts[launch])
        if op is not None and t.names[t.name[op]] not in _COPY_OPS:
            return "forward"  # e.g. aten::linear > aten::to > aten::_to_copy: autocast casting the weight
        return "backward" if self._in_to_copy_backward(t.thread[launch], t.ts[launch]) else None

    def _outer_op(self, thread: int, ts: float) -> int | None:
        t = self.t
        starts, outer = self.ctx.outer_aten_ops(t).get(thread, ([], []))
        k = bisect.bisect_right(starts, ts) - 1
        if k >= 0 and ts <= t.ts[outer[k]] + t.dur[outer[k]]:
            return outer[k]
        return None

    def _in_to_copy_backward(self, thread: int, ts: float) -> bool:
        items = self.backward_spans().get(thread, [])
        k = bisect.bisect_right(items, (ts, float("inf"))) - 1
        return k >= 0 and items[k][1] >= ts

    def backward_spans(self) -> dict[int, list[tuple[float, float]]]:
        """Per host thread, the ``ToCopyBackward`` events' (start, end), sorted (found once, when asked)."""
        if self._backward is None:
            t = self.t
            ids = {i for i, name in enumerate(t.names) if "ToCopyBackward" in name}
            spans: dict[int, list[tuple[float, float]]] = {}
            if ids:
                for i in t.positions_of(ids):
                    if t.stream[i] < 0:
                        spans.setdefault(t.thread[i], []).append((t.ts[i], t.ts[i] + t.dur[i]))
            for items in spans.values():
                items.sort()
            self._backward = spans
        return self._backward


def _launch_gaps(events: list[tuple[float, float, float, int]], n: int) -> dict[str, FactValue]:
    """GPU idle inside steps while the host had not launched the next work yet (short gaps only).

    ``events``: the steps' non-communication GPU events as (start, end, end of the launch call, step).
    """
    per_step = [0.0] * n
    gaps = [0] * n
    events.sort()
    if not events:
        return {"launch_gap_ms_per_step": 0.0, "launch_gaps_per_step": 0.0}
    busy_until = events[0][1]  # the first event opens no gap
    for start, end, launched, step in events:
        if start > busy_until:
            gap = start - busy_until
            if launched > busy_until and gap <= LAUNCH_GAP_MAX_US:
                per_step[step] += gap
                gaps[step] += 1
        if end > busy_until:  # a comparison, not a max() call per event
            busy_until = end
    return {"launch_gap_ms_per_step": round(sum(per_step) / 1000.0 / n, 3),
            "launch_gaps_per_step": round(sum(gaps) / n, 1)}


def _launch_gaps_np(np: Any, start: Floats, end: Floats, launched: Floats, step: Ints,
                    n: int) -> dict[str, FactValue]:
    """The numpy path of :func:`_launch_gaps`: the events sorted as tuples sort, the busy-until as a
    running maximum, the gaps added per step in that order (``bincount`` adds in order)."""
    if not len(start):
        return {"launch_gap_ms_per_step": 0.0, "launch_gaps_per_step": 0.0}
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    if (ordered[1:] == ordered[:-1]).any():  # events starting together: the rest of the tuple decides
        order = np.lexsort((step, launched, end, start))
    start, end, launched, step = start[order], end[order], launched[order], step[order]
    busy_until = np.empty(len(end))
    busy_until[0] = end[0]  # the first event opens no gap (unless it is inverted)
    np.maximum.accumulate(end[:-1], out=busy_until[1:])
    gap = start - busy_until
    counted = (start > busy_until) & (launched > busy_until) & (gap <= LAUNCH_GAP_MAX_US)
    per_step = np.bincount(step[counted], weights=gap[counted], minlength=n)
    return {"launch_gap_ms_per_step": round(vectorized.ordered_sum(per_step) / 1000.0 / n, 3),
            "launch_gaps_per_step": round(int(counted.sum()) / n, 1)}


def _sequence_facts_np(np: Any, step: Ints, launched: Floats, nid: Ints, n: int) -> dict[str, FactValue]:
    """The numpy path of :func:`_sequence_facts`: each step's name ids in launch order (ties by id) as
    bytes, which are equal exactly when the pure path's tuples are."""
    if n < 2:
        return {"kernel_sequence_static": None, "kernel_sequence_match_pct": None}
    order = np.lexsort((nid, launched, step))
    ids = np.ascontiguousarray(nid[order], dtype=np.uint32).tobytes()
    bounds = (np.searchsorted(step[order], np.arange(n + 1)) * 4).tolist()
    most_common = Counter(ids[a:b] for a, b in zip(bounds, bounds[1:])).most_common(1)[0][1]
    return {"kernel_sequence_static": most_common == n,
            "kernel_sequence_match_pct": pct(most_common, n)}


def _sequence_facts(sequences: list[list[tuple[float, int]]]) -> dict[str, FactValue]:
    """Do all steps launch the same kernels in the same order? (needed to capture a CUDA graph)."""
    if len(sequences) < 2:
        return {"kernel_sequence_static": None, "kernel_sequence_match_pct": None}
    keys = [tuple(map(_SECOND, sorted(seq))) for seq in sequences]  # C-level, not a generator per step
    most_common = Counter(keys).most_common(1)[0][1]
    return {"kernel_sequence_static": most_common == len(keys),
            "kernel_sequence_match_pct": pct(most_common, len(keys))}
