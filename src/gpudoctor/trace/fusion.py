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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context, pct
from gpudoctor.trace.events import K_KERNEL, EventTable
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
    """Fusible, cast and launch-gap time per step (facts named in the module docstring)."""
    out: dict[str, FactValue] = {"compiled_region_present": compiled_region_present(t)}
    n = ctx.n_steps
    if not n:
        return out
    np = numpy_for(t)
    if np is not None:
        return _fusion_metrics_np(np, t, ctx, out)
    in_optimizer, optimizer_starts, optimizer_ends = _optimizer_spans(t, ctx)
    bisect_right = bisect.bisect_right
    cast_parent = _CastParents(t, ctx)
    classes = ctx.kernel_classes(t)
    launches = ctx.device_launches(t)
    ts, dur, kind, name, end = t.ts, t.dur, t.kind, t.name, end_times(t)
    gpu_us = triton_us = fusible_us = cast_us = autocast_us = 0.0
    fusible_kernels = autocast_kernels = grad_cast_kernels = 0
    by_fact: Counter[str] = Counter()
    sequences: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    timeline: list[tuple[float, float, float, int]] = []  # (start, end, launch call end, step)
    for i, step in ctx.device_steps(t).items():  # the device events launched inside a step, in event order
        nid = name[i]
        info = classes[nid]
        if info.communication:
            continue
        launch = launches[i]
        d = dur[i]
        gpu_us += d
        timeline.append((ts[i], end[i], end[launch], step))
        if kind[i] != K_KERNEL:
            continue
        sequences[step].append((ts[launch], nid))
        if info.compiled:
            triton_us += d
        cls = info.fusion
        if cls is None:
            continue
        k = bisect_right(optimizer_starts, ts[launch]) - 1
        if k >= 0 and optimizer_ends[k] >= ts[launch] and in_optimizer(launch):
            continue
        fusible_us += d
        fusible_kernels += 1
        by_fact[_FACT_OF_CLASS[cls]] += d
        if cls == kn.FUSE_CAST:
            cast_us += d
            where = cast_parent.autocast_kind(launch)
            if where is not None:
                autocast_us += d
                autocast_kernels += 1
                grad_cast_kernels += where == "backward"
    if gpu_us <= 0:
        return out
    out.update(_kernel_time_facts(n, gpu_us, fusible_us, fusible_kernels, triton_us, cast_us, autocast_us, autocast_kernels,
                                  grad_cast_kernels))
    for fact in sorted(set(_FACT_OF_CLASS.values())):
        out[fact] = round(by_fact[fact] / 1000.0 / n, 3)
    out.update(_launch_gaps(timeline, n))
    out.update(_sequence_facts(sequences))
    return out


def _kernel_time_facts(n: int, gpu_us: float, fusible_us: float, fusible_kernels: int, triton_us: float,
                       cast_us: float, autocast_us: float, autocast_kernels: int,
                       grad_cast_kernels: int) -> dict[str, FactValue]:
    """The per-step kernel-time facts from their sums (one place for both paths of :func:`fusion_metrics`)."""
    return {
        "gpu_kernel_ms_per_step": round(gpu_us / 1000.0 / n, 3),
        "fusible_ms_per_step": round(fusible_us / 1000.0 / n, 3),
        "fusible_pct_of_gpu": pct(fusible_us, gpu_us),
        "fusible_kernels_per_step": round(fusible_kernels / n, 1),
        "compiled_kernel_pct_of_gpu": pct(triton_us, gpu_us),
        "compiled_kernel_ms_per_step": round(triton_us / 1000.0 / n, 3),
        "cast_ms_per_step": round(cast_us / 1000.0 / n, 3),
        "autocast_cast_ms_per_step": round(autocast_us / 1000.0 / n, 3),
        "autocast_cast_kernels_per_step": round(autocast_kernels / n, 1),
        "autocast_grad_cast_kernels_per_step": round(grad_cast_kernels / n, 1),
        "autocast_cast_pct_of_gpu": pct(autocast_us, gpu_us),
    }


def _fusion_metrics_np(np: Any, t: EventTable, ctx: Context, out: dict[str, FactValue]) -> dict[str, FactValue]:
    """The numpy path of :func:`fusion_metrics`: the same sums over arrays of the steps' device events.

    Every sum adds in event order (:func:`.vectorized.ordered_sum`), as the pure loop does.
    """
    n = ctx.n_steps
    col = vectorized.column
    ts, dur, kind, name, end = col(t, "ts"), col(t, "dur"), col(t, "kind"), col(t, "name"), vectorized.ends(t)
    step = ctx.device_step_array(t)
    inside = step >= 0
    dev, launch, step = ctx.device_array(t)[inside], ctx.device_launch_array(t)[inside], step[inside]
    keep = ~ctx.class_array(t, "communication")[name[dev]]
    dev, launch, step = dev[keep], launch[keep], step[keep]
    d = dur[dev]
    gpu_us = vectorized.ordered_sum(d)
    if gpu_us <= 0:
        return out
    timeline = (ts[dev], end[dev], end[launch], step)
    kernel = kind[dev] == K_KERNEL
    dev, launch, step, d = dev[kernel], launch[kernel], step[kernel], d[kernel]
    nid = name[dev]
    launched = ts[launch]
    triton_us = vectorized.ordered_sum(d[ctx.class_array(t, "compiled")[nid]])
    facts = sorted(set(_FACT_OF_CLASS.values()))
    fact_of = np.full(len(t.names), -1, dtype=np.int64)  # per name id: its fusion class's fact, or -1
    casts = np.zeros(len(t.names), dtype=bool)
    for i, info in ctx.kernel_classes(t).items():
        if info.fusion is not None:
            fact_of[i] = facts.index(_FACT_OF_CLASS[info.fusion])
            casts[i] = info.fusion == kn.FUSE_CAST
    fusible = np.flatnonzero(fact_of[nid] >= 0)
    fusible = fusible[~_in_optimizer_np(np, t, ctx, launch[fusible])]
    d_f, fact = d[fusible], fact_of[nid[fusible]]
    fusible_us = vectorized.ordered_sum(d_f)
    by_fact = {label: vectorized.ordered_sum(d_f[fact == k]) for k, label in enumerate(facts)}
    cast = casts[nid[fusible]]
    d_c = d_f[cast]
    cast_us = vectorized.ordered_sum(d_c)
    where = _autocast_kinds_np(np, t, ctx, launch[fusible[cast]])
    autocast = where > 0
    autocast_us = vectorized.ordered_sum(d_c[autocast])
    autocast_kernels = int(autocast.sum())
    grad_cast_kernels = int((where == 2).sum())
    out.update(_kernel_time_facts(n, gpu_us, fusible_us, len(fusible), triton_us, cast_us, autocast_us, autocast_kernels,
                                  grad_cast_kernels))
    for fact, value in by_fact.items():
        out[fact] = round(value / 1000.0 / n, 3)
    out.update(_launch_gaps_np(np, *timeline, n))
    out.update(_sequence_facts_np(np, step, launched, nid, n))
    return out


def _in_optimizer_np(np: Any, t: EventTable, ctx: Context, launch: Ints) -> Any:
    """numpy path of :func:`_optimizer_spans`' test, for many launches at once (bool per launch)."""
    col = vectorized.column
    spans = sorted((t.ts[i], t.ts[i] + t.dur[i], t.thread[i])
                   for i in ctx.host_ops(t, lambda name: name.startswith("Optimizer.step#")))
    found = np.zeros(len(launch), dtype=bool)
    if not spans or not len(launch):
        return found
    starts, ends, threads = (np.array(v) for v in zip(*spans))
    when, thread = col(t, "ts")[launch], col(t, "thread")[launch]
    k = np.searchsorted(starts, when, side="right") - 1
    left = np.flatnonzero(k >= 0)
    while len(left):  # nested spans: look back while they cover it (rarely more than one round)
        at = k[left]
        covering = ends[at] >= when[left]
        left, at = left[covering], at[covering]
        same = threads[at] == thread[left]
        found[left[same]] = True
        left = left[~same]
        k[left] -= 1
        left = left[k[left] >= 0]
    return found


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


def _optimizer_spans(t: EventTable, ctx: Context) -> tuple[Callable[[int], bool], list[float], list[float]]:
    """A predicate: was this runtime launch made inside ``Optimizer.step#…`` on the same thread? With
    the spans' starts and ends (sorted by start): a launch after the end of the last span that starts
    before it is in none (the caller tests that first, without a call)."""
    spans = sorted((t.ts[i], t.ts[i] + t.dur[i], t.thread[i])
                   for i in ctx.host_ops(t, lambda name: name.startswith("Optimizer.step#")))
    starts = [a for a, _, _ in spans]

    def inside(launch: int) -> bool:
        k = bisect.bisect_right(starts, t.ts[launch]) - 1
        while k >= 0 and spans[k][1] >= t.ts[launch]:  # nested spans: look back while they cover it
            if spans[k][2] == t.thread[launch]:
                return True
            k -= 1
        return False

    return inside, starts, [b for _, b, _ in spans]


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
