"""Shared look-ups for the per-rank metrics, built in a few passes over the event columns.

Why this exists: every metric needs the same indexes — which step a host time falls in, which runtime
call launched a GPU event, the device events, the few host ops by name — and building them once keeps
the metrics from re-scanning millions of events each.

What it must not do: compute metrics itself.
"""

from __future__ import annotations

import bisect
import operator
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

HOST_KINDS = (K_CPU_OP, K_ANNOTATION, K_OTHER)
_DEVICE_MASK = bytes(1 if K_KERNEL <= k <= K_MEMSET else 0 for k in range(256))
_RUNTIME_MASK = bytes(1 if k == K_RUNTIME else 0 for k in range(256))
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
        kind, name, corr, stream, thread = t.kind, t.name, t.correlation, t.stream, t.thread
        # Index lists by kind through C-level byte masks (bytes.translate + compress), not a Python loop.
        positions = range(len(kind))
        self.device = list(compress(positions, kind.translate(_DEVICE_MASK)))
        runtime = list(compress(positions, kind.translate(_RUNTIME_MASK)))
        self.launch_by_corr = {corr[i]: i for i in runtime if corr[i] >= 0}
        self.sync_calls = [i for i in runtime if name[i] in syncs]
        interesting = wanted | aten
        host_by_name, aten_by_thread = self.host_by_name, self.aten_by_thread
        for i in t.positions_of(interesting):
            if stream[i] >= 0:
                continue
            k = kind[i]
            if k not in HOST_KINDS:
                continue
            nid = name[i]
            if nid in wanted:
                host_by_name.setdefault(nid, []).append(i)
            elif k == K_CPU_OP:  # one list per thread, created once (not a fresh [] per event for setdefault)
                ops = aten_by_thread.get(thread[i])
                if ops is None:
                    ops = aten_by_thread[thread[i]] = []
                ops.append(i)

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
                original = idx[:]
                idx.sort(key=ts.__getitem__)  # nearly in order already: cheap
                in_order = list(map(ts.__getitem__, idx))
                if any(map(operator.eq, in_order, islice(in_order, 1, None))):  # ops that start together:
                    idx[:] = original  # the longest first among them (stable: equal durations keep their order)
                    idx.sort(key=dur.__getitem__, reverse=True)
                    idx.sort(key=ts.__getitem__)
                starts: list[float] = []
                outer: list[int] = []
                end = float("-inf")
                for i in idx:
                    start = ts[i]
                    if start >= end:
                        outer.append(i)
                        starts.append(start)
                        end = start + dur[i]
                out[thread] = (starts, outer)
            self._outer_aten = out
        return self._outer_aten

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
