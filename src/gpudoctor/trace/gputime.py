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
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_KERNEL, K_MEMSET, EventTable
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


def _build(t: EventTable, ctx: Context) -> GpuTime:
    """The pure-Python table: one pass over the device events."""
    classes = ctx.kernel_classes(t)
    us: list[dict[Row, float]] = [{} for _ in SCOPES]
    counts: list[dict[Row, int]] = [{} for _ in SCOPES]
    launched = ctx.device_steps(t) if ctx.steps else {}
    fusible_names = {nid for nid, info in classes.items() if info.fusion is not None}
    in_optimizer = optimizer_launch_test(t, ctx) if launched and fusible_names else None
    launches = ctx.device_launches(t) if in_optimizer is not None else {}
    lo, hi = _window(ctx)
    kind, name, dur, ts, end = t.kind, t.name, t.dur, t.ts, end_times(t)
    u_dev, u_launched, u_fusible, u_win, u_win_launched = us  # in SCOPES order
    n_dev, n_launched, n_fusible, n_win, n_win_launched = counts
    for i in ctx.device:  # the adds written out: this loop is the table's whole cost
        row = (kind[i], name[i])
        d = dur[i]
        u_dev[row] = u_dev.get(row, 0.0) + d
        n_dev[row] = n_dev.get(row, 0) + 1
        a, b = ts[i], end[i]
        window = b > a and b > lo and a < hi
        if window:
            u_win[row] = u_win.get(row, 0.0) + d
            n_win[row] = n_win.get(row, 0) + 1
        if i in launched:
            u_launched[row] = u_launched.get(row, 0.0) + d
            n_launched[row] = n_launched.get(row, 0) + 1
            if window:
                u_win_launched[row] = u_win_launched.get(row, 0.0) + d
                n_win_launched[row] = n_win_launched.get(row, 0) + 1
            if (row[1] in fusible_names and row[0] == K_KERNEL and in_optimizer is not None
                    and not in_optimizer(launches[i])):
                u_fusible[row] = u_fusible.get(row, 0.0) + d
                n_fusible[row] = n_fusible.get(row, 0) + 1
    return GpuTime(classes, [dict(sorted(acc.items())) for acc in us], [dict(sorted(n.items())) for n in counts])


def _build_np(np: Any, t: EventTable, ctx: Context) -> GpuTime:
    """The numpy table: per scope, one ``bincount`` over a row code per device event."""
    classes = ctx.kernel_classes(t)
    n_names = len(t.names)
    col = vectorized.column
    dev = ctx.device_array(t)
    kind = col(t, "kind")[dev].astype(np.int64)
    code = (kind - K_KERNEL) * n_names + col(t, "name")[dev]
    d = col(t, "dur")[dev]
    starts, stops = col(t, "ts")[dev], vectorized.ends(t)[dev]
    lo, hi = _window(ctx)
    window = (stops > starts) & (stops > lo) & (starts < hi)
    masks: list[Any] = [None, None, None, window, None]
    if ctx.steps:
        launched = ctx.device_step_array(t) >= 0
        fusible_names = np.zeros(n_names, dtype=bool)
        fusible_names[[nid for nid, info in classes.items() if info.fusion is not None]] = True
        fusible = np.flatnonzero(launched & (kind == K_KERNEL) & fusible_names[col(t, "name")[dev]])
        fusible = fusible[~in_optimizer_np(np, t, ctx, ctx.device_launch_array(t)[fusible])]
        masks[LAUNCHED], masks[WINDOW_LAUNCHED] = launched, window & launched
        masks[FUSIBLE] = np.zeros(len(dev), dtype=bool)
        masks[FUSIBLE][fusible] = True
    size = (K_MEMSET - K_KERNEL + 1) * n_names
    us: list[dict[Row, float]] = []
    counts: list[dict[Row, int]] = []
    for scope in SCOPES:
        mask = masks[scope]
        if scope != DEVICE and mask is None:
            us.append({})
            counts.append({})
            continue
        c, w = (code, d) if mask is None else (code[mask], d[mask])
        n = np.bincount(c, minlength=size)
        total = np.bincount(c, weights=w, minlength=size)
        present = np.flatnonzero(n)
        rows = [(K_KERNEL + int(r) // n_names, int(r) % n_names) for r in present.tolist()]
        us.append(dict(zip(rows, total[present].tolist())))
        counts.append(dict(zip(rows, n[present].tolist())))
    return GpuTime(classes, us, counts)


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
