"""0/1 byte masks over the events of one table, combined in C: numpy's boolean arrays without numpy.

Why this exists: the metrics select events by several column tests at once (a GPU event has a stream
and a correlation id; a host op has neither a stream nor a Python kind …). A Python test per event is
what made those selections slow; a mask is one byte per event made by ``bytes.translate`` of a column's
bytes, and AND/OR run on the masks as two big integers, so no bytecode runs per event. numpy's import
alone costs more than these selections on a typical trace; it serves only tables of ≥ 1 M events
(:mod:`.vectorized`).

What it must not do: know about event kinds or columns (the table's own mask methods do that).
"""

from __future__ import annotations

import struct
from itertools import compress

#: ``bytes.translate`` tables: 1 for a byte without its top bit (a non-negative value's sign byte);
#: 0 ↔ 1 (the complement of a 0/1 mask).
SIGN_CLEAR = bytes(1 if b < 0x80 else 0 for b in range(256))
_FLIP = bytes([1, 0]) + bytes(254)


def doubles(values: list[float]) -> bytes:
    """``values`` as the bytes of an ``array("d")``: ``struct.pack`` converts a list ~2.5× faster than
    ``array("d", values)``, which parses every item on its own."""
    return struct.pack(f"{len(values)}d", *values)


#: A 0/1 byte per event of one table (``bytes.translate`` of a bytearray column gives a bytearray).
Mask = bytes | bytearray


def mask_and(a: Mask, b: Mask) -> bytes:
    """The event-wise AND of two 0/1 masks of one table (as two big integers: C-level)."""
    return (int.from_bytes(a, "little") & int.from_bytes(b, "little")).to_bytes(len(a), "little")


def mask_or(a: Mask, b: Mask) -> bytes:
    """The event-wise OR of two 0/1 masks of one table."""
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(len(a), "little")


def mask_not(a: Mask) -> Mask:
    """The complement of a 0/1 mask."""
    return a.translate(_FLIP)


def mask_positions(mask: Mask) -> list[int]:
    """Indices, ascending, of a 0/1 mask's ones: ``bytes.find`` from one to the next when they are few,
    one C-level ``compress`` when they are many."""
    if mask.count(1) > len(mask) >> 4:
        return list(compress(range(len(mask)), mask))
    out: list[int] = []
    at = mask.find(1)
    while at >= 0:
        out.append(at)
        at = mask.find(1, at + 1)
    return out
