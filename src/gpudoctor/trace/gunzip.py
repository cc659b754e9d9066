"""Gunzip in a background thread, so that decompression overlaps JSON decoding.

Why this exists: a ``.json.gz`` trace costs about as much to inflate as to decode (54 MB of JSON:
~0.11 s of zlib, ~0.17 s of msgspec on the development machine). zlib releases the GIL while it
inflates, so a thread that inflates the next blocks while the main thread decodes the current one
hides most of the inflate time on a second core. ``read(n)`` hands out whole inflated blocks (about
``n`` bytes, possibly more), which the chunked reader takes as they come.

Inflating itself is done by ISA-L (the ``isal`` package) when it is installed: 1.6–2× zlib's speed
here (54 MB of JSON: ~0.055 s against ~0.09–0.15 s). Without it, zlib. Either way a corrupt stream
ends in zlib's own words (an ISA-L error is re-checked by zlib from the start of the file), so the
sentence a user sees does not depend on which one is installed.

What it must not do: outlive its reader (the thread is a daemon, stops at EOF, on an error or on
``close()``), or hold more than a few blocks (a bounded queue).
"""

from __future__ import annotations

import queue
import threading
import zlib
from typing import Any, BinaryIO

_fast_zlib: Any
try:  # ISA-L's inflate, where installed (same API as zlib's decompressobj)
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - the fallback
    _fast_zlib = None

#: Compressed bytes inflated per step (~1 MB of JSON for a typical trace: the chunk the reader decodes
#: at once; 64 kB read df_index_resolver ~20% faster than 256 kB, its ~5 MB blocks).
#: A ``.json.gz`` trace is split up to this much JSON (the child decoding its second half holds all of
#: it inflated: :class:`~gpudoctor.trace.split.GzipHalf`); a larger one is read by one process.
IN_MEMORY_MAX_BYTES = 512 * 1024 * 1024
_IN_BLOCK = 1 << 16
#: The most one inflate call hands out (64 kB of zeros inflate to 64 MB in one piece otherwise, and
#: the queue holds 8 pieces).
_OUT_BLOCK = 1 << 20
_END = b""
#: A gzip trace may inflate to at most this many times its size on disk (and at least
#: :data:`MIN_INFLATED_BYTES`): real Kineto traces inflate 7–30× (the public and H200 traces here:
#: 7.5–30.3×); a 2 MB gzip of 2 GiB of zeros (1000×) took 6.2 GB of memory before it was refused.
MAX_INFLATE_RATIO = 100
MIN_INFLATED_BYTES = 64 * 1024 * 1024


def inflated_limit(packed_bytes: int) -> int:
    """The most JSON a gzip file of ``packed_bytes`` may inflate to (:data:`MAX_INFLATE_RATIO`)."""
    return max(MIN_INFLATED_BYTES, MAX_INFLATE_RATIO * packed_bytes)


class InflatesTooMuch(ValueError):
    """A gzip stream that inflates past :func:`inflated_limit`: the message is the rest of a sentence."""

    def __init__(self, packed_bytes: int) -> None:
        super().__init__(f"it inflates to more than {inflated_limit(packed_bytes) / 1e6:.0f} MB of JSON, over "
                         f"{MAX_INFLATE_RATIO}× its {packed_bytes / 1e6:.1f} MB on disk (traces inflate 7–30×): "
                         "a gzip bomb, not a trace")
        self.packed_bytes = packed_bytes


def fast_zlib() -> Any:
    """ISA-L's zlib module where installed, else zlib (the same API)."""
    return _fast_zlib if _fast_zlib is not None else zlib


def inflate_whole(packed: bytes, limit: int) -> bytes | None:
    """All members of a gzip file's bytes inflated in one go (ISA-L where installed), or None when
    they hold more than ``limit`` bytes, are truncated or corrupt (the streaming reader then says
    what is wrong in zlib's words)."""
    inflate = fast_zlib()
    parts: list[bytes] = []
    room = limit + 1
    try:
        while packed and room > 0:  # member after member, as gzip does
            member = inflate.decompressobj(31)
            parts.append(member.decompress(packed, room))
            room -= len(parts[-1])
            if not member.eof:
                return None  # truncated, or larger than the limit
            packed = member.unused_data
    except Exception:
        return None
    if room <= 0 or not parts:
        return None
    return b"".join(parts) if len(parts) > 1 else parts[0]


class GunzipStream:
    """A read-only binary stream of the inflated content of a gzip file (all members)."""

    def __init__(self, raw: BinaryIO, fast: bool = True, packed_bytes: int | None = None) -> None:
        self._raw = raw
        #: what it may inflate to (:func:`inflated_limit` of the file's size), else InflatesTooMuch
        self._packed = packed_bytes
        self._room = inflated_limit(packed_bytes) if packed_bytes is not None else -1
        self._zlib: Any = _fast_zlib if fast and _fast_zlib is not None else zlib
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=8)
        self._stop = threading.Event()
        self._eof = False
        self._thread = threading.Thread(target=self._inflate, name="gpudoctor-gunzip", daemon=True)
        self._thread.start()

    def _inflate(self) -> None:
        try:
            try:
                self._inflate_all(self._zlib)
            except Exception as exc:
                if self._zlib is zlib or isinstance(exc, (EOFError, InflatesTooMuch)):
                    raise
                raise self._zlib_error(exc) from None
            self._put(_END)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(exc)

    def _zlib_error(self, fast_error: Exception) -> zlib.error:
        """zlib's error for the stream ISA-L rejected (its message is what the user reads)."""
        self._raw.seek(0)
        inflater: Any = None
        try:
            for block in iter(lambda: self._raw.read(_IN_BLOCK), b""):
                while block:
                    if inflater is None:
                        if block[:1] != b"\x1f":
                            break
                        inflater = zlib.decompressobj(31)
                    inflater.decompress(block)
                    block, inflater = (inflater.unused_data, None) if inflater.eof else (b"", inflater)
        except zlib.error as exc:
            return exc
        return zlib.error(str(fast_error))

    def _inflate_all(self, zlib_module: Any) -> None:
        """Inflate every gzip member of the file into the queue (not the end marker)."""
        inflater: Any = None  # None between members (and before the first)
        started = False
        while not self._stop.is_set():
            block = self._raw.read(_IN_BLOCK)
            if not block:
                if inflater is not None or not started:
                    raise EOFError("the gzip stream ends before its end-of-stream marker (truncated)")
                break
            full = False  # the last call filled its _OUT_BLOCK: zlib may hold more output without input
            while (block or full) and not self._stop.is_set():
                if inflater is None:
                    if block[:1] != b"\x1f" and started:
                        break  # trailing garbage after the last member is ignored, as gzip does
                    inflater, started = zlib_module.decompressobj(31), True
                out = inflater.decompress(block, _OUT_BLOCK)
                full = len(out) >= _OUT_BLOCK
                if out:
                    self._count(len(out))
                    self._put(out)
                if inflater.eof:  # a next member may follow
                    block, full = inflater.unused_data, False
                    inflater = None
                else:
                    block = inflater.unconsumed_tail  # more to inflate from this block: in pieces

    def _count(self, inflated: int) -> None:
        if self._packed is None:
            return
        self._room -= inflated
        if self._room < 0:
            raise InflatesTooMuch(self._packed)

    def _put(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read(self, size: int = -1) -> bytes:
        """About ``size`` bytes: whole inflated blocks until at least half of ``size`` (never split, so never
        copied twice; the readers here take blocks of any length); everything left when negative; b"" at EOF."""
        parts: list[bytes] = []
        have = 0
        want = size // 2 if size >= 0 else -1
        while not self._eof and (want < 0 or have < max(want, 1)):
            item = self._queue.get()
            if isinstance(item, BaseException):
                self._eof = True
                raise item
            if item == _END:
                self._eof = True
                break
            parts.append(item)
            have += len(item)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        """Stop the inflating thread (a reader may stop before the end: one half of a split read)."""
        self._stop.set()
        while True:  # free the queue: a put waiting on a full one returns at once, not after its timeout
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)
        self._raw.close()

    def __enter__(self) -> GunzipStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
