"""Shared look-ups for the per-rank metrics, built in a few passes over the event columns.

Why this exists: every metric needs the same indexes — which step a host time falls in, which runtime
call launched a GPU event, the device events, the few host ops by name — and building them once keeps
the metrics from re-scanning millions of events each.

What it must not do: compute metrics itself.
"""

from __future__ import annotations

import bisect
import operator
import sys
from itertools import compress, islice
from typing import Any

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.events import (
    K_ANNOTATION,
    K_CPU_OP,
    K_KERNEL,
    K_MEMCPY,
    K_MEMSET,
    K_OTHER,
    K_RUNTIME,
    EventTable,
)
from gpudoctor.trace.masks import Mask, mask_and, mask_not, mask_positions
from gpudoctor.trace.timeline import Interval, merge
from gpudoctor.trace.vectorized import Floats, Ints, numpy_for

HOST_KINDS = (K_CPU_OP, K_ANNOTATION, K_OTHER)
_DEVICE_KINDS = (K_KERNEL, K_MEMCPY, K_MEMSET)  # the numpy path's device kinds (as _DEVICE_MASK's)
_DEVICE_MASK = bytes(1 if K_KERNEL <= k <= K_MEMSET else 0 for k in range(256))
_RUNTIME_MASK = bytes(1 if k == K_RUNTIME else 0 for k in range(256))
_CPU_OP_MASK = bytes(1 if k == K_CPU_OP else 0 for k in range(256))
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
               "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
               "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")
WANTED_PREFIXES = ("enumerate(DataLoader)", "Optimizer.step#", "Torch-Compiled Region", "## Call CompiledFxGraph")
COMPILE_WORK = ("compile_inner", "compile_metrics.", "call_user_compiler", "compile_fx", "inductor_compile",
                 "backend_compile", "dynamo_compile")


def pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole > 0 else None


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def is_input_wait(name: str) -> bool:
    """The loop waiting for its next batch: the profiler's ``enumerate(DataLoader)#…__next__`` span."""
    return name.startswith("enumerate(DataLoader)") and "__next__" in name


class Context:
    """Shared look-ups: which step a host time falls in, correlation → launch, kernels per step.

    On the numpy path (:attr:`np` is numpy: a big table) the big look-ups are arrays, and
    :attr:`device`, :attr:`launch_by_corr`, :attr:`aten_by_thread` and the dicts of
    :meth:`device_launches` and :meth:`device_steps` are made from them only when a caller asks
    (``__init__`` 0.025 CPU-s instead of 0.40–0.45 on the 1.1 GB synthetic trace, where building
    ``launch_by_corr`` alone took ~0.2 s). The arrays, for the other numpy paths:
    :meth:`device_array`, :meth:`device_launch_array`, :meth:`device_step_array`,
    :meth:`step_start_array`, :meth:`step_end_array`, :meth:`class_array`, :meth:`outer_aten_arrays`.
    """

    def __init__(self, t: EventTable, steps: list[tuple[int, float, float]]) -> None:
        self.steps = steps
        self.step_starts = [a for _, a, _ in steps]
        self.n_steps = len(steps)
        self.sync_calls: list[int] = []
        self._t = t
        self._device: list[int] | None = None
        self._launch_by_corr: dict[int, int] | None = None
        self._aten_by_thread: dict[int, list[int]] | None = None
        self._device_step: dict[int, int] | None = None
        self._input_waits: list[Interval] | None = None
        self._device_launch: dict[int, int] | None = None
        self._kernel_classes: dict[int, kn.KernelClass] | None = None
        self._outer_aten: dict[int, tuple[list[float], list[int]]] | None = None
        #: host events of the few names the metrics look for, by name id
        self.host_by_name: dict[int, list[int]] = {}
        names = t.names
        wanted = {i for i, n in enumerate(names) if n.startswith(WANTED_PREFIXES)
                  or any(w in n for w in COMPILE_WORK)}
        aten = {i for i, n in enumerate(names) if n.startswith("aten::")}
        syncs = {i for i, n in enumerate(names) if n in SYNC_CALLS}
        aten -= wanted
        #: numpy when the table takes the numpy path (:func:`.vectorized.numpy_for`), else None
        self.np = numpy_for(t)
        #: numpy path: per host thread, its ``aten::`` op indices (int64, in :attr:`aten_by_thread`'s order)
        self._aten_np: dict[int, Ints] = {}
        self._outer_aten_np: dict[int, tuple[Floats, Ints, Floats]] | None = None
        self._step_start_np: Floats | None = None
        self._step_end_np: Floats | None = None
        if self.np is not None:
            self._init_np(self.np, t, wanted, aten, syncs)
            return
        kind = t.kind
        # Index lists by kind through C-level byte masks (bytes.translate + compress), not a Python loop.
        self._device = list(compress(range(len(kind)), kind.translate(_DEVICE_MASK)))
        with_id = mask_and(kind.translate(_RUNTIME_MASK), t.nonnegative("correlation"))
        self._launch_by_corr = dict(zip(compress(t.correlation, with_id), mask_positions(with_id)))
        self.sync_calls = [i for i in t.positions_of(syncs) if kind[i] == K_RUNTIME] if syncs else []
        host = mask_not(t.nonnegative("stream"))
        name = t.name
        host_by_name = self.host_by_name
        for i in t.positions_of(wanted):
            if host[i] and kind[i] in HOST_KINDS:
                host_by_name.setdefault(name[i], []).append(i)
        self._aten_by_thread = {}
        if aten:
            ops = mask_and(mask_and(t.name_mask(aten), kind.translate(_CPU_OP_MASK)), host)
            self._aten_by_thread = _by_thread(t, ops)

    def _init_np(self, np: Any, t: EventTable, wanted: set[int], aten: set[int], syncs: set[int]) -> None:
        """The numpy path of ``__init__``: the same look-ups by boolean arrays over the columns.

        The three big ones — :attr:`device` (434 k indices on the 1.1 GB synthetic trace),
        :attr:`launch_by_corr` (1.0 M entries: ~0.2 s as a dict) and :attr:`aten_by_thread` (760 k
        indices) — are kept as arrays and made into Python containers only when a caller asks for
        them; the numpy paths read the arrays (:meth:`device_array`, :meth:`device_launch_array` …).
        """
        col = vectorized.column
        kind, name, stream = col(t, "kind"), col(t, "name"), col(t, "stream")
        # one byte per name id: 1 a sync call, 2 a wanted host name, 4 an aten op (not wanted)
        table = np.zeros(len(t.names), dtype=np.uint8)
        table[list(syncs)] |= 1
        table[list(wanted)] |= 2
        table[list(aten)] |= 4
        if not table.any():
            return
        code = table[name]
        if syncs:
            calls = np.flatnonzero(code & 1)
            self.sync_calls = calls[kind[calls] == K_RUNTIME].tolist()
        if wanted:
            hits = np.flatnonzero(code & 2)
            hits = hits[(stream[hits] < 0) & np.isin(kind[hits], HOST_KINDS)]
            host_by_name = self.host_by_name
            for i, nid in zip(hits.tolist(), name[hits].tolist()):
                host_by_name.setdefault(nid, []).append(i)
        if aten:
            ops = np.flatnonzero(code & 4)
            ops = ops[(kind[ops] == K_CPU_OP) & (stream[ops] < 0)]
            if len(ops):
                thread = col(t, "thread")[ops]
                present, first = np.unique(thread, return_index=True)
                order = present[np.argsort(first)].tolist()  # the threads in the order of their first op
                if len(order) == 1:
                    self._aten_np = {order[0]: ops}
                elif len(order) <= 8:  # a comparison per thread beats a sort
                    self._aten_np = {th: ops[thread == th] for th in order}
                else:
                    by = np.argsort(thread, kind="stable")
                    bounds = np.searchsorted(thread[by], present)
                    parts = np.split(ops[by], bounds[1:])
                    per = dict(zip(present.tolist(), parts))
                    self._aten_np = {th: per[th] for th in order}

    @property
    def device(self) -> list[int]:
        """The device events' indices (kernels, memcpys, memsets), ascending."""
        if self._device is None:
            self._device = self.device_array(self._t).tolist()
        return self._device

    @property
    def launch_by_corr(self) -> dict[int, int]:
        """Correlation id → the runtime call with it (the last one, when several share an id)."""
        if self._launch_by_corr is None:
            t = self._t
            calls = self._runtime_calls_np(t)
            self._launch_by_corr = dict(zip(vectorized.column(t, "correlation")[calls].tolist(), calls.tolist()))
        return self._launch_by_corr

    @property
    def aten_by_thread(self) -> dict[int, list[int]]:
        """Per host thread, ``aten::`` op indices (for "which op issued this sync")."""
        if self._aten_by_thread is None:
            self._aten_by_thread = {th: ops.tolist() for th, ops in self._aten_np.items()}
        return self._aten_by_thread

    def _runtime_calls_np(self, t: EventTable) -> Ints:
        """numpy path: the runtime calls with a correlation id, ascending (:attr:`launch_by_corr`'s values)."""
        calls = vectorized.kind_positions(t, (K_RUNTIME,))
        out: Ints = calls[vectorized.column(t, "correlation")[calls] >= 0]
        return out

    def device_array(self, t: EventTable) -> Ints:
        """numpy path: :attr:`device` as an int64 array (shared with the other numpy paths, per table)."""
        return vectorized.kind_positions(t, _DEVICE_KINDS)

    def launch_by_corr_arrays(self, t: EventTable) -> tuple[Ints, Ints]:
        """numpy path: :attr:`launch_by_corr` as two aligned arrays, once per table — the correlation
        ids, ascending, and the runtime call each maps to (the last call with the id, as the dict keeps
        it). When the calls' ids ascend (the usual order) they are taken as they are; else sorted by
        id (stable), keeping the last call of each id."""
        cached: tuple[Ints, Ints] | None = t.cache.get("np:launch_by_corr")
        if cached is None:
            np = self.np
            assert np is not None
            calls = self._runtime_calls_np(t)
            ids = vectorized.column(t, "correlation")[calls]
            if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
                order = np.argsort(ids, kind="stable")
                ids, calls = ids[order], calls[order]
                last = np.ones(len(ids), dtype=bool)
                np.not_equal(ids[1:], ids[:-1], out=last[:-1])
                ids, calls = ids[last], calls[last]
            cached = t.cache["np:launch_by_corr"] = (ids, calls)
        return cached

    def device_launch_array(self, t: EventTable) -> Ints:
        """numpy path: per device event (aligned with :meth:`device_array`), the index of the runtime
        call that launched it, or -1 — :meth:`device_launches` as an array, once per table."""
        cached: Ints | None = t.cache.get("np:device_launch")
        if cached is None:
            np = self.np
            assert np is not None
            ids, calls = self.launch_by_corr_arrays(t)
            wanted = vectorized.column(t, "correlation")[self.device_array(t)]
            cached = np.full(len(wanted), -1, dtype=np.int64)
            if len(ids):
                at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
                hit = (ids[at] == wanted) & (wanted >= 0)
                cached[hit] = calls[at[hit]]
            t.cache["np:device_launch"] = cached
        return cached

    def device_step_array(self, t: EventTable) -> Ints:
        """numpy path: per device event (aligned with :meth:`device_array`), the step it was launched
        in, or -1 — :meth:`device_steps` as an array, once per table and step list."""
        cached = t.cache.get("np:device_steps")
        if cached is not None and cached[0] is self.steps:
            found: Ints = cached[1]
            return found
        np = self.np
        assert np is not None
        launch = self.device_launch_array(t)
        out = np.full(len(launch), -1, dtype=np.int64)
        if self.steps:
            launched = np.flatnonzero(launch >= 0)
            when = vectorized.column(t, "ts")[launch[launched]]
            k = np.searchsorted(self.step_start_array(), when, side="right") - 1
            inside = k >= 0
            inside[inside] = when[inside] <= self.step_end_array()[k[inside]]
            out[launched[inside]] = k[inside]
        t.cache["np:device_steps"] = (self.steps, out)
        return out

    def step_start_array(self) -> Floats:
        """numpy path: :attr:`step_starts` as a float64 array (made once)."""
        if self._step_start_np is None:
            assert self.np is not None
            self._step_start_np = self.np.array(self.step_starts, dtype=self.np.float64)
        return self._step_start_np

    def step_end_array(self) -> Floats:
        """numpy path: the steps' ends as a float64 array (made once)."""
        if self._step_end_np is None:
            assert self.np is not None
            self._step_end_np = self.np.array([b for _, _, b in self.steps], dtype=self.np.float64)
        return self._step_end_np

    def class_array(self, t: EventTable, attribute: str) -> Any:
        """numpy path: one :class:`~gpudoctor.trace.kernels.KernelClass` attribute per name id (False /
        None for names no device event has): a bool array for a bool attribute, else an object array."""
        np = self.np
        assert np is not None
        classes = self.kernel_classes(t)
        values = [getattr(info, attribute) for info in classes.values()]
        if all(isinstance(v, bool) for v in values):
            out = np.zeros(len(t.names), dtype=bool)
        else:
            out = np.full(len(t.names), None, dtype=object)
        if classes:
            out[list(classes)] = values
        return out

    def host_ops(self, t: EventTable, predicate: Any) -> list[int]:
        """Host events inside the steps whose name satisfies ``predicate`` (names pre-selected above)."""
        out: list[int] = []
        for nid, idx in self.host_by_name.items():
            if predicate(t.names[nid]):
                out.extend(i for i in idx if self.in_steps(t.ts[i]))
        return sorted(out)

    def input_waits(self, t: EventTable) -> list[Interval]:
        """The loop's waits for its next batch inside the steps (``DataLoader.__next__`` spans), merged:
        the DataLoader's share of the step, the step picture's input wait and the long gaps' split
        all read them (computed once per table)."""
        if self._input_waits is None:
            ts, dur = t.ts, t.dur
            self._input_waits = merge((ts[i], ts[i] + dur[i]) for i in self.host_ops(t, is_input_wait))
        return self._input_waits

    def step_of(self, ts_us: float) -> int | None:
        """Index (0-based, into ``steps``) of the step whose host span holds ``ts_us``."""
        k = bisect.bisect_right(self.step_starts, ts_us) - 1
        if k >= 0 and ts_us <= self.steps[k][2]:
            return k
        return None

    def step_of_device(self, t: EventTable, i: int) -> int | None:
        """Step of a GPU event, by the host time of the call that launched it (computed once for all)."""
        return self.device_steps(t).get(i)

    def device_steps(self, t: EventTable) -> dict[int, int]:
        """Device event index → step index, for every device event launched inside a step (in event order)."""
        if self._device_step is None:
            self._device_step = self._device_steps(t)
        return self._device_step

    def _device_steps(self, t: EventTable) -> dict[int, int]:
        """Device event index → step index, for the device events launched inside a step."""
        if self.np is not None:  # from the array: one C-level conversion each way
            step = self.device_step_array(t)
            inside = step >= 0
            return dict(zip(self.device_array(t)[inside].tolist(), step[inside].tolist()))
        ts = t.ts
        starts, steps = self.step_starts, self.steps
        out: dict[int, int] = {}
        if not steps:
            return out
        ends = [b for _, _, b in steps]
        bisect_right = bisect.bisect_right
        for i, launch in self.device_launches(t).items():
            when = ts[launch]
            k = bisect_right(starts, when) - 1
            if k >= 0 and when <= ends[k]:
                out[i] = k
        return out

    def device_launches(self, t: EventTable) -> dict[int, int]:
        """Device event index → the runtime call that launched it (by correlation id), in event order."""
        if self._device_launch is None and self.np is not None:  # from the array (no launch_by_corr dict)
            calls = self.device_launch_array(t)
            hit = calls >= 0
            self._device_launch = dict(zip(self.device_array(t)[hit].tolist(), calls[hit].tolist()))
        if self._device_launch is None:
            corr, launch_by_corr = t.correlation, self.launch_by_corr
            found = [launch_by_corr.get(corr[i]) for i in self.device]
            self._device_launch = {i: launch for i, launch in zip(self.device, found) if launch is not None}
        return self._device_launch

    def outer_aten_ops(self, t: EventTable) -> dict[int, tuple[list[float], list[int]]]:
        """Per host thread: start times and indices of the outermost ``aten::`` ops, for bisecting.

        Computed once (the sync attribution and the autocast-cast attribution both need it). The
        ops are ordered by (start, longest first): by one C-level sort by start when no two of them
        start at the same time (the usual case with ns timestamps; the ops come nearly in order, so
        that sort is cheap), else by two stable ones (longest first, then by start), not a key
        tuple each.
        """
        if self._outer_aten is None and self.np is not None:
            self._outer_aten = {th: (starts.tolist(), outer.tolist())
                                for th, (starts, outer, _) in self.outer_aten_arrays(t).items()}
        if self._outer_aten is None:
            ts, dur = t.ts, t.dur
            out: dict[int, tuple[list[float], list[int]]] = {}
            for thread, idx in self.aten_by_thread.items():
                in_order = list(map(ts.__getitem__, idx))
                if not all(map(operator.lt, in_order, islice(in_order, 1, None))):  # not already strictly ascending
                    original = idx[:]
                    idx.sort(key=ts.__getitem__)  # nearly in order already: cheap
                    in_order = list(map(ts.__getitem__, idx))
                    if any(map(operator.eq, in_order, islice(in_order, 1, None))):  # ops that start together:
                        idx[:] = original  # the longest first among them (stable: equal durations keep their order)
                        idx.sort(key=dur.__getitem__, reverse=True)
                        idx.sort(key=ts.__getitem__)
                        in_order = list(map(ts.__getitem__, idx))
                starts: list[float] = []
                outer: list[int] = []
                end = float("-inf")
                for i, start in zip(idx, in_order):
                    if start >= end:
                        outer.append(i)
                        starts.append(start)
                        end = start + dur[i]
                out[thread] = (starts, outer)
            self._outer_aten = out
        return self._outer_aten

    def outer_aten_arrays(self, t: EventTable) -> dict[int, tuple[Floats, Ints, Floats]]:
        """numpy path: :meth:`outer_aten_ops` as arrays, per host thread (starts, op indices, ends).

        The ops sorted as the pure path sorts them (a stable sort by start when they are not in
        order already, by (start, longest first) when two start together); which are outermost is
        guessed as a merge would group them (an op starts a new one when it starts at or after the
        running maximum of the earlier ends) and then checked against the pure loop's own rule (an
        op is outermost when it starts at or after the end of the last outermost op before it) for
        every op at once; an op crossing its parent's end fails that check, and its thread is then
        walked in Python as on the pure path.
        """
        if self._outer_aten_np is None:
            np = self.np
            assert np is not None
            ts, dur = vectorized.column(t, "ts"), vectorized.column(t, "dur")
            out: dict[int, tuple[Floats, Ints, Floats]] = {}
            for thread, idx in self._aten_np.items():
                start = ts[idx]
                if len(idx) > 1 and not (start[1:] > start[:-1]).all():  # as the pure path: sorted in place
                    order = np.argsort(start, kind="stable")
                    ordered = start[order]
                    if (ordered[1:] == ordered[:-1]).any():
                        order = np.lexsort((-dur[idx], start))
                    idx = idx[order]
                    start = ts[idx]
                    self._aten_np[thread] = idx
                    if self._aten_by_thread is not None:
                        self._aten_by_thread[thread][:] = idx.tolist()
                end = start + dur[idx]
                outer = _outermost(np, start, end)
                out[thread] = (start[outer], idx[outer], end[outer])
            self._outer_aten_np = out
        return self._outer_aten_np

    def sync_waits(self, t: EventTable) -> list[tuple[float, float]]:
        """Per host sync call (``sync_calls``): the host's wait in it, from the start of the outermost
        ``aten::`` op that issued it to the end of the call.

        The op, not the call alone: ``.item()`` (``aten::item``) copies the value to the host and then
        syncs the stream, and the host may block in either — in the copy when it lands in pageable
        memory (``cudaMemcpyAsync`` 0.3–1.6 ms, then a 7 µs ``cudaStreamSynchronize``: pytorch/examples'
        DCGAN on the H200), in the sync when it lands in a staging buffer (a 29 ms
        ``cudaStreamSynchronize``: shared/traces/h200/sync_pageable). A call that no op holds
        (``torch.cuda.synchronize()``) waits for its own length.
        """
        ts, dur = t.ts, t.dur
        out: list[tuple[float, float]] = []
        for i in self.sync_calls:
            op = self.issuing_op(t, i)
            out.append((ts[i] if op is None else min(ts[i], ts[op]), ts[i] + dur[i]))
        return out

    def issuing_op(self, t: EventTable, i: int) -> int | None:
        """The outermost ``aten::`` op on event ``i``'s thread that holds its start, or None."""
        if self.np is not None:  # on the arrays: no lists of the outermost ops made
            arrays = self.outer_aten_arrays(t).get(t.thread[i])
            if arrays is None:
                return None
            outer_starts, outer, outer_ends = arrays
            when = t.ts[i]
            at = int(outer_starts.searchsorted(when, side="right")) - 1
            return int(outer[at]) if at >= 0 and when <= outer_ends[at] else None
        starts, ops = self.outer_aten_ops(t).get(t.thread[i], ([], []))
        k = bisect.bisect_right(starts, t.ts[i]) - 1
        return ops[k] if k >= 0 and t.ts[i] <= t.ts[ops[k]] + t.dur[ops[k]] else None

    def kernel_classes(self, t: EventTable) -> dict[int, kn.KernelClass]:
        """What each device event's name says (:class:`~gpudoctor.trace.kernels.KernelClass`), by name id.

        One classification per distinct device name, shared by every metric, instead of each metric
        classifying (and caching) names on its own.
        """
        if self._kernel_classes is None and self.np is not None:
            present = self.np.bincount(vectorized.column(t, "name")[self.device_array(t)], minlength=len(t.names))
            self._kernel_classes = {nid: kn.classify(t.names[nid]) for nid in self.np.flatnonzero(present).tolist()}
        if self._kernel_classes is None:
            names = t.names
            self._kernel_classes = {nid: kn.classify(names[nid]) for nid in sorted(set(map(t.name.__getitem__,
                                                                                              self.device)))}
        return self._kernel_classes

    def in_steps(self, ts_us: float) -> bool:
        return self.step_of(ts_us) is not None


def _outermost(np: Any, start: Floats, end: Floats) -> Any:
    """numpy path of :meth:`Context.outer_aten_ops`'s loop: which of the sorted ops are outermost (bool)."""
    n = len(start)
    if not n:
        return np.zeros(0, dtype=bool)
    guess = np.empty(n, dtype=bool)
    guess[0] = True
    np.greater_equal(start[1:], np.maximum.accumulate(end)[:-1], out=guess[1:])
    # the pure loop's rule, given the guess: the end of the last outermost op before each op
    last = np.maximum.accumulate(np.where(guess, np.arange(n), 0))
    rule = np.empty(n, dtype=bool)
    rule[0] = True
    np.greater_equal(start[1:], end[last[:-1]], out=rule[1:])
    if (rule == guess).all():
        return guess
    outer = np.zeros(n, dtype=bool)  # an op outlives its parent: the pure loop
    bound = float("-inf")
    for k, (a, b) in enumerate(zip(start.tolist(), end.tolist())):
        if a >= bound:
            outer[k] = True
            bound = b
    return outer


def _by_thread(t: EventTable, mask: Mask) -> dict[int, list[int]]:
    """The masked events' indices (ascending) per thread id, the threads in the order of their first event.

    The indices are found once; when the thread ids fit a byte, each thread's share of them is
    picked by a byte mask over those indices' thread bytes (C-level ``compress``), else by one
    look-up per index.
    """
    positions = mask_positions(mask)
    if not positions:
        return {}
    thread = t.thread
    if len(t.threads) > 256:
        out: dict[int, list[int]] = {}
        for i in positions:
            ops = out.get(thread[i])
            if ops is None:
                ops = out[thread[i]] = []
            ops.append(i)
        return out
    size = thread.itemsize
    low = bytes(compress(thread.tobytes()[0 if sys.byteorder == "little" else size - 1::size], mask))
    present = set(low)
    if len(present) == 1:
        return {thread[positions[0]]: positions}
    per = {th: list(compress(positions, low.translate(bytes(1 if b == th else 0 for b in range(256)))))
           for th in present}
    return dict(sorted(per.items(), key=lambda item: item[1][0]))
