"""Decoding the ``traceEvents`` array in chunks, in place, without a dict per event.

Why this exists: Kineto writes one event per block (``  },\n  {``), so the array can be cut at event
boundaries and each chunk decoded by msgspec straight from the read buffer: the first spare byte
becomes ``[`` and the comma after the last complete event becomes ``]``. Peak memory is then one
chunk plus the columns, whatever the file size. A chunk whose events do not fit the strict types is
decoded again loosely (:data:`~gpudoctor.trace.events.LOOSE_ITEM`) and its malformed events counted.

What it must not do: open files or decide between one and two processes (that is :mod:`.reader`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO, TypeVar

import msgspec

from gpudoctor.trace.events import LOOSE_ITEM, Builder, _Event, _Header

T = TypeVar("T")

_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
#: Separator between events in Kineto's own layout ("  },\n  {").
KINETO_SEP = re.compile(rb"\}\s*,\s*\n  \{")
#: One event larger than this (no separator found in so many bytes) ends the read with an error.
MAX_EVENT_BYTES = 256 * 1024 * 1024
#: How many candidate ends of the events array are tried at the end of the file: "]" characters
#: (cheap: only the keys after it are decoded), and candidates whose events are decoded (costly).
MAX_TAIL_BRACKETS = 20_000
MAX_TAIL_TRIES = 32


class EventTooLarge(ValueError):
    """No event boundary in :data:`MAX_EVENT_BYTES`: not Kineto's layout after all, or a hostile file."""


def fold_events(pending: bytearray, blocks: Iterator[bytes], builder: Builder,
                at_eof: bool | Callable[[], bool]) -> _Header | None:
    """Decode the events in ``pending`` plus ``blocks`` chunk by chunk into ``builder``.

    ``pending[0]`` is a spare byte just before the first event: it is turned into "[" and the ","
    after the last complete event into "]", so each chunk is decoded in place without copies. When
    ``at_eof`` the input ends with the array's "]" and the document's last keys, which are returned
    decoded; otherwise it ends exactly after an event's "}". A callable ``at_eof`` is asked once the
    blocks are used up (the reader of one half of a gzip stream learns only then which it was).

    Raises:
        msgspec.DecodeError: the input is truncated or not JSON.
    """
    decoder = msgspec.json.Decoder(list[_Event])
    scan_from = 0  # no separator starts before this offset of ``pending`` (what earlier searches saw)
    while True:
        cut = _last_separator(pending, scan_from)
        nxt = next(blocks, None)
        if cut >= 0 and nxt is not None:
            pending[0] = 0x5B  # "["
            pending[cut + 1] = 0x5D  # "]"
            with memoryview(pending) as view:
                _decode_events(decoder, view[:cut + 2], builder)
            # keep the unfinished tail (from the spare byte before its "{") and append the next block:
            # deleting a bytearray's head moves no bytes, and the buffer is reused, not reallocated
            del pending[:pending.index(b"{", cut + 2) - 1]
            pending += nxt
            scan_from = 0
            continue
        if nxt is not None:
            # An event longer than a block: the next search starts at the last "}" seen so far (a
            # separator holds only whitespace and "," between its "}" and "{"), not at the start —
            # rescanning the growing buffer made a 300 MB event cost 33 s instead of 1–2.
            last_brace = pending.rfind(b"}", scan_from)
            scan_from = last_brace if last_brace >= 0 else len(pending)
            pending += nxt
            if len(pending) > MAX_EVENT_BYTES:
                raise EventTooLarge(f"no event boundary in {MAX_EVENT_BYTES >> 20} MB of the traceEvents array")
            continue
        break
    if not (at_eof() if callable(at_eof) else at_eof):
        pending[0] = 0x5B
        pending.append(0x5D)
        _decode_events(decoder, pending, builder)
        return None
    return _fold_tail(pending, decoder, builder)


def _fold_tail(pending: bytearray, decoder: msgspec.json.Decoder, builder: Builder) -> _Header:
    """The last events, "]", and the keys after the array (the "]" is searched from the end)."""
    for pos, candidate in array_ends(pending, 1, _Header):
        last = pos - 1
        while last > 0 and pending[last] in b" \t\r\n":
            last -= 1
        if pending[last] != 0x7D:  # "}": the end of the last event
            continue
        pending[0] = 0x5B
        pending[last + 1] = 0x5D
        try:
            with memoryview(pending) as view:
                _decode_events(decoder, view[:last + 2], builder)
        except msgspec.DecodeError:
            continue
        return candidate
    raise msgspec.DecodeError("truncated JSON: the traceEvents array or the document is not closed")


def array_ends(text: bytes | bytearray, start: int, kind: type[T],
               max_tail_bytes: int | None = None) -> Iterator[tuple[int, T]]:
    """The candidate ends of the ``traceEvents`` array, last first: each ``]`` at or after ``start``
    that only members and the document's ``}`` follow, with those members decoded as ``kind``.

    Bounded for hostile tails: :data:`MAX_TAIL_BRACKETS` brackets looked at, :data:`MAX_TAIL_TRIES`
    tails copied and decoded (each copies what follows its bracket), and with ``max_tail_bytes`` no
    bracket further than that from the end.
    """
    pos, tries = len(text), 0
    for _ in range(MAX_TAIL_BRACKETS):
        pos = text.rfind(b"]", start, pos)
        if pos < start or (max_tail_bytes is not None and len(text) - pos > max_tail_bytes):
            return
        rest = members_after(text, pos)
        if rest is None:
            continue
        tries += 1
        if tries > MAX_TAIL_TRIES:
            return
        tail = decode_members(rest, kind)
        if tail is not None:
            yield pos, tail


def decode_members(text: bytes | None, kind: type[T]) -> T | None:
    """``text`` (members cut out of a document by :func:`members_before` / :func:`members_after`)
    decoded as ``kind``; None for no text, or text that is not such an object."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def members_before(text: bytes | bytearray, key_at: int) -> bytes | None:
    """The document's members before the ``traceEvents`` key at ``key_at``, closed as an object of
    their own (``{"schemaVersion": 1}``); None when they do not end in the one comma that a next
    member needs (the caller then decodes the whole document, which says what is malformed)."""
    head = bytes(text[:key_at]).rstrip()
    if head.endswith(b","):
        return head[:-1] + b"}"
    return head + b"}" if head.lstrip() == b"{" else None


def members_after(text: bytes | bytearray, bracket_at: int) -> bytes | None:
    """The document's members after the events array's closing ``]`` at ``bracket_at``, as an
    object of their own (``{"traceName": "x"}``, or ``{}``); None when what follows is neither the
    document's ``}`` alone nor a comma, members and that ``}`` (whose decode then checks them)."""
    m = _NOT_SPACE.search(text, bracket_at + 1)
    if m is None:
        return None
    first = m.start()
    if text[first] == 0x7D:  # "}": nothing may follow it
        return b"{}" if _NOT_SPACE.search(text, first + 1) is None else None
    if text[first] != 0x2C:  # ","
        return None
    tail = bytes(text[first + 1:]).rstrip()  # copied only here, for a candidate that may be the end
    return b"{" + tail if tail.endswith(b"}") else None


def _last_separator(buf: bytes | bytearray, start: int = 0) -> int:
    """Offset of the ``}`` that ends the last complete event in ``buf`` (at or after ``start``), or -1."""
    cut = buf.rfind(b"},\n  {", start)
    if cut >= 0:
        return cut
    last = None
    for last in KINETO_SEP.finditer(buf, start):  # noqa: B007 - we want the last match
        pass
    return last.start() if last is not None else -1


_LOOSE = msgspec.json.Decoder(list[LOOSE_ITEM])


def _decode_events(decoder: msgspec.json.Decoder, text: bytes | bytearray | memoryview, builder: Builder) -> None:
    """The C scanner first (:mod:`.native`), then strictly typed; a chunk with a malformed event is
    decoded loosely and checked event by event."""
    if builder.add_scanned(text):
        return
    try:
        events = decoder.decode(text)
    except msgspec.ValidationError:
        try:
            loose = _LOOSE.decode(text)
        except msgspec.ValidationError as exc:  # e.g. an integer beyond 64 bits
            raise EventTooLarge(f"an event holds a value gpudoctor cannot read ({exc})") from None
        builder.add_loose(loose)
        return
    builder.add(events)


def read_blocks(fh: BinaryIO, size: int) -> Iterator[bytes]:
    """The rest of ``fh`` in blocks of ``size`` bytes (the last one shorter)."""
    while True:
        block = fh.read(size)
        if not block:
            return
        yield block
