"""Kineto events as gpudoctor keeps them: event kinds, msgspec structs, and the columnar table.

Why this exists: a trace holds millions of events; a dict (or a pandas row) per event is what makes
other tools slow and memory-hungry. msgspec decodes each event into a small struct with only the
fields gpudoctor reads, typed strictly (numbers are numbers), and :class:`Builder` folds every
decoded chunk into ``array`` columns with interned names through C-level ``map``/``compress``
passes — no Python bytecode runs per event on a well-formed trace. A chunk that does not fit the
strict types (a string ``ts``, ``"args": [1]``, an array where an event should be) is decoded again
with :data:`LOOSE_ITEM`, which accepts any JSON value while materialising none of its nested
content; its events are then checked one by one and the malformed ones counted, by reason, and
skipped — as are events with a negative or non-finite duration.

What it must not do: read files (that is :mod:`.reader`) or compute metrics.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Any, TypedDict, Union

import msgspec

from gpudoctor.trace import native
from gpudoctor.trace.masks import SIGN_CLEAR, doubles

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

NAN = float("nan")
#: The largest |ts| an event may have: 2^53 µs, 285 years after the Unix epoch (Kineto's clock is µs
#: since the epoch or since boot). Beyond it a float no longer holds whole µs, so a step's end minus its
#: start can be 0 (a trace with ts near 1e300 divided by that zero); such an event is malformed.
MAX_TS_US = float(2**53)
#: The longest duration an event may have: a day (a profile window lasts seconds to minutes; a
#: 1e15 µs step was reported as "a 1000000000000.0 ms step"). Longer is malformed.
MAX_DUR_US = 86_400e6
#: Categories only the 2021 schema uses.
_OLD_SCHEMA_CATS = frozenset({"Operator", "Kernel"})
#: The builder's kind codes: :data:`_KIND_BY_CAT`'s, with the 2021 schema's own categories marked
#: (+ _OLD_SCHEMA_MARK; :data:`_UNMARKED` takes it off) and the "Trace" span's category as _TRACE_CODE.
_OLD_SCHEMA_MARK = 0x20
_TRACE_CODE = 0xFF
_CODE_BY_CAT: dict[object, int] = {**_KIND_BY_CAT, **{cat: _KIND_BY_CAT[cat] + _OLD_SCHEMA_MARK for cat in _OLD_SCHEMA_CATS},
                                   "Trace": _TRACE_CODE}
_UNMARKED = bytes(b - _OLD_SCHEMA_MARK if _OLD_SCHEMA_MARK <= b < 2 * _OLD_SCHEMA_MARK else b for b in range(256))
_NOT_TRACE = bytes(0 if b == _TRACE_CODE else 1 for b in range(256))


class _Args(msgspec.Struct, gc=False, frozen=True):
    """The args of a complete event the tables keep (every other key is skipped, not decoded)."""

    stream: int = -1  # absent fields default to -1 (correlation, bytes) or NaN, never None
    correlation: int = -1
    bytes: int = -1


class _MemoryArgs(_Args, gc=False, frozen=True):
    """An instant event's args: the memory counters' fields too (complete events skip them: ~9% faster decode)."""

    total_allocated: float = msgspec.field(default=NAN, name="Total Allocated")
    total_reserved: float = msgspec.field(default=NAN, name="Total Reserved")
    device_type: int = msgspec.field(default=-1, name="Device Type")


_NO_ARGS = _Args()
_NO_MEMORY_ARGS = _MemoryArgs()


class _Timed(msgspec.Struct, tag_field="ph", gc=False):
    """The fields every event the tables keep carries; its ``ph`` tag picks the subclass."""

    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = NAN
    dur: float = NAN
    args: _Args = _NO_ARGS


class _Complete(_Timed, tag="X"):
    """A complete event (``"ph": "X"``): host ops, runtime calls, kernels, copies, annotations."""


class _Instant(_Timed, tag="i"):
    """An instant event (``"ph": "i"``): the profiler's memory counters among them."""

    args: _MemoryArgs = _NO_MEMORY_ARGS


#: Every other phase of the Chrome trace format (flows, metadata, counters, async, objects …): an
#: event of one of these is recognised by its ``ph`` (Kineto writes it first) and its other keys are
#: skipped, not decoded — about a third of a Kineto trace's events are flow events. A ``ph`` outside
#: this list, or none, fails the strict decode and the chunk is decoded loosely (same result, slower).
_SKIPPED_PHASES = "BEIbnestfPONDMVvRc()STpFCG"
_SKIPPED = tuple(msgspec.defstruct(f"_Phase{ord(ph)}", [], tag_field="ph", tag=ph, gc=False) for ph in _SKIPPED_PHASES)

if TYPE_CHECKING:
    _Event = _Complete | _Instant
else:  # what msgspec decodes one item of traceEvents into
    _Event = Union[(_Complete, _Instant, *_SKIPPED)]


# The loose shapes: any JSON value decodes into one of these without its nested content being built.
# _AnyObject and _LooseEvent stay dataclasses: msgspec takes at most one untagged Struct type in a
# union, and _AnyArray is that one in each union here.
@dataclass
class _AnyObject:
    """Any JSON object (its keys are skipped, not decoded)."""


class _AnyArray(msgspec.Struct, array_like=True, gc=False):
    """Any JSON array (its items are skipped, not decoded)."""


_AnyValue = _AnyObject | _AnyArray | int | float | str | bool | None


#: The args keys read (a TypedDict: msgspec decodes it as a dict of these keys only; values loose).
_LooseArgs = TypedDict("_LooseArgs", {"stream": _AnyValue, "correlation": _AnyValue, "bytes": _AnyValue,
                                      "Total Allocated": _AnyValue, "Total Reserved": _AnyValue,
                                      "Device Type": _AnyValue}, total=False)


@dataclass
class _LooseEvent:
    ph: _AnyValue = ""
    cat: _AnyValue = ""
    name: _AnyValue = ""
    pid: _AnyValue = 0
    tid: _AnyValue = 0
    ts: _AnyValue = None
    dur: _AnyValue = None
    args: _LooseArgs | _AnyArray | int | float | str | bool | None = None


#: One item of a ``traceEvents`` array, whatever it holds.
LOOSE_ITEM = _LooseEvent | _AnyArray | int | float | str | bool | None


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


class _HeaderOnly(msgspec.Struct):
    """The header keys alone (``traceEvents`` is skipped, not decoded)."""

    schemaVersion: int | str | None = None
    deviceProperties: list[_DeviceProperties] | None = None
    distributedInfo: _DistributedInfo | None = None


class _LooseHeader(msgspec.Struct):
    traceEvents: list[LOOSE_ITEM] | None = None


class EventTable(msgspec.Struct):
    """All complete (``ph: X``) events of one trace file as parallel columns.

    ``stream`` is -1 for host events, ``correlation`` -1 when absent, ``nbytes`` -1 when absent;
    ``name`` and ``thread`` index into ``names`` and ``threads``. Times are µs (floats).
    """

    names: list[str] = msgspec.field(default_factory=list)
    threads: list[tuple[Any, Any]] = msgspec.field(default_factory=list)
    kind: bytearray = msgspec.field(default_factory=bytearray)
    name: array = msgspec.field(default_factory=lambda: array("I"))
    thread: array = msgspec.field(default_factory=lambda: array("I"))
    ts: array = msgspec.field(default_factory=lambda: array("d"))
    dur: array = msgspec.field(default_factory=lambda: array("d"))
    stream: array = msgspec.field(default_factory=lambda: array("q"))
    correlation: array = msgspec.field(default_factory=lambda: array("q"))
    nbytes: array = msgspec.field(default_factory=lambda: array("q"))
    memory_ts: array = msgspec.field(default_factory=lambda: array("d"))
    memory_allocated: array = msgspec.field(default_factory=lambda: array("d"))
    memory_reserved: array = msgspec.field(default_factory=lambda: array("d"))
    ns_resolution: bool = False
    #: Derived look-ups computed once per table by the analyses (e.g. HTA's device selection). It is
    #: compared with the columns (``==``, as the parity tests use it): empty until an analysis runs.
    cache: dict[str, Any] = msgspec.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.kind)

    def positions_of(self, name_ids: Iterable[int]) -> list[int]:
        """Indices, ascending, of the events whose name id is one of ``name_ids``.

        Without a pass of Python-level membership tests over every event: when every name id fits a
        byte (≤ 256 names), the column's lowest bytes are marked by one ``bytes.translate`` and the
        hits found by ``bytes.find`` (or ``compress`` when they are many); otherwise each id's 4-byte
        pattern is searched in the column's bytes (a match off an item boundary is skipped), for up
        to 16 ids. Finding the ``ProfilerStep`` events of a 123 k-event trace takes ~0.3 ms this way
        and ~10 ms with ``enumerate``.
        """
        ids = set(name_ids)
        if not ids:
            return []
        size = self.name.itemsize
        out: list[int] = []
        if 0 < len(self.names) <= 256:  # every id fits its lowest byte: one byte per event, one search
            hits = self._name_low_bytes().translate(bytes(1 if k in ids else 0 for k in range(256)))
            if hits.count(1) > len(hits) >> 4:  # many: one C-level pass beats a find per hit
                return list(compress(range(len(hits)), hits))
            at = hits.find(1)
            while at >= 0:
                out.append(at)
                at = hits.find(1, at + 1)
            return out
        if len(ids) > 16:  # one membership test per event: done once per id set when the hits are few
            key = f"positions:{sorted(ids)}"  # (a long profile's ProfilerStep#N names are looked up thrice)
            cached: list[int] | None = self.cache.get(key)
            if cached is None:
                cached = list(compress(range(len(self.name)), map(ids.__contains__, self.name)))
                if len(cached) > len(self.name) >> 4:
                    return cached
                self.cache[key] = cached
            return cached[:]
        raw: bytes | None = self.cache.get("name_bytes")
        if raw is None:
            raw = self.cache["name_bytes"] = self.name.tobytes()
        for nid in ids:
            pattern = nid.to_bytes(size, sys.byteorder)
            at = raw.find(pattern)
            while at >= 0:
                if at % size:  # straddles two items: not this id
                    at = raw.find(pattern, at + 1)
                    continue
                out.append(at // size)
                at = raw.find(pattern, at + size)
        out.sort()
        return out

    def _name_low_bytes(self) -> bytes:
        """The name column's lowest bytes, one per event (the whole id when there are ≤ 256 names)."""
        low: bytes | None = self.cache.get("name_low_bytes")
        if low is None:
            size = self.name.itemsize
            low = self.cache["name_low_bytes"] = self.name.tobytes()[0 if sys.byteorder == "little" else size - 1::size]
        return low

    def name_mask(self, name_ids: Iterable[int]) -> bytes:
        """One byte per event, 1 where its name id is one of ``name_ids`` (to combine with other masks:
        :func:`mask_and`): one ``bytes.translate`` when every id fits a byte, else from :meth:`positions_of`
        (a few ids) or one C-level membership test per event."""
        ids = set(name_ids)
        if 0 < len(self.names) <= 256:
            return self._name_low_bytes().translate(bytes(1 if k in ids else 0 for k in range(256)))
        if len(ids) <= 16:  # a search per id (positions_of), then the few hits marked
            mask = bytearray(len(self.kind))
            for i in self.positions_of(ids):
                mask[i] = 1
            return bytes(mask)
        return bytes(map(ids.__contains__, self.name))  # one C-level membership test per event

    def nonnegative(self, column: str) -> bytes:
        """One byte per event, 1 where the (8-byte integer) column ``stream``/``correlation``/``nbytes``
        is ≥ 0: the sign bytes of the column, translated — C-level, no Python per event."""
        key = "nonnegative:" + column
        mask: bytes | None = self.cache.get(key)
        if mask is None:
            col: array = getattr(self, column)
            high = col.tobytes()[col.itemsize - 1 if sys.byteorder == "little" else 0::col.itemsize]
            mask = self.cache[key] = high.translate(SIGN_CLEAR)
        return mask

    def not_minus_one(self, column: str) -> bytes:
        """One byte per event, 1 where the column is not -1 (the value of an absent id): the
        :meth:`nonnegative` mask when every negative value is -1 (counted in C), else one test per event."""
        mask = self.nonnegative(column)
        col: array = getattr(self, column)
        if col.count(-1) == len(mask) - mask.count(1):
            return mask
        return bytes([x != -1 for x in col])


class Builder:
    """Folds decoded event structs into an :class:`EventTable`, counting malformed events by reason."""

    def __init__(self) -> None:
        self.table = EventTable()
        self._name_ids: dict[str, int] = {}
        self._thread_ids: dict[tuple[Any, Any], int] = {}
        self.old_schema = False
        self.malformed: Counter[str] = Counter()

    def add(self, events: list[_Event]) -> None:
        """Append the complete events of one strictly decoded chunk, column by column.

        One comprehension per column over the structs' attributes (specialised attribute loads,
        measured faster here than ``map(attrgetter)``), C-level checks for the times.
        """
        complete = [e for e in events if type(e) is _Complete]
        if len(complete) < len(events):
            instants = [e for e in events if type(e) is _Instant]
            if instants:
                self._add_memory(instants)
        # The kind codes, one dict look-up per event: the "Trace" span (the whole profile, not an
        # event gpudoctor keeps) and the 2021 schema's categories get marked codes, so that finding
        # them takes C-level byte searches instead of a string comparison per event.
        codes = bytes([_CODE_BY_CAT.get(e.cat, K_OTHER) for e in complete])
        if _TRACE_CODE in codes:
            complete = list(compress(complete, codes.translate(_NOT_TRACE)))
            codes = codes.replace(bytes([_TRACE_CODE]), b"")
        if not complete:
            return
        ts = [e.ts for e in complete]
        dur = [e.dur for e in complete]
        if not (math.isfinite(sum(ts) + sum(dur)) and min(dur) >= 0.0 and max(dur) <= MAX_DUR_US
                and min(ts) >= -MAX_TS_US and max(ts) <= MAX_TS_US):
            complete, ts, dur = self._drop_bad_times(complete, ts, dur)
            if not complete:
                return
            codes = bytes([_CODE_BY_CAT.get(e.cat, K_OTHER) for e in complete])
        try:
            stream, correlation, nbytes = _id_columns(complete)
        except OverflowError:  # an id beyond 64 bits (a stream of 10^20): malformed, as the loose path says
            fits = [all(-(1 << 63) <= v < (1 << 63) for v in (e.args.stream, e.args.correlation, e.args.bytes))
                    for e in complete]
            self.malformed["args of the wrong type"] += fits.count(False)
            complete, ts, dur = list(compress(complete, fits)), list(compress(ts, fits)), list(compress(dur, fits))
            if not complete:
                return
            codes = bytes([_CODE_BY_CAT.get(e.cat, K_OTHER) for e in complete])
            stream, correlation, nbytes = _id_columns(complete)
        t = self.table
        self._add_kinds(codes)
        name_ids = self._name_ids
        t.name.extend(array("I", [name_ids.setdefault(e.name, len(name_ids)) for e in complete]))
        thread_ids = self._thread_ids
        t.thread.extend(array("I", [thread_ids.setdefault((e.pid, e.tid), len(thread_ids)) for e in complete]))
        t.ts.frombytes(doubles(ts))
        t.dur.frombytes(doubles(dur))
        t.stream.extend(stream)
        t.correlation.extend(correlation)
        t.nbytes.extend(nbytes)
        self._note_resolution(ts)

    def _add_kinds(self, codes: bytes) -> None:
        """The kind column from one chunk's builder codes (the 2021 schema's marks taken off, noted)."""
        if not self.old_schema:  # the 2021 schema's categories show up in any stretch of events
            self.old_schema = max(codes[:5000]) >= _OLD_SCHEMA_MARK
        self.table.kind.extend(codes.translate(_UNMARKED))

    def _note_resolution(self, ts: Iterable[float]) -> None:
        """Whether timestamps carry fractions of a µs (ns resolution), once one chunk shows it."""
        if not self.table.ns_resolution:
            self.table.ns_resolution = not all(map(float.is_integer, ts))

    def add_scanned(self, chunk: bytes | bytearray | memoryview) -> bool:
        """Append one chunk's events through the C scanner (:mod:`.native`); False when it is not
        built or leaves the chunk to :meth:`add` (nothing was added then)."""
        if native.scan is None:
            return False
        columns = native.scan(chunk, self._name_ids, self._thread_ids, _CODE_BY_CAT)
        if columns is None:
            return False
        codes, name, thread, ts, dur, stream, correlation, nbytes, memory_ts, allocated, reserved = columns
        t = self.table
        if memory_ts:
            t.memory_ts.frombytes(memory_ts)
            t.memory_allocated.frombytes(allocated)
            t.memory_reserved.frombytes(reserved)
        if not codes:
            return True
        self._add_kinds(codes)
        t.name.frombytes(name)
        t.thread.frombytes(thread)
        t.ts.frombytes(ts)
        t.dur.frombytes(dur)
        t.stream.frombytes(stream)
        t.correlation.frombytes(correlation)
        t.nbytes.frombytes(nbytes)
        self._note_resolution(memoryview(ts).cast("d"))
        return True

    def _drop_bad_times(self, complete: list[_Complete], ts: list[float],
                        dur: list[float]) -> tuple[list[_Complete], list[float], list[float]]:
        """Leave out (and count) events whose start or duration is missing, infinite or negative."""
        reasons = [time_problem(a, d) for a, d in zip(ts, dur)]
        keep = [r is None for r in reasons]
        for reason in reasons:
            if reason is not None:
                self.malformed[reason] += 1
        return list(compress(complete, keep)), list(compress(ts, keep)), list(compress(dur, keep))

    def _add_memory(self, instants: list[_Instant]) -> None:
        """CUDA memory counters ("[memory]" instants with Device Type 1)."""
        t = self.table
        isfinite = math.isfinite
        memory = [e for e in instants if e.args.device_type == 1 and isfinite(e.args.total_allocated)
                  and isfinite(e.ts)]
        if memory:
            t.memory_ts.frombytes(doubles([e.ts for e in memory]))
            t.memory_allocated.frombytes(doubles([e.args.total_allocated for e in memory]))
            t.memory_reserved.frombytes(doubles([r if isfinite(r) else -1.0
                                                 for r in [e.args.total_reserved for e in memory]]))

    def add_loose(self, items: list[Any]) -> int:
        """Check loosely decoded items one by one, add the usable events; returns how many were usable."""
        good: list[_Event] = []
        for item in items:
            event = _from_loose(item, self.malformed)
            if event is not None:
                good.append(event)
        self.add(good)
        return len(good)

    def finish(self) -> EventTable:
        """The table, with the name and thread lists filled from the interning dicts."""
        self.table.names = list(self._name_ids)
        self.table.threads = list(self._thread_ids)
        return self.table


def _id_columns(complete: list[_Complete]) -> tuple[array, array, array]:
    """The stream, correlation and bytes columns of ``complete`` (OverflowError: an id beyond 64 bits)."""
    args = [e.args for e in complete]
    return (array("q", [a.stream for a in args]), array("q", [a.correlation for a in args]),
            array("q", [a.bytes for a in args]))


def time_problem(ts: float, dur: float) -> str | None:
    """Why an event's start and duration cannot be true (the reason counted as malformed), or None."""
    if not (math.isfinite(ts) and math.isfinite(dur)):
        return "missing or non-finite ts/dur"
    if dur < 0.0:
        return "negative duration"
    if dur > MAX_DUR_US:
        return "duration above a day"
    if abs(ts) > MAX_TS_US:
        return "ts beyond 2^53 µs (285 years)"
    return None


def _number(value: Any) -> float | None:
    if type(value) is int or type(value) is float:
        try:
            f = float(value)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return f if math.isfinite(f) else None
    return None


def _integer(value: Any, default: int) -> int | None:
    """An id-like field: an int (or an integral float or numeric string); None when it is malformed."""
    if value is None:
        return default
    if type(value) is int:
        return value if -(1 << 63) <= value < (1 << 63) else None
    if type(value) is float and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if type(value) is str:
        try:
            return int(value)
        except ValueError:  # ROCm writes a runtime call's stream as "0x0": not a device stream
            return default
    return None


def _from_loose(item: Any, malformed: Counter[str]) -> _Event | None:
    """The strict event behind a loosely decoded item, or None (counted in ``malformed``)."""
    if not isinstance(item, _LooseEvent):
        malformed["not an event object"] += 1
        return None
    if type(item.ph) is not str:
        malformed["ph not a string"] += 1
        return None
    if item.ph not in ("X", "i"):
        return None  # metadata, flows, counters: not read
    ts = _number(item.ts)
    dur = _number(item.dur) if item.ph == "X" else 0.0
    if ts is None or dur is None:
        malformed["ts/dur not numbers"] += 1
        return None
    problem = time_problem(ts, dur) if item.ph == "X" else None
    if problem is not None:
        malformed[problem] += 1
        return None
    args: _Args = _NO_ARGS if item.ph == "X" else _NO_MEMORY_ARGS
    if item.args is not None:
        a = item.args
        if not isinstance(a, dict):
            malformed["args not an object"] += 1
            return None
        ids = (_integer(a.get("stream"), -1), _integer(a.get("correlation"), -1), _integer(a.get("bytes"), -1),
               _integer(a.get("Device Type"), -1) if item.ph == "i" else -1)  # as strictly: complete events skip it
        if None in ids:
            malformed["args of the wrong type"] += 1
            return None
        stream, corr, nbytes, device_type = ids
        alloc, reserved = _number(a.get("Total Allocated")), _number(a.get("Total Reserved"))
        if item.ph == "X":
            args = _Args(stream=stream, correlation=corr, bytes=nbytes)  # type: ignore[arg-type]
        else:
            args = _MemoryArgs(stream=stream, correlation=corr, bytes=nbytes,  # type: ignore[arg-type]
                               device_type=device_type,  # type: ignore[arg-type]
                               total_allocated=NAN if alloc is None else alloc,
                               total_reserved=NAN if reserved is None else reserved)
    name = item.name if type(item.name) is str else "" if item.name is None else _text(item.name)
    cat = item.cat if type(item.cat) is str else ""
    if item.ph == "X":
        return _Complete(cat=cat, name=name, pid=_hashable(item.pid), tid=_hashable(item.tid), ts=ts, dur=dur, args=args)
    assert isinstance(args, _MemoryArgs)
    return _Instant(cat=cat, name=name, pid=_hashable(item.pid), tid=_hashable(item.tid), ts=ts, dur=dur, args=args)


def _text(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return "<large integer>"  # str() of a 5000-digit int raises ValueError
    return str(value) if isinstance(value, (int, float, bool)) else type(value).__name__.strip("_")


def _hashable(value: Any) -> int | str:
    return value if type(value) is int or type(value) is str else _text(value)


def malformed_note(malformed: Counter[str]) -> str | None:
    """One sentence for the notes: how many events were skipped, and why."""
    total = sum(malformed.values())
    if not total:
        return None
    reasons = ", ".join(f"{reason}: {count}" for reason, count in malformed.most_common())
    return f"{total} malformed event(s) skipped ({reasons})."
