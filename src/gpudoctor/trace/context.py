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
from gpudoctor.trace.events import (
    K_ANNOTATION,
    K_CPU_OP,
    K_KERNEL,
    K_MEMSET,
    K_OTHER,
    K_RUNTIME,
    EventTable,
)
from gpudoctor.trace.masks import Mask, mask_and, mask_not, mask_positions

HOST_KINDS = (K_CPU_OP, K_ANNOTATION, K_OTHER)
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


class Context:
    """Shared look-ups: which step a host time falls in, correlation → launch, kernels per step."""

    def __init__(self, t: EventTable, steps: list[tuple[int, float, float]]) -> None:
        self.steps = steps
        self.step_starts = [a for _, a, _ in steps]
        self.n_steps = len(steps)
        self.launch_by_corr: dict[int, int] = {}
        self.device: list[int] = []
        self.sync_calls: list[int] = []
        self._device_step: dict[int, int] | None = None
        self._device_launch: dict[int, int] | None = None
        self._kernel_classes: dict[int, kn.KernelClass] | None = None
        self._outer_aten: dict[int, tuple[list[float], list[int]]] | None = None
        #: host events of the few names the metrics look for, by name id
        self.host_by_name: dict[int, list[int]] = {}
        #: per host thread, ``aten::`` op indices (for "which op issued this sync")
        self.aten_by_thread: dict[int, list[int]] = {}
        names = t.names
        wanted = {i for i, n in enumerate(names) if n.startswith(WANTED_PREFIXES)
                  or any(w in n for w in COMPILE_WORK)}
        aten = {i for i, n in enumerate(names) if n.startswith("aten::")}
        syncs = {i for i, n in enumerate(names) if n in SYNC_CALLS}
        kind = t.kind
        # Index lists by kind through C-level byte masks (bytes.translate + compress), not a Python loop.
        self.device = list(compress(range(len(kind)), kind.translate(_DEVICE_MASK)))
        with_id = mask_and(kind.translate(_RUNTIME_MASK), t.nonnegative("correlation"))
        self.launch_by_corr = dict(zip(compress(t.correlation, with_id), mask_positions(with_id)))
        self.sync_calls = [i for i in t.positions_of(syncs) if kind[i] == K_RUNTIME] if syncs else []
        host = mask_not(t.nonnegative("stream"))
        name = t.name
        host_by_name = self.host_by_name
        for i in t.positions_of(wanted):
            if host[i] and kind[i] in HOST_KINDS:
                host_by_name.setdefault(name[i], []).append(i)
        aten -= wanted
        if aten:
            ops = mask_and(mask_and(t.name_mask(aten), kind.translate(_CPU_OP_MASK)), host)
            self.aten_by_thread = _by_thread(t, ops)

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
        """Step of a GPU event, by the host time of the call that launched it (computed once for all)."""
        return self.device_steps(t).get(i)

    def device_steps(self, t: EventTable) -> dict[int, int]:
        """Device event index → step index, for every device event launched inside a step (in event order)."""
        if self._device_step is None:
            self._device_step = self._device_steps(t)
        return self._device_step

    def _device_steps(self, t: EventTable) -> dict[int, int]:
        """Device event index → step index, for the device events launched inside a step."""
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
        starts, ops = self.outer_aten_ops(t).get(t.thread[i], ([], []))
        k = bisect.bisect_right(starts, t.ts[i]) - 1
        return ops[k] if k >= 0 and t.ts[i] <= t.ts[ops[k]] + t.dur[ops[k]] else None

    def kernel_classes(self, t: EventTable) -> dict[int, kn.KernelClass]:
        """What each device event's name says (:class:`~gpudoctor.trace.kernels.KernelClass`), by name id.

        One classification per distinct device name, shared by every metric, instead of each metric
        classifying (and caching) names on its own.
        """
        if self._kernel_classes is None:
            names = t.names
            self._kernel_classes = {nid: kn.classify(names[nid]) for nid in sorted(set(map(t.name.__getitem__,
                                                                                              self.device)))}
        return self._kernel_classes

    def in_steps(self, ts_us: float) -> bool:
        return self.step_of(ts_us) is not None


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
