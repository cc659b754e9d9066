"""Reads torch.profiler (Kineto) Chrome-trace JSON into compact columnar event tables.

Why this exists: Holistic Trace Analysis turns every event into a Python dict and then a pandas
row, which costs 6–7× the JSON size in memory and runs at ~15–20 MB/s. Here the JSON is decoded with
msgspec into small typed structs (only the fields gpudoctor uses), in chunks of the ``traceEvents``
array when the file has Kineto's one-event-per-block layout, and each chunk is folded at once into
``array`` columns with interned names. Peak memory is then the columns plus one chunk.

Both schemas are read: today's (``cpu_op``/``cuda_runtime``/``kernel``/``gpu_memcpy``…) and the 2021
one (``Operator``/``Runtime``/``Kernel``/``Memcpy``/``Memset``), with µs integer or ns-resolution
float timestamps. Traces without ``distributedInfo`` or ``deviceProperties``, CPU-only, ROCm and
non-CUDA (MTIA) traces load fine and simply yield fewer metrics.

What it must not do: import torch, numpy or pandas; compute metrics (that is :mod:`.metrics`); raise
anything but :class:`~gpudoctor.exitcodes.UserError` for a bad file.
"""

from __future__ import annotations

import gc
import gzip
import os
import re
import threading
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from gpudoctor.exitcodes import ExitCode, UserError

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

#: Bytes of the traceEvents array decoded at once in chunked mode.
CHUNK_BYTES = 16 * 1024 * 1024
#: Plain-JSON traces at least this large are decoded by two processes (one per half).
PARALLEL_MIN_BYTES = 256 * 1024 * 1024
#: Separator between events in Kineto's own layout ("  },\n  {").
_KINETO_SEP = re.compile(rb"\}\s*,\s*\n  \{")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)


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


@dataclass
class RankTrace:
    """One trace file: its events and what its header says about the job."""

    path: str
    rank: int
    rank_from: str                 # "distributedInfo" | "file name" | "position"
    events: EventTable
    device_name: str | None = None
    device_memory_bytes: int | None = None
    compute_major: int | None = None
    world_size: int | None = None
    backend: str | None = None
    schema: str = "kineto"         # "kineto" | "kineto-2021"
    notes: list[str] = field(default_factory=list)
    size_bytes: int = 0


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


def find_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and directories into the trace files to read, in a stable order.

    Raises:
        UserError: a path does not exist, or a directory holds no ``.json``/``.json.gz`` file.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and _looks_like_trace_name(q.name))
            if not found:
                raise UserError(f"{p} holds no .json or .json.gz trace files.", ExitCode.USAGE)
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise UserError(f"{p} does not exist.", ExitCode.USAGE)
    return list(dict.fromkeys(out))


def _looks_like_trace_name(name: str) -> bool:
    low = name.lower()
    return (low.endswith(".json") or low.endswith(".json.gz")) and not low.endswith(".result.json")


def _open(path: Path) -> BinaryIO:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}.", ExitCode.USAGE) from None
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def _read_chunks(fh: BinaryIO, size: int) -> Iterator[bytes]:
    while True:
        block = fh.read(size)
        if not block:
            return
        yield block


def load_trace(path: str | Path, position: int = 0, chunk_bytes: int = CHUNK_BYTES) -> RankTrace:
    """Read one Kineto trace file (``.json`` or ``.json.gz``).

    Args:
        path: The file.
        position: Its index among the files being read (the rank of last resort).
        chunk_bytes: How much of the ``traceEvents`` array to decode at once.

    Raises:
        UserError: the file is unreadable, truncated, corrupt, or JSON that is not a trace.
    """
    p = Path(path)
    builder = Builder()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small acyclic objects: the cyclic collector would only rescan them
    try:
        with _open(p) as fh:
            header = _decode_stream(fh, builder, chunk_bytes, p)
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise UserError(f"{p} is not a readable trace: the file is truncated or corrupt ({exc}).",
                        ExitCode.USAGE) from None
    except msgspec.DecodeError as exc:
        raise UserError(f"{p} is not a valid trace: {_short(exc)}.", ExitCode.USAGE) from None
    finally:
        if gc_was_enabled:
            gc.enable()
    builder.finish()
    return _rank_trace(p, position, header, builder)


def _short(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower():
        return "the JSON is truncated"
    return text[:160]


def _decode_stream(fh: BinaryIO, builder: Builder, chunk_bytes: int, path: Path) -> _Header:
    """Decode the file, chunk by chunk when it has Kineto's layout, else in one go."""
    first = fh.read(max(chunk_bytes, 1 << 20))
    start = first.find(b'"traceEvents"')
    bracket = first.find(b"[", start) if start >= 0 else -1
    if start < 0 or bracket < 0 or not _KINETO_SEP.search(first, bracket):
        return _decode_whole(first + fh.read(), builder, path)
    head_text = first[:start].rstrip().rstrip(b",") + b"}"
    try:
        header = msgspec.json.decode(head_text, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _decode_whole(first + fh.read(), builder, path)
    events_at = bracket
    if _split_worthwhile(fh, path, chunk_bytes):
        from gpudoctor.trace.split import decode_in_two

        trailer = decode_in_two(fh, path, first, events_at, builder, chunk_bytes)
    else:
        trailer = fold_events(bytearray(first[events_at:]), _read_chunks(fh, chunk_bytes), builder, at_eof=True)
    assert trailer is not None
    header.distributedInfo = header.distributedInfo or trailer.distributedInfo
    header.deviceProperties = header.deviceProperties or trailer.deviceProperties
    header.traceEvents = []
    return header


def fold_events(pending: bytearray, blocks: Iterator[bytes], builder: Builder, at_eof: bool) -> _Header | None:
    """Decode the events in ``pending`` plus ``blocks`` chunk by chunk into ``builder``.

    ``pending[0]`` is a spare byte just before the first event: it is turned into "[" and the ","
    after the last complete event into "]", so each chunk is decoded in place without copies. When
    ``at_eof`` the input ends with the array's "]" and the document's last keys, which are returned
    decoded; otherwise it ends exactly after an event's "}".

    Raises:
        msgspec.DecodeError: the input is truncated or not JSON.
    """
    decoder = msgspec.json.Decoder(list[_Event])
    while True:
        cut = _last_separator(pending)
        nxt = next(blocks, None)
        if cut >= 0 and nxt is not None:
            pending[0] = 0x5B  # "["
            pending[cut + 1] = 0x5D  # "]"
            with memoryview(pending) as view:
                _decode_events(decoder, view[:cut + 2], builder)
            rest = pending.index(b"{", cut + 2) - 1
            carry = bytearray(pending[rest:])
            carry += nxt
            pending = carry
            continue
        if nxt is not None:
            pending += nxt
            continue
        break
    if not at_eof:
        pending[0] = 0x5B
        pending.append(0x5D)
        _decode_events(decoder, pending, builder)
        return None
    return _fold_tail(pending, decoder, builder)


def _fold_tail(pending: bytearray, decoder: msgspec.json.Decoder, builder: Builder) -> _Header:
    """The last events, "]", and the keys after the array (the "]" is searched from the end)."""
    pos = len(pending)
    while True:
        pos = pending.rfind(b"]", 0, pos)
        if pos < 1:
            raise msgspec.DecodeError("truncated JSON: the traceEvents array or the document is not closed")
        last = pos - 1
        while last > 0 and pending[last] in b" \t\r\n":
            last -= 1
        if pending[last] != 0x7D:  # "}": the end of the last event
            continue
        tail = bytes(pending[pos + 1:]).strip()
        if not tail.endswith(b"}"):
            continue
        try:
            candidate = msgspec.json.decode(b"{" + tail.lstrip(b",").lstrip(), type=_Header)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        pending[0] = 0x5B
        pending[last + 1] = 0x5D
        try:
            with memoryview(pending) as view:
                events = decoder.decode(view[:last + 2])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        builder.add(events)
        return candidate


def _split_worthwhile(fh: BinaryIO, path: Path, chunk_bytes: int) -> bool:
    """Decode in two processes: a large plain file, two cores, fork, and no other threads to fork."""
    if isinstance(fh, gzip.GzipFile) or os.environ.get("GPUDOCTOR_TRACE_WORKERS", "2") == "1":
        return False
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or threading.active_count() > 1:
        return False
    return _size(path) >= max(PARALLEL_MIN_BYTES, 8 * chunk_bytes)


def _last_separator(buf: bytes | bytearray) -> int:
    """Offset of the ``}`` that ends the last complete event in ``buf``, or -1."""
    cut = buf.rfind(b"},\n  {")
    if cut >= 0:
        return cut
    last = None
    for last in _KINETO_SEP.finditer(buf):  # noqa: B007 - we want the last match
        pass
    return last.start() if last is not None else -1


def _decode_events(decoder: msgspec.json.Decoder, text: bytes | bytearray | memoryview, builder: Builder) -> None:
    try:
        builder.add(decoder.decode(text))
    except msgspec.ValidationError as exc:
        raise msgspec.DecodeError(f"an event has an unexpected shape ({exc})") from None


def _decode_whole(text: bytes, builder: Builder, path: Path) -> _Header:
    try:
        typed = msgspec.json.decode(text, type=_Header)
    except msgspec.ValidationError:
        typed = None
    if typed is not None and typed.traceEvents is not None:
        builder.add(typed.traceEvents)
        typed.traceEvents = []
        return typed
    raw = msgspec.json.decode(text)
    if isinstance(raw, list):
        events_raw: Any = raw
        header = _Header()
    elif isinstance(raw, dict) and isinstance(raw.get("traceEvents"), list):
        events_raw = raw["traceEvents"]
        try:
            header = msgspec.convert({k: v for k, v in raw.items() if k != "traceEvents"}, _Header)
        except msgspec.ValidationError:
            header = _Header()
    else:
        raise UserError(f"{path} is JSON but not a torch.profiler trace (it has no traceEvents list).",
                        ExitCode.USAGE)
    del raw
    events = []
    for item in events_raw:
        if isinstance(item, dict):
            try:
                events.append(msgspec.convert(item, _Event))
            except msgspec.ValidationError:
                continue
    if events_raw and not events:
        raise UserError(f"{path} is JSON but its traceEvents are not trace events.", ExitCode.USAGE)
    builder.add(events)
    return header


def _rank_trace(path: Path, position: int, header: _Header, builder: Builder) -> RankTrace:
    table = builder.table
    notes: list[str] = []
    dist = header.distributedInfo
    if dist is not None and dist.rank is not None:
        rank, rank_from = dist.rank, "distributedInfo"
    else:
        m = _RANK_IN_NAME.search(path.name)
        if m:
            rank, rank_from = int(m.group(1)), "file name"
        else:
            rank, rank_from = position, "position"
        notes.append(f"{path.name}: no distributedInfo; rank {rank} taken from the {rank_from}.")
    device_name = mem = major = None
    if header.deviceProperties:
        device_name = header.deviceProperties[0].name or None
        mem = header.deviceProperties[0].totalGlobalMem
        major = header.deviceProperties[0].computeMajor
    else:
        notes.append(f"{path.name}: no deviceProperties: GPU model unknown.")
    if not any(k in (K_KERNEL, K_MEMCPY, K_MEMSET) for k in set(table.kind)):
        if any(s >= 0 for s in table.stream):
            notes.append(f"{path.name}: device events without CUDA kernel categories (non-CUDA "
                         "accelerator?): only device-wide metrics are computed.")
        else:
            notes.append(f"{path.name}: no GPU events (CPU-only trace): GPU metrics are not computed.")
    if len(table) == 0:
        notes.append(f"{path.name}: the trace has no complete events.")
    return RankTrace(
        path=str(path), rank=rank, rank_from=rank_from, events=table,
        device_name=device_name, device_memory_bytes=mem, compute_major=major,
        world_size=dist.world_size if dist else None, backend=dist.backend if dist else None,
        schema="kineto-2021" if builder.old_schema else "kineto", notes=notes,
        size_bytes=_size(path),
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_traces(paths: Iterable[str | Path]) -> list[RankTrace]:
    """Read every trace file under ``paths``; ranks missing from the files get their position.

    A file named on the command line must be a trace. Inside a directory, JSON files that are not
    traces (a run's ``result.json``, a config) are skipped with a note on the first trace.

    Raises:
        UserError: a named file is not a readable trace, or a directory holds no trace at all.
    """
    named = {Path(p) for p in paths if not Path(p).is_dir()}
    traces: list[RankTrace] = []
    skipped: list[str] = []
    for f in find_trace_files(paths):
        try:
            traces.append(load_trace(f, len(traces)))
        except UserError:
            if f in named:
                raise
            skipped.append(f.name)
    if not traces:
        raise UserError(f"no torch.profiler trace found among {', '.join(skipped)}.", ExitCode.USAGE)
    if skipped:
        traces[0].notes.append(f"skipped {len(skipped)} JSON file(s) that are not traces: {', '.join(skipped[:5])}.")
    seen: set[int] = set()
    for tr in traces:
        if tr.rank in seen:
            new = max(seen) + 1
            tr.notes.append(f"{Path(tr.path).name}: rank {tr.rank} appears twice; using {new} for this file.")
            tr.rank = new
        seen.add(tr.rank)
    return traces


__all__ = ["EventTable", "RankTrace", "find_trace_files", "load_trace", "read_traces"]
