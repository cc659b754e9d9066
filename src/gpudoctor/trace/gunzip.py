"""Gunzip in a background thread, so that decompression overlaps JSON decoding.

Why this exists: a ``.json.gz`` trace costs about as much to inflate as to decode (54 MB of JSON:
~0.11 s of zlib, ~0.17 s of msgspec on the development machine). zlib releases the GIL while it
inflates, so a thread that inflates the next blocks while the main thread decodes the current one
hides most of the inflate time on a second core. ``read(n)`` hands out whole inflated blocks (about
``n`` bytes, possibly more), which the chunked reader takes as they come.

What it must not do: outlive its reader (the thread is a daemon, stops at EOF, on an error or on
``close()``), or hold more than a few blocks (a bounded queue).
"""

from __future__ import annotations

import queue
import threading
import zlib
from typing import Any, BinaryIO

#: Compressed bytes inflated per step (~5 MB of JSON for a typical trace).
_IN_BLOCK = 1 << 18
_END = b""


class GunzipStream:
    """A read-only binary stream of the inflated content of a gzip file (all members)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=3)
        self._stop = threading.Event()
        self._eof = False
        self._thread = threading.Thread(target=self._inflate, name="gpudoctor-gunzip", daemon=True)
        self._thread.start()

    def _inflate(self) -> None:
        try:
            inflater: Any = None  # None between members (and before the first)
            started = False
            while not self._stop.is_set():
                block = self._raw.read(_IN_BLOCK)
                if not block:
                    if inflater is not None or not started:
                        raise EOFError("the gzip stream ends before its end-of-stream marker (truncated)")
                    break
                while block:
                    if inflater is None:
                        if block[:1] != b"\x1f" and started:
                            break  # trailing garbage after the last member is ignored, as gzip does
                        inflater, started = zlib.decompressobj(31), True
                    out = inflater.decompress(block)
                    if out:
                        self._put(out)
                    if inflater.eof:  # a next member may follow
                        block = inflater.unused_data
                        inflater = None
                    else:
                        block = b""
            self._put(_END)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(exc)

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
        self._stop.set()
        self._thread.join(timeout=5)
        self._raw.close()

    def __enter__(self) -> GunzipStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
