"""Decode one large plain-JSON trace in two processes, one half each.

Why this exists: decoding is CPU-bound Python and msgspec holds the GIL, so a second thread would not
help; a forked child that decodes the second half of the ``traceEvents`` array into its own columns
and hands them back through a pipe (a few dozen bytes per event) takes ~25% off the reading's wall
time on two cores (df_index_resolver, docs/bench-history.md). Used when one trace is read with a second
core allowed (``processes=2`` from :mod:`gpudoctor.trace.analysis`), for a large plain file
(:func:`decode_in_two`) or gzip file (:class:`GzipHalf`), when ``fork`` exists and the process runs
no other thread (:func:`gpudoctor.trace.reader._split_worthwhile`).

What it must not do: leave a child behind (it always exits through ``os._exit`` and is reaped), or
swallow a decoding error (the child's error becomes the same one-sentence error as in one process).
"""

from __future__ import annotations

import gc
import io
import os
import signal
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from gpudoctor.trace.chunks import fold_events, read_blocks
from gpudoctor.trace.events import Builder, _Header

_SEP = b"},\n  {"
_COLUMNS = ("name", "thread", "ts", "dur", "stream", "correlation", "nbytes", "memory_ts", "memory_allocated",
            "memory_reserved")


def _read_range(fh: BinaryIO, end: int, size: int) -> Iterator[bytes]:
    """Blocks of ``fh`` from its current offset up to ``end``."""
    while True:
        left = end - fh.tell()
        if left <= 0:
            return
        block = fh.read(min(size, left))
        if not block:
            return
        yield block


def decode_in_two(fh: BinaryIO, size: int, reopen: Callable[[], BinaryIO], first: bytes, events_at: int,
                  builder: Builder, chunk_bytes: int) -> _Header | None:
    """Fold the events of one trace's JSON into ``builder``, the second half in a forked child.

    Args:
        fh: A plain JSON file, positioned after ``first``.
        size: Its length in bytes.
        reopen: Gives the child a stream of the same JSON that does not share ``fh``'s position.
        first: The JSON's first block (from offset 0).
        events_at: Offset of the ``[`` that opens ``traceEvents`` in ``first``.

    Returns:
        The keys after the events array (decoded by the child).
    """
    middle = events_at + (size - events_at) // 2
    fh.seek(middle)
    window = fh.read(1 << 20)
    found = window.find(_SEP)
    if found < 0 or middle <= len(first):
        fh.seek(len(first))
        return fold_events(bytearray(first[events_at:]), read_blocks(fh, chunk_bytes), builder, at_eof=True)
    split = middle + found + 1  # the "," after the "}" of the first half's last event
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: second half, then columns into the pipe
        _child(reopen, split, chunk_bytes, write_fd)
    os.close(write_fd)
    pipe = os.fdopen(read_fd, "rb")
    try:
        fh.seek(len(first))
        fold_events(bytearray(first[events_at:]), _read_range(fh, split, chunk_bytes), builder, at_eof=False)
        payload = pipe.read()
    finally:
        pipe.close()  # a child still writing gets a broken pipe and exits
        os.waitpid(pid, 0)
    if not payload or payload[:1] != b"O":
        message = payload[1:].decode("utf-8", "replace") if payload else "the decoding process died"
        raise msgspec.DecodeError(message)
    return _merge(builder, msgspec.msgpack.decode(payload[1:]))


class GzipHalf:
    """The second half of a gzip trace's events, decoded by a child forked before this process reads.

    A gzip stream cannot be entered in the middle, so the child inflates the whole file into memory
    itself (ISA-L: ~36 ms for df_index_resolver's 54 MB) while this process inflates it as it reads
    (the background thread of :class:`~gpudoctor.trace.gunzip.GunzipStream`, started after the fork:
    a fork must not copy a running thread) and decodes the first half. Both take the half at the
    same place without talking: the first event boundary at or after ``middle`` (half the gzip
    trailer's size, known before either reads). The child sends that offset as soon as it has
    inflated the file (8 bytes; 0: no second half — the file is shorter than its trailer said, or
    does not inflate, and this process then reads it all and says what is wrong), then its columns.
    This process stops before ``middle`` until it has the offset, so it never reads past it.
    """

    def __init__(self, path: Path, middle: int, chunk_bytes: int) -> None:
        self.middle = middle
        self._split: int | None = None
        read_fd, write_fd = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: never returns
            os.close(read_fd)
            _gzip_child(path, middle, chunk_bytes, write_fd)
        os.close(write_fd)
        self._pipe: BinaryIO | None = os.fdopen(read_fd, "rb")

    def blocks(self, fh: BinaryIO, offset: int, chunk_bytes: int) -> Iterator[bytes]:
        """``fh``'s blocks from ``offset`` (bytes already read) to the half, or to its end when there
        is no second half (then :meth:`at_eof` is True)."""
        middle = self.middle
        rest = b""
        while offset < middle:
            block = fh.read(chunk_bytes)
            if not block:
                self._split = 0  # shorter than the trailer said: the child finds no half either
                return
            if offset + len(block) > middle:
                keep = middle - offset
                yield block[:keep]
                rest = block[keep:]
                offset = middle
                break
            yield block
            offset += len(block)
        self._split = self._read_split()
        if not self._split:
            if rest:
                yield rest
            yield from read_blocks(fh, chunk_bytes)
            return
        need = self._split - middle
        while len(rest) < need:
            block = fh.read(chunk_bytes)
            if not block:  # the child found the boundary in the same bytes: cannot happen
                raise msgspec.DecodeError("the two halves of the trace disagree")
            rest += block
        yield rest[:need]

    def at_eof(self) -> bool:
        """Whether this process read to the end (no second half)."""
        return not self._split

    def _read_split(self) -> int:
        assert self._pipe is not None
        raw = self._pipe.read(8)
        return int.from_bytes(raw, "little") if len(raw) == 8 else 0

    def merge_into(self, builder: Builder) -> _Header | None:
        """Append the child's columns to ``builder``; the keys after the events array (None when
        this process read to the end itself)."""
        if not self._split:
            self.close()
            return None
        assert self._pipe is not None
        payload = self._pipe.read()
        self.close()
        if not payload or payload[:1] != b"O":
            message = payload[1:].decode("utf-8", "replace") if payload else "the decoding process died"
            raise msgspec.DecodeError(message)
        return _merge(builder, msgspec.msgpack.decode(payload[1:]))

    def close(self) -> None:
        """Stop the child if it still runs and reap it (idempotent)."""
        if self._pipe is None:
            return
        self._pipe.close()  # a child still writing gets a broken pipe and exits
        self._pipe = None
        try:
            os.kill(self._pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.waitpid(self._pid, 0)


def _gzip_child(path: Path, middle: int, chunk_bytes: int, write_fd: int) -> None:
    """Inflate the file, send where its second half starts (0: none), then decode that half."""
    split = 0
    try:
        from gpudoctor.trace.gunzip import IN_MEMORY_MAX_BYTES, inflate_whole, inflated_limit

        packed = path.read_bytes()
        data = inflate_whole(packed, min(IN_MEMORY_MAX_BYTES, inflated_limit(len(packed))))
        if data is not None and middle < len(data):
            found = data.find(_SEP, middle, middle + (1 << 20))
            split = found + 1 if found >= 0 else 0
    except BaseException:
        split = 0
    try:
        os.write(write_fd, split.to_bytes(8, "little"))
    except BaseException:
        os._exit(1)
    if not split or data is None:
        os._exit(0)
    whole = data
    _child(lambda: io.BytesIO(whole), split, chunk_bytes, write_fd)


def _child(reopen: Callable[[], BinaryIO], split: int, chunk_bytes: int, write_fd: int) -> None:
    status = 1
    try:
        gc.disable()
        part = Builder()
        with reopen() as fh:
            fh.seek(split)
            trailer = fold_events(bytearray(fh.read(chunk_bytes)), read_blocks(fh, chunk_bytes), part, at_eof=True)
        table = part.finish()
        body = {
            "names": table.names,
            "threads": [list(t) for t in table.threads],
            "kind": bytes(table.kind),
            **{c: getattr(table, c).tobytes() for c in _COLUMNS},
            "ns": table.ns_resolution,
            "old": part.old_schema,
            "malformed": dict(part.malformed),
            "trailer": msgspec.json.encode(trailer),
        }
        out = b"O" + msgspec.msgpack.encode(body)
        status = 0
    except BaseException as exc:  # everything goes back to the parent as a message
        out = b"E" + str(exc).encode("utf-8", "replace")[:500]
    try:
        view = memoryview(out)
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(status)


def _merge(builder: Builder, body: dict[str, Any]) -> _Header:
    """Append the child's columns to the parent's, re-interning names and threads."""
    table = builder.table
    name_ids = builder._name_ids
    remap_names = [name_ids.setdefault(n, len(name_ids)) for n in body["names"]]
    thread_ids = builder._thread_ids
    remap_threads = [thread_ids.setdefault(tuple(t), len(thread_ids)) for t in body["threads"]]
    table.kind.extend(body["kind"])
    for column in _COLUMNS:
        part = array(getattr(table, column).typecode)
        part.frombytes(body[column])
        if column == "name":
            part = array("I", [remap_names[i] for i in part])
        elif column == "thread":
            part = array("I", [remap_threads[i] for i in part])
        getattr(table, column).extend(part)
    table.ns_resolution = table.ns_resolution or body["ns"]
    builder.old_schema = builder.old_schema or body["old"]
    builder.malformed.update(body.get("malformed", {}))
    return msgspec.json.decode(body["trailer"], type=_Header)
