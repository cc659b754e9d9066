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
from typing import TYPE_CHECKING

from gpudoctor.trace import kernels as kn
from gpudoctor.trace.context import Context, pct
from gpudoctor.trace.events import K_KERNEL, EventTable
from gpudoctor.trace.timeline import end_times

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
    out.update({
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
    })
    for fact in sorted(set(_FACT_OF_CLASS.values())):
        out[fact] = round(by_fact[fact] / 1000.0 / n, 3)
    out.update(_launch_gaps(timeline, n))
    out.update(_sequence_facts(sequences))
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
        if self._backward is None:  # the ToCopyBackward events, found once, only when a cast needs it
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
        items = self._backward.get(thread, [])
        k = bisect.bisect_right(items, (ts, float("inf"))) - 1
        return k >= 0 and items[k][1] >= ts


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


def _sequence_facts(sequences: list[list[tuple[float, int]]]) -> dict[str, FactValue]:
    """Do all steps launch the same kernels in the same order? (needed to capture a CUDA graph)."""
    if len(sequences) < 2:
        return {"kernel_sequence_static": None, "kernel_sequence_match_pct": None}
    keys = [tuple(map(_SECOND, sorted(seq))) for seq in sequences]  # C-level, not a generator per step
    most_common = Counter(keys).most_common(1)[0][1]
    return {"kernel_sequence_static": most_common == len(keys),
            "kernel_sequence_match_pct": pct(most_common, len(keys))}
