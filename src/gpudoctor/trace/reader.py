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

import errno
import gc
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.trace.chunks import (
    KINETO_SEP,
    EventTooLarge,
    array_ends,
    decode_members,
    fold_events,
    members_before,
    read_blocks,
)
from gpudoctor.trace.events import (
    K_ANNOTATION,
    K_CPU_OP,
    K_GPU_ANNOTATION,
    K_KERNEL,
    K_MEMCPY,
    K_MEMSET,
    K_OTHER,
    K_PYTHON,
    K_RUNTIME,
    K_SYNC,
    LOOSE_ITEM,
    Builder,
    EventTable,
    _Event,
    _Header,
    _HeaderOnly,
    _LooseHeader,
    malformed_note,
)
from gpudoctor.trace.gunzip import IN_MEMORY_MAX_BYTES, GunzipStream, InflatesTooMuch

if TYPE_CHECKING:
    from gpudoctor.trace.split import GzipHalf

#: Bytes of the traceEvents array decoded at once in chunked mode.
#: 1 MB decoded ~10–20% faster than 4 MB here (df_index_resolver, the 124 MB synthetic trace: a chunk's
#: structs are still in the CPU caches when they are folded into columns); 16 MB held 70 MB more.
CHUNK_BYTES = 1024 * 1024
#: The first read, in which ``"traceEvents"`` must start for the chunked decode (Kineto writes a few kB before it).
HEADER_BYTES = 4 * 1024 * 1024
#: A trace with at least this much JSON is decoded by two processes (one per half) when it is the
#: only file read and a second core is there (``processes=2``): below it the fork and the merge cost
#: about what the second core saves, the parent setting up the rules on that core meanwhile
#: (the split_threshold.py probe (docs/bench-history.md), docs/bench-history.md "Where one trace starts to gain from a second decoder",
#: 3 Dec 2026: one decoder faster on nccl_parser_config's 9.8 MB, median 0.159 against 0.185 s; the two
#: within ±3% of each other from 25.8 to 34.8 MB, where the split costs 10-20% more CPU; two faster
#: on df_index_resolver's 53.7 MB, 0.321 against 0.364 s).
PARALLEL_MIN_BYTES = 30 * 1024 * 1024
#: JSON without Kineto's one-event-per-block layout is decoded in one piece, up to this size.
MAX_WHOLE_BYTES = 2 * 1024 * 1024 * 1024
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')


class RankTrace(msgspec.Struct):
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
    notes: list[str] = msgspec.field(default_factory=list)
    size_bytes: int = 0
    malformed_events: int = 0      # events skipped because a field had an impossible value or type


class TraceFileError(UserError):
    """A file that is not a readable trace: ``corrupt`` (truncated, unreadable) or JSON of another kind.

    Picklable (it crosses the worker-process boundary as a value).
    """

    def __init__(self, message: str, corrupt: bool = True, reason: str = "") -> None:
        super().__init__(message, ExitCode.USAGE)
        self.corrupt = corrupt
        self.reason = reason or message

    def __reduce__(self) -> tuple[Any, ...]:
        return (TraceFileError, (str(self), self.corrupt, self.reason))


def find_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and directories into the trace files to read, in a stable order.

    Symbolic links to directories are not followed (a link loop cannot make the walk endless);
    inside a directory every entry named ``*.json``/``*.json.gz`` is taken, so that one which is not a
    regular file (a FIFO, a device, a symlink loop) is named in a note as left out when it is read
    (:func:`_open` refuses it by ``stat``, without opening it).

    Raises:
        UserError: a path does not exist or is not a regular file or directory, a directory cannot be
            read, or it holds no ``.json``/``.json.gz`` file.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        kind = _path_kind(p)
        if kind == "directory":
            found = _walk(p)
            if not found:
                raise UserError(f"{p} holds no .json or .json.gz trace files.", ExitCode.USAGE)
            out.extend(found)
        elif kind == "file":
            out.append(p)
        else:
            raise UserError(f"{p} {kind}.", ExitCode.USAGE)
    return list(dict.fromkeys(out))


def _path_kind(p: Path) -> str:
    """"file", "directory", or the rest of a sentence saying why the path cannot be read."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "is a broken symbolic link" if os.path.islink(p) else "does not exist"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop"
        return f"cannot be read: {exc.strerror}"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    what = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
            stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(st.st_mode), "not a regular file")
    return f"is {what}, not a trace file"


def _walk(root: Path) -> list[Path]:
    errors: list[OSError] = []
    found: list[Path] = []
    for directory, _dirs, files in os.walk(root, onerror=errors.append):
        for name in files:
            q = Path(directory) / name
            if looks_like_trace_name(name):  # a FIFO, device or link loop too: named as left out, not skipped unseen
                found.append(q)
    if errors and not found:
        exc = errors[0]
        raise UserError(f"cannot read directory {exc.filename or root}: {exc.strerror}.", ExitCode.USAGE)
    return sorted(found)


def looks_like_trace_name(name: str) -> bool:
    low = name.lower()
    return (low.endswith(".json") or low.endswith(".json.gz")) and not low.endswith(".result.json")


def _open(path: Path) -> BinaryIO:
    """The file's JSON as a stream: the file itself, or its gzip content inflated by a background thread."""
    kind = _path_kind(path)
    if kind != "file":
        raise TraceFileError(f"{path} {kind}.", corrupt=True, reason=kind)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise TraceFileError(f"cannot read {path}: {exc.strerror}.", reason=f"cannot be read ({exc.strerror})") from None
    magic = fh.read(2)
    fh.seek(0)
    if magic != b"\x1f\x8b":
        return fh
    return GunzipStream(fh, packed_bytes=os.fstat(fh.fileno()).st_size)  # type: ignore[return-value]


def _gzip_half(path: Path, processes: int, chunk_bytes: int) -> GzipHalf | None:
    """A child decoding the second half of a gzip trace's events (see :class:`GzipHalf`), when
    ``processes`` allows two, the gzip trailer says the JSON is :data:`PARALLEL_MIN_BYTES` to
    :data:`IN_MEMORY_MAX_BYTES` (the child holds it all in memory) and this process may fork."""
    if processes < 2 or _path_kind(path) != "file":  # a FIFO would block the open (the reader says what it is)
        return None
    try:
        with path.open("rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return None
            fh.seek(-4, os.SEEK_END)
            hint = int.from_bytes(fh.read(4), "little")  # the last member's size modulo 4 GiB: a hint
    except OSError:
        return None  # the reader says what is wrong with the file
    if hint > IN_MEMORY_MAX_BYTES or not _split_worthwhile(hint, chunk_bytes):
        return None
    from gpudoctor.trace.split import GzipHalf

    return GzipHalf(path, hint // 2, chunk_bytes)


def load_trace(path: str | Path, position: int = 0, chunk_bytes: int = CHUNK_BYTES, processes: int = 1) -> RankTrace:
    """Read one Kineto trace file (``.json`` or ``.json.gz``).

    Args:
        path: The file.
        position: Its index among the files being read (the rank of last resort).
        chunk_bytes: How much of the ``traceEvents`` array to decode at once.
        processes: How many processes may decode it: 2 splits a large file's events in halves, the
            second decoded by a forked child (when this process may fork: see :func:`_split_worthwhile`).
            The table is the same either way.

    Raises:
        TraceFileError: the file is unreadable, truncated, corrupt, or JSON that is not a trace.
    """
    p = Path(path)
    builder = Builder()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small acyclic objects: the cyclic collector would only rescan them
    try:
        half = _gzip_half(p, processes, chunk_bytes)
        try:
            with _open(p) as fh:
                header = _decode_stream(fh, builder, chunk_bytes, p, processes, half)
        finally:
            if half is not None:
                half.close()
    except InflatesTooMuch as exc:
        raise TraceFileError(f"{p} is not a readable trace: {exc}.", reason=str(exc)) from None
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        reason = f"the file is truncated or corrupt ({exc})"
        raise TraceFileError(f"{p} is not a readable trace: {reason}.", reason=reason) from None
    except RecursionError:
        reason = "its JSON is nested too deeply"
        raise TraceFileError(f"{p} is not a valid trace: {reason}.", corrupt=False, reason=reason) from None
    except (EventTooLarge, MemoryError) as exc:
        reason = str(exc) if isinstance(exc, EventTooLarge) else "it does not fit in memory"
        raise TraceFileError(f"{p} is not a readable trace: {reason}.", reason=reason) from None
    except msgspec.DecodeError as exc:
        reason = _short(exc)
        raise TraceFileError(f"{p} is not a valid trace: {reason}.", reason=reason) from None
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


def _decode_stream(fh: BinaryIO, builder: Builder, chunk_bytes: int, path: Path, processes: int = 1,
                   half: GzipHalf | None = None) -> _Header:
    """Decode the file, chunk by chunk when it has Kineto's layout, else in one go; with ``half``, a
    child decodes the second half of a gzip file's events (stopped where the layout is not Kineto's)."""
    first = fh.read(max(chunk_bytes, HEADER_BYTES))
    start = first.find(b'"traceEvents"')
    bracket = first.find(b"[", start) if start >= 0 else -1
    if start < 0 or bracket < 0 or not KINETO_SEP.search(first, bracket):
        return _decode_whole(_read_rest(fh, first, path), builder, path)
    header = decode_members(members_before(first, start), _Header)
    if header is None:
        return _decode_whole(_read_rest(fh, first, path), builder, path)
    events_at = bracket
    size = _stream_size(fh)
    if half is not None and half.middle > len(first):
        trailer = fold_events(bytearray(first[events_at:]), half.blocks(fh, len(first), chunk_bytes), builder,
                              at_eof=half.at_eof)
        trailer = half.merge_into(builder) if trailer is None else trailer
    elif size is not None and processes >= 2 and _split_worthwhile(size, chunk_bytes):
        from gpudoctor.trace.split import decode_in_two

        trailer = decode_in_two(fh, size, lambda: path.open("rb"), first, events_at, builder, chunk_bytes)
    else:
        trailer = fold_events(bytearray(first[events_at:]), read_blocks(fh, chunk_bytes), builder, at_eof=True)
    assert trailer is not None
    header.distributedInfo = header.distributedInfo or trailer.distributedInfo
    header.deviceProperties = header.deviceProperties or trailer.deviceProperties
    header.traceEvents = []
    return header


def _read_rest(fh: BinaryIO, first: bytes, path: Path) -> bytearray:
    """The whole document (JSON without Kineto's layout is decoded in one piece), size-capped.

    A plain file is read into one buffer of its size (no growth, no copies); a gzip stream in
    blocks joined once.
    """
    too_big = EventTooLarge(f"it holds over {MAX_WHOLE_BYTES >> 30} GB of JSON without Kineto's one-event-per-line "
                            "layout, more than gpudoctor reads in one piece")
    if not isinstance(fh, GunzipStream):
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_WHOLE_BYTES:
            raise too_big
        data = bytearray(max(size, len(first)))
        data[:len(first)] = first
        with memoryview(data) as view:
            filled = len(first)
            while filled < len(data):
                got = fh.readinto(view[filled:])  # type: ignore[attr-defined]
                if not got:
                    break
                filled += got
        del data[filled:]
        return data
    whole = bytearray(first)  # grown in place (one copy of the JSON, not the blocks, their join and a copy)
    while True:
        block = fh.read(CHUNK_BYTES)
        if not block:
            return whole
        whole += block
        if len(whole) > MAX_WHOLE_BYTES:
            raise too_big


def _split_worthwhile(size: int, chunk_bytes: int) -> bool:
    """Decode in two processes: JSON large enough, and a process that may fork.

    Fork only where no other thread runs (a forked child gets only the calling thread; a lock
    another one held stays locked) and the platform has it; the caller has already decided that a
    second core is there (``processes=2``: the file is the only one read and ``--jobs`` allows two).
    """
    if size < max(PARALLEL_MIN_BYTES, 8 * chunk_bytes):
        return False
    from gpudoctor.forkpool import can_fork

    return can_fork()


def _stream_size(fh: BinaryIO) -> int | None:
    """Bytes of JSON in a plain file; None for a gzip stream (inflated as it is read)."""
    if isinstance(fh, GunzipStream):
        return None
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        return None


_STRICT_LIST = msgspec.json.Decoder(list[_Event])
_LOOSE_LIST = msgspec.json.Decoder(list[LOOSE_ITEM])


def _decode_whole(text: bytearray, builder: Builder, path: Path) -> _Header:
    """A document without Kineto's layout: an object with ``traceEvents``, or a bare array of events."""
    bare = _first_byte(text, 0) == b"["
    if bare:
        if builder.add_scanned(text):
            return _Header(traceEvents=[])
        try:
            builder.add(_STRICT_LIST.decode(text))
            return _Header(traceEvents=[])
        except msgspec.ValidationError:
            pass
        header: _Header | _HeaderOnly = _Header()
        items_at = text.index(b"[") + 1
    else:
        scanned = _scan_whole_events(text, builder)
        if scanned is not None:
            return scanned
        try:
            typed = msgspec.json.decode(text, type=_Header)
        except msgspec.ValidationError:
            typed = None
        if typed is not None and typed.traceEvents is not None:
            builder.add(typed.traceEvents)
            typed.traceEvents = []
            return typed
        m = _EVENTS_KEY.search(text) if typed is None else None
        if m is None:
            raise TraceFileError(f"{path} is JSON but not a torch.profiler trace (it has no traceEvents list).",
                                 corrupt=False, reason="not a torch.profiler trace")
        try:
            header = msgspec.json.decode(text, type=_HeaderOnly)
        except msgspec.ValidationError:
            header = _Header()
        items_at = m.end()
    # Something in the events does not fit the strict types. An array whose first item is not an
    # object is no trace at all: say so before a loose decode, which costs memory per item.
    if _first_byte(text, items_at) not in (b"{", b"]"):
        raise TraceFileError(f"{path} is JSON but its traceEvents are not trace events.", corrupt=False,
                             reason="its traceEvents are not trace events")
    if bare:
        usable = builder.add_loose(_LOOSE_LIST.decode(text))
    else:
        usable = builder.add_loose(msgspec.json.decode(text, type=_LooseHeader).traceEvents or [])
    if not usable and builder.malformed:
        raise TraceFileError(f"{path} is JSON but its traceEvents are not trace events.", corrupt=False,
                             reason="its traceEvents are not trace events")
    return _Header(schemaVersion=header.schemaVersion, deviceProperties=header.deviceProperties,
                   distributedInfo=header.distributedInfo, traceEvents=[])


def _scan_whole_events(text: bytearray, builder: Builder) -> _Header | None:
    """The C scanner on the ``traceEvents`` array of a document without Kineto's layout (``json.dump``
    of a trace writes one line); None, with nothing added, when it cannot take it.

    The members before the array and after it are decoded on their own (the header); the array's
    end is the last ``]`` after which come only members and the document's ``}``. Header, array and
    trailing members are then the whole document, each checked: the scanner takes exactly one array
    of strictly typed events, or nothing, and the msgspec path decodes what it leaves as before.
    """
    m = _EVENTS_KEY.search(text)
    head = decode_members(members_before(text, m.start()), _HeaderOnly) if m is not None else None
    if m is None or head is None:
        return None
    start = text.index(b"[", m.start())
    for pos, tail in array_ends(text, start, _HeaderOnly, MAX_TAIL_MEMBERS_BYTES):
        with memoryview(text) as view:
            if not builder.add_scanned(view[start:pos + 1]):
                return None
        return _Header(schemaVersion=_later(head.schemaVersion, tail.schemaVersion),
                       deviceProperties=_later(head.deviceProperties, tail.deviceProperties),
                       distributedInfo=_later(head.distributedInfo, tail.distributedInfo), traceEvents=[])
    return None


#: The members after the events array that :func:`_scan_whole_events` reads (Kineto writes a few
#: hundred bytes there; a deviceProperties list of 16 GPUs is ~10 KB).
MAX_TAIL_MEMBERS_BYTES = 1024 * 1024


def _later(before: Any, after: Any) -> Any:
    """A header member given before the events and again after them: the later one, as JSON readers keep."""
    return after if after is not None else before


_SPACE = re.compile(rb"[ \t\r\n]*")


def _first_byte(text: bytearray, at: int) -> bytes:
    """The first non-whitespace byte from ``at`` (no copy of the document)."""
    m = _SPACE.match(text, at)
    end = m.end() if m else at
    return bytes(text[end:end + 1])


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
    bad = malformed_note(builder.malformed)
    if len(table) == 0 and bad:  # every event has an impossible value: nothing to analyse, and why
        raise TraceFileError(f"{path} holds no usable trace events: {bad}", corrupt=False,
                             reason=f"no usable trace events: {bad[:-1]}")
    if len(table) == 0:
        notes.append(f"{path.name}: the trace has no complete events.")
    if bad:
        notes.append(f"{path.name}: {bad}")
    return RankTrace(
        path=str(path), rank=rank, rank_from=rank_from, events=table,
        device_name=device_name, device_memory_bytes=mem, compute_major=major,
        world_size=dist.world_size if dist else None, backend=dist.backend if dist else None,
        schema="kineto-2021" if builder.old_schema else "kineto", notes=notes,
        size_bytes=_size(path), malformed_events=sum(builder.malformed.values()),
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


__all__ = ["K_ANNOTATION", "K_CPU_OP", "K_GPU_ANNOTATION", "K_KERNEL", "K_MEMCPY", "K_MEMSET", "K_OTHER", "K_PYTHON",
           "K_RUNTIME", "K_SYNC", "Builder", "EventTable", "RankTrace", "TraceFileError", "find_trace_files",
           "load_trace", "read_traces"]
