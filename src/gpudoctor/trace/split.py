"""Decode one large plain-JSON trace in two processes, one half each.

Why this exists: decoding is CPU-bound Python and msgspec holds the GIL, so a second thread would not
help; a forked child that decodes the second half of the ``traceEvents`` array into its own columns
and hands them back through a pipe (a few dozen bytes per event) nearly halves the wall time of a
gigabyte trace on two cores. Only used for large plain files, when ``fork`` exists, two cores are
there and the process runs no other thread, and only when ``GPUDOCTOR_TRACE_WORKERS=2`` asks for it
(see :func:`gpudoctor.trace.reader._split_worthwhile` for why it is not the default yet).

What it must not do: leave a child behind (it always exits through ``os._exit`` and is reaped), or
swallow a decoding error (the child's error becomes the same one-sentence error as in one process).
"""

from __future__ import annotations

import gc
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from gpudoctor.trace.chunks import fold_events
from gpudoctor.trace.events import Builder, _Header
from gpudoctor.trace.reader import _read_chunks

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


def decode_in_two(fh: BinaryIO, path: Path, first: bytes, events_at: int, builder: Builder,
                  chunk_bytes: int) -> _Header | None:
    """Fold the events of ``path`` into ``builder``, the second half in a forked child.

    Args:
        fh: The open file, positioned after ``first``.
        first: The file's first block (from offset 0).
        events_at: Offset of the ``[`` that opens ``traceEvents`` in ``first``.

    Returns:
        The keys after the events array (decoded by the child).
    """
    size = os.fstat(fh.fileno()).st_size
    middle = events_at + (size - events_at) // 2
    fh.seek(middle)
    window = fh.read(1 << 20)
    found = window.find(_SEP)
    if found < 0 or middle <= len(first):
        fh.seek(len(first))
        return fold_events(bytearray(first[events_at:]), _read_chunks(fh, chunk_bytes), builder, at_eof=True)
    split = middle + found + 1  # the "," after the "}" of the first half's last event
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: second half, then columns into the pipe
        _child(path, split, chunk_bytes, write_fd)
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


def _child(path: Path, split: int, chunk_bytes: int, write_fd: int) -> None:
    status = 1
    try:
        gc.disable()
        part = Builder()
        with path.open("rb") as fh:
            fh.seek(split)
            trailer = fold_events(bytearray(fh.read(chunk_bytes)), _read_chunks(fh, chunk_bytes), part, at_eof=True)
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
