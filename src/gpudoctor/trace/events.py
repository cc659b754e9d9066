"""Kineto events as gpudoctor keeps them: event kinds, msgspec structs, and the columnar table.

Why this exists: a trace holds millions of events; a dict (or a pandas row) per event is what makes
other tools slow and memory-hungry. msgspec decodes each event into a small struct with only the
fields gpudoctor reads, and :class:`Builder` folds every decoded chunk at once, column by column, into
``array`` columns with interned names — about 50 bytes per event.

What it must not do: read files (that is :mod:`.reader`) or compute metrics.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import msgspec

# Event kinds (one byte per event in EventTable.kind).
K_OTHER = 0        # any other complete event on the host side
K_CPU_OP = 1       # cpu_op / Operator
K_ANNOTATION = 2   # user_annotation (ProfilerStep#N, DataLoader, record_function)
K_RUNTIME = 3      # cuda_runtime / cuda_driver / Runtime / mtia_runtime
K_KERNEL = 4
K_MEMCPY = 5
K_MEMSET = 6
K_GPU_ANNOTATION = 7
K_SYNC = 8         # cuda_sync (Event Sync, Context Sync, Stream Sync)
K_PYTHON = 9       # python_function (HTA skips these)

_KIND_BY_CAT_LOWER: dict[object, int] = {
    "cpu_op": K_CPU_OP, "operator": K_CPU_OP,
    "user_annotation": K_ANNOTATION,
    "cuda_runtime": K_RUNTIME, "cuda_driver": K_RUNTIME, "runtime": K_RUNTIME, "mtia_runtime": K_RUNTIME,
    "kernel": K_KERNEL,
    "gpu_memcpy": K_MEMCPY, "memcpy": K_MEMCPY,
    "gpu_memset": K_MEMSET, "memset": K_MEMSET,
    "gpu_user_annotation": K_GPU_ANNOTATION,
    "cuda_sync": K_SYNC,
    "python_function": K_PYTHON,
}

_KIND_BY_CAT: dict[object, int] = {**_KIND_BY_CAT_LOWER, "Operator": K_CPU_OP, "Runtime": K_RUNTIME,
                                    "Kernel": K_KERNEL, "Memcpy": K_MEMCPY, "Memset": K_MEMSET}

_Scalar = int | float | str | None

class _Args(msgspec.Struct, gc=False):
    stream: _Scalar = -1  # absent fields default to -1, so the column builders take the int fast path
    correlation: _Scalar = -1
    bytes: _Scalar = -1
    device: _Scalar = None
    total_allocated: _Scalar = msgspec.field(default=None, name="Total Allocated")
    total_reserved: _Scalar = msgspec.field(default=None, name="Total Reserved")
    device_type: _Scalar = msgspec.field(default=None, name="Device Type")


_NO_ARGS = _Args()
_NUMBER_TYPES = (int, float)


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: _Scalar = None
    name: _Scalar = None
    pid: _Scalar = None
    tid: _Scalar = None
    ts: _Scalar = None
    dur: _Scalar = None
    args: _Args | None = None


class _DeviceProperties(msgspec.Struct):
    name: str = ""
    totalGlobalMem: int | None = None
    computeMajor: int | None = None


class _DistributedInfo(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class _Header(msgspec.Struct):
    schemaVersion: int | str | None = None
    deviceProperties: list[_DeviceProperties] | None = None
    distributedInfo: _DistributedInfo | None = None
    traceEvents: list[_Event] | None = None


@dataclass
class EventTable:
    """All complete (``ph: X``) events of one trace file as parallel columns.

    ``stream`` is -1 for host events, ``correlation`` -1 when absent, ``nbytes`` -1 when absent;
    ``name`` and ``thread`` index into ``names`` and ``threads``. Times are µs (floats).
    """

    names: list[str] = field(default_factory=list)
    threads: list[tuple[Any, Any]] = field(default_factory=list)
    kind: bytearray = field(default_factory=bytearray)
    name: array = field(default_factory=lambda: array("I"))
    thread: array = field(default_factory=lambda: array("I"))
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    stream: array = field(default_factory=lambda: array("q"))
    correlation: array = field(default_factory=lambda: array("q"))
    nbytes: array = field(default_factory=lambda: array("q"))
    memory_ts: array = field(default_factory=lambda: array("d"))
    memory_allocated: array = field(default_factory=lambda: array("d"))
    memory_reserved: array = field(default_factory=lambda: array("d"))
    ns_resolution: bool = False

    def __len__(self) -> int:
        return len(self.kind)


class Builder:
    """Folds decoded event structs into an :class:`EventTable`."""

    def __init__(self) -> None:
        self.table = EventTable()
        self._name_ids: dict[str, int] = {}
        self._thread_ids: dict[tuple[Any, Any], int] = {}
        self.old_schema = False

    def add(self, events: list[_Event]) -> None:
        """Append the complete events of one decoded chunk, column by column (no per-event loop body)."""
        t = self.table
        num = _NUMBER_TYPES
        for e in events:  # CUDA memory counters ("[memory]" instants with Device Type 1)
            if e.ph == "i" and e.args is not None and e.args.device_type == 1 \
                    and type(e.args.total_allocated) in num and type(e.ts) in num:
                t.memory_ts.append(float(e.ts))  # type: ignore[arg-type]
                t.memory_allocated.append(float(e.args.total_allocated))  # type: ignore[arg-type]
                reserved = e.args.total_reserved
                t.memory_reserved.append(float(reserved) if type(reserved) in num else -1.0)  # type: ignore[arg-type]
        complete = [e for e in events
                    if e.ph == "X" and type(e.ts) in num and type(e.dur) in num and e.cat != "Trace"]
        if not complete:
            return
        kinds = _KIND_BY_CAT
        t.kind.extend([kinds.get(e.cat, K_OTHER) for e in complete])
        if not self.old_schema:  # the 2021 schema's categories show up in any stretch of events
            self.old_schema = any(e.cat == "Operator" or e.cat == "Kernel" for e in complete[:5000])
        name_ids = self._name_ids
        t.name.extend([name_ids.setdefault(e.name if type(e.name) is str else str(e.name), len(name_ids))
                       for e in complete])
        thread_ids = self._thread_ids
        t.thread.extend([thread_ids.setdefault((e.pid, e.tid), len(thread_ids)) for e in complete])
        ts = [e.ts for e in complete]
        t.ts.extend(ts)
        t.dur.extend([e.dur for e in complete])
        args = [e.args or _NO_ARGS for e in complete]
        t.stream.extend([a.stream if type(a.stream) is int else _as_int(a.stream) for a in args])
        t.correlation.extend([a.correlation if type(a.correlation) is int else _as_int(a.correlation)
                              for a in args])
        t.nbytes.extend([a.bytes if type(a.bytes) is int else _as_int(a.bytes) for a in args])
        if not t.ns_resolution:
            t.ns_resolution = any(type(v) is float and v != int(v) for v in ts)

    def finish(self) -> EventTable:
        """The table, with the name and thread lists filled from the interning dicts."""
        self.table.names = list(self._name_ids)
        self.table.threads = list(self._thread_ids)
        return self.table


def _as_int(value: _Scalar) -> int:
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
