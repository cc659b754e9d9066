"""GPU time by kernel class: one table per trace and step list, which every duration sum reads.

Why this exists: the kernel mix (:mod:`.metrics`), the fusible and compiled time (:mod:`.fusion`) and
the GEMM precision classes of the step picture (:mod:`.partition`) all add kernel durations by what
the kernels' names say. Each used to walk the device events on its own, with a pure and a numpy
version each. Here the device events are walked once: their durations are added per *row* — one
(event kind, name id) pair, whose :class:`~gpudoctor.trace.kernels.KernelClass` says everything a
metric asks of it — in a few *scopes* (which events count), and a consumer adds up the rows of the
classes it wants (:meth:`GpuTime.us`, :meth:`GpuTime.by`).

The scopes:

- :data:`DEVICE`: every device event (kernel, memcpy, memset) of the trace;
- :data:`LAUNCHED`: those launched inside a step (:meth:`Context.device_steps`);
- :data:`FUSIBLE`: kernels with a fusion class (:func:`~gpudoctor.trace.kernels.fusion_class`)
  launched inside a step and outside ``Optimizer.step`` on the launching thread — the kernels
  ``fusible_ms_per_step`` sums (``torch.compile(model)`` does not compile the optimizer);
- :data:`WINDOW`: events of positive length that overlap the steps' window (first step's start to
  the last one's end) — the GPU work the step picture is made of;
- :data:`WINDOW_LAUNCHED`: :data:`WINDOW` events launched inside a step.

These are *duration sums*: two overlapping kernels on two streams count twice. The step picture's
parts (``part_*_ms``) are *unions* of spans instead (:mod:`.partition`); docs/facts.md says which a
fact is.

Both paths add every row's durations in event order (the pure loop with ``+=``, numpy's ``bincount``
adds its weights in order too), so the two give bit-identical tables; a consumer's sum over rows
then adds the rows in ascending (kind, name id) order.

What it must not do: read files, know rule thresholds, or name a fact.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_KERNEL, EventTable
from gpudoctor.trace.timeline import end_times
from gpudoctor.trace.vectorized import Ints

DEVICE = 0
LAUNCHED = 1
FUSIBLE = 2
WINDOW = 3
WINDOW_LAUNCHED = 4
SCOPES = (DEVICE, LAUNCHED, FUSIBLE, WINDOW, WINDOW_LAUNCHED)

Row = tuple[int, int]  # (event kind, name id)
L = TypeVar("L", bound=Hashable)


class GpuTime:
    """µs and event counts per row (kind, name id) in each scope, rows in ascending order."""

    def __init__(self, classes: dict[int, kn.KernelClass], us: list[dict[Row, float]],
                 counts: list[dict[Row, int]]) -> None:
        self.classes = classes
        self._us = us
        self._counts = counts

    def rows(self, scope: int) -> dict[Row, float]:
        """µs per row of one scope (rows with no event in it left out)."""
        return self._us[scope]

    def us(self, scope: int, where: Callable[[int, kn.KernelClass], bool]) -> float:
        """µs of the rows of ``scope`` whose (kind, class) ``where`` accepts, added in row order."""
        total = 0.0
        classes = self.classes
        for (kind, nid), us in self._us[scope].items():
            if where(kind, classes[nid]):
                total += us
        return total

    def count(self, scope: int, where: Callable[[int, kn.KernelClass], bool]) -> int:
        """Events of the rows of ``scope`` whose (kind, class) ``where`` accepts."""
        classes = self.classes
        return sum(n for (kind, nid), n in self._counts[scope].items() if where(kind, classes[nid]))

    def by(self, scope: int, label: Callable[[int, kn.KernelClass], L | None]) -> dict[L, float]:
        """µs of ``scope`` per label (rows labelled None left out), each added in row order; the labels
        in the order their first rows come."""
        out: dict[L, float] = {}
        classes = self.classes
        for (kind, nid), us in self._us[scope].items():
            key = label(kind, classes[nid])
            if key is not None:
                out[key] = out.get(key, 0.0) + us
        return out


def gpu_time(t: EventTable, ctx: Context) -> GpuTime:
    """The table of ``t`` for ``ctx``'s steps (made once per table and step list: the profiled steps,
    and the steps as the GPU ran them where the step picture uses those)."""
    cached: list[tuple[list[tuple[int, float, float]], GpuTime]] = t.cache.setdefault("gputime", [])
    for steps, table in cached:
        if steps is ctx.steps:
            return table
    np = ctx.np
    table = _build_np(np, t, ctx) if np is not None else _build(t, ctx)
    cached.append((ctx.steps, table))
    del cached[:-2]
    return table


def _window(ctx: Context) -> tuple[float, float]:
    if not ctx.steps:
        return float("inf"), -float("inf")
    return ctx.steps[0][1], ctx.steps[-1][2]


#: An event's scope bits: in the window, launched in a step, fusible (:data:`SCOPES` by these bits).
_IN_WINDOW, _IN_STEP, _IN_FUSIBLE = 1, 2, 4
_SCOPE_TEST = {DEVICE: lambda mask: True, LAUNCHED: lambda mask: bool(mask & _IN_STEP),
               FUSIBLE: lambda mask: bool(mask & _IN_FUSIBLE), WINDOW: lambda mask: bool(mask & _IN_WINDOW),
               WINDOW_LAUNCHED: lambda mask: mask & (_IN_WINDOW | _IN_STEP) == _IN_WINDOW | _IN_STEP}


def _table(classes: dict[int, kn.KernelClass], n_names: int, us: dict[int, float], counts: dict[int, int]) -> GpuTime:
    """The table from µs and counts per key ``((kind - K_KERNEL) * n_names + name id) * 8 + scope bits``,
    keys ascending: a row's scope adds the sums of its keys whose bits it takes, in key order (the
    same floats from both paths, whose per-key sums both add in event order)."""
    out_us: list[dict[Row, float]] = [{} for _ in SCOPES]
    out_counts: list[dict[Row, int]] = [{} for _ in SCOPES]
    for key, total in us.items():
        code, mask = divmod(key, 8)
        row = (K_KERNEL + code // n_names, code % n_names)
        for scope in SCOPES:
            if _SCOPE_TEST[scope](mask):
                acc, n = out_us[scope], out_counts[scope]
                acc[row] = acc.get(row, 0.0) + total
                n[row] = n.get(row, 0) + counts[key]
    return GpuTime(classes, out_us, out_counts)


def _build(t: EventTable, ctx: Context) -> GpuTime:
    """The pure-Python table: one key per device event (row and scope bits), its duration added to the
    key's sum (one dict step per event), the counts by :class:`~collections.Counter` (C-level)."""
    classes = ctx.kernel_classes(t)
    n_names = len(t.names)
    dev = ctx.device
    launched = ctx.device_steps(t) if ctx.steps else {}
    fusible_names = {nid for nid, info in classes.items() if info.fusion is not None}
    in_optimizer = optimizer_launch_test(t, ctx) if launched and fusible_names else None
    launches = ctx.device_launches(t) if in_optimizer is not None else {}
    lo, hi = _window(ctx)
    ts, end, kind, name = t.ts, end_times(t), t.kind, t.name
    keys = [((kind[i] - K_KERNEL) * n_names + name[i]) * 8 + (b > a and b > lo and a < hi)
            + (0 if i not in launched else
               _IN_STEP if name[i] not in fusible_names or kind[i] != K_KERNEL or in_optimizer is None
               or in_optimizer(launches[i]) else _IN_STEP | _IN_FUSIBLE)
            for i, a, b in zip(dev, map(ts.__getitem__, dev), map(end.__getitem__, dev))]
    us: dict[int, float] = {}
    get = us.get
    for key, d in zip(keys, map(t.dur.__getitem__, dev)):
        us[key] = get(key, 0.0) + d
    return _table(classes, n_names, dict(sorted(us.items())), Counter(keys))


def _build_np(np: Any, t: EventTable, ctx: Context) -> GpuTime:
    """The numpy table: the pure path's key per device event, its sums by ``bincount`` (which adds
    each bin's weights in event order)."""
    classes = ctx.kernel_classes(t)
    n_names = len(t.names)
    col = vectorized.column
    dev = ctx.device_array(t)
    kind = col(t, "kind")[dev].astype(np.int64)
    starts, stops = col(t, "ts")[dev], vectorized.ends(t)[dev]
    lo, hi = _window(ctx)
    mask = ((stops > starts) & (stops > lo) & (starts < hi)).astype(np.int64)
    if ctx.steps:
        launched = ctx.device_step_array(t) >= 0
        mask[launched] += _IN_STEP
        fusible_names = np.zeros(n_names, dtype=bool)
        fusible_names[[nid for nid, info in classes.items() if info.fusion is not None]] = True
        fusible = np.flatnonzero(launched & (kind == K_KERNEL) & fusible_names[col(t, "name")[dev]])
        fusible = fusible[~in_optimizer_np(np, t, ctx, ctx.device_launch_array(t)[fusible])]
        mask[fusible] += _IN_FUSIBLE
    keys = ((kind - K_KERNEL) * n_names + col(t, "name")[dev]) * 8 + mask
    counts = np.bincount(keys)
    sums = np.bincount(keys, weights=col(t, "dur")[dev])
    present = np.flatnonzero(counts)
    at = present.tolist()
    return _table(classes, n_names, dict(zip(at, sums[present].tolist())), dict(zip(at, counts[present].tolist())))


def optimizer_launch_test(t: EventTable, ctx: Context) -> Callable[[int], bool]:
    """A predicate: was this runtime launch made inside ``Optimizer.step#…`` on the same thread?"""
    spans = sorted((t.ts[i], t.ts[i] + t.dur[i], t.thread[i])
                   for i in ctx.host_ops(t, lambda name: name.startswith("Optimizer.step#")))
    starts = [a for a, _, _ in spans]
    ends = [b for _, b, _ in spans]
    bisect_right = bisect.bisect_right

    def inside(launch: int) -> bool:
        when = t.ts[launch]
        k = bisect_right(starts, when) - 1
        while k >= 0 and ends[k] >= when:  # nested spans: look back while they cover it
            if spans[k][2] == t.thread[launch]:
                return True
            k -= 1
        return False

    return inside


def in_optimizer_np(np: Any, t: EventTable, ctx: Context, launch: Ints) -> Any:
    """numpy path of :func:`optimizer_launch_test`, for many launches at once (bool per launch)."""
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
