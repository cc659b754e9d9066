"""numpy over a big table's columns: the metrics' per-event passes without a Python object per event.

Why this exists: on a trace of millions of events the metrics, not the decoding, bound ``analyze``
(the 1.1 GB synthetic trace: ~5.6 CPU-s of metrics against ~3.7 s of reading). Each pass of the
pure-Python metrics makes a float object and a list slot per event and frees them again; numpy runs
the same pass over the table's ``array`` columns in place (zero-copy views). Importing numpy costs
~80 ms here, which a typical trace's whole run (0.1–0.3 s) does not repay, so the metrics switch
to it from :data:`NUMPY_MIN_EVENTS` events on and stay pure Python below. Both paths give the same
values (``tests/trace/test_vectorized_metrics.py`` runs the shared traces both ways). numpy is
optional: without it every table takes the pure-Python path.

The interval primitives reproduce :mod:`.timeline`'s (``merge``, ``total``, ``intersection_length``)
on arrays of starts and ends, with the same order of float additions where a sum is formed.

What it must not do: compute a metric, or import numpy at module import time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpudoctor.trace.events import EventTable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Floats = NDArray[np.float64]
    Ints = NDArray[np.int64]
else:
    Floats = Ints = Any

#: From how many events (complete events of one table) the metrics run over numpy arrays.
NUMPY_MIN_EVENTS = 1_000_000
#: ``always`` / ``never`` / ``auto`` (the default): the tests and benchmarks force one path.
MODE_ENV = "GPUDOCTOR_NUMPY"

_DTYPES = {"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "l": "i8", "L": "u8",
           "q": "i8", "Q": "u8", "f": "f4", "d": "f8"}


def numpy_for(t: EventTable) -> Any | None:
    """numpy, when ``t`` is big enough for it to pay off (or :data:`MODE_ENV` says ``always``); else None."""
    mode = os.environ.get(MODE_ENV, "auto")
    if mode == "never" or (mode != "always" and len(t) < NUMPY_MIN_EVENTS):
        return None
    try:
        import numpy
    except ImportError:  # optional: the pure-Python path then serves every table
        return None
    return numpy


def column(t: EventTable, name: str) -> Any:
    """A zero-copy numpy view of one of ``t``'s columns (``kind`` as uint8), made once per table.

    The view holds the column's buffer: the column cannot grow while it lives, which is fine after
    the reader has built the table (nothing appends to a table the metrics read).
    """
    key = "np:" + name
    view = t.cache.get(key)
    if view is None:
        import numpy

        col = getattr(t, name)
        dtype = "u1" if isinstance(col, (bytes, bytearray)) else _DTYPES[col.typecode]
        view = t.cache[key] = numpy.frombuffer(col, dtype=dtype) if len(col) else numpy.zeros(0, dtype=dtype)
    return view


def ends(t: EventTable) -> Floats:
    """Every event's end, ``ts + dur`` (the same doubles as :func:`.timeline.end_times`), once per table."""
    view = t.cache.get("np:end")
    if view is None:
        view = t.cache["np:end"] = column(t, "ts") + column(t, "dur")
    return view


def kind_positions(t: EventTable, kinds: tuple[int, ...]) -> Ints:
    """Indices, ascending, of the events whose kind is one of ``kinds`` (once per table and kind set)."""
    key = "np:kinds:" + ",".join(map(str, kinds))
    view = t.cache.get(key)
    if view is None:
        import numpy

        table = numpy.zeros(256, dtype=bool)
        table[list(kinds)] = True
        view = t.cache[key] = numpy.flatnonzero(table[column(t, "kind")])
    return view


def name_positions(t: EventTable, name_ids: Iterable[int]) -> Ints:
    """:meth:`~.events.EventTable.positions_of` as an array (not to be written to), once per table and
    id set: each event's name id looked up in a table of the wanted ids (~6 ms over the 2.6 M events
    of the 1.1 GB synthetic trace for its 1136 ``ProfilerStep#N`` names, against ~70 ms of
    ``positions_of``'s membership test per event for more than 16 ids among more than 256 names)."""
    import numpy

    ids = sorted(set(name_ids))
    key = f"np:names:{ids}"
    view = t.cache.get(key)
    if view is None:
        wanted = numpy.zeros(len(t.names), dtype=bool)
        wanted[ids] = True
        view = t.cache[key] = numpy.flatnonzero(wanted[column(t, "name")]) if ids else numpy.zeros(0, dtype=numpy.int64)
    return view


def merge(starts: Floats, ends: Floats) -> tuple[Floats, Floats]:
    """:func:`.timeline.merge` on arrays: the union's (starts, ends), sorted.

    Sorted by (start, end) as tuples sort; an interval starts a new group when it starts after the
    running maximum of every earlier end, and a group ends at the largest end in it (which is what
    the pure loop's running maximum or, for an inverted first interval, its group maximum is).
    """
    import numpy

    starts = numpy.asarray(starts, dtype=numpy.float64)
    ends = numpy.asarray(ends, dtype=numpy.float64)
    if not len(starts):
        return starts[:0], ends[:0]
    order = numpy.lexsort((ends, starts))
    s, e = starts[order], ends[order]
    running = numpy.maximum.accumulate(e)
    new = numpy.empty(len(s), dtype=bool)
    new[0] = True
    numpy.greater(s[1:], running[:-1], out=new[1:])
    firsts = numpy.flatnonzero(new)
    return s[firsts], numpy.maximum.reduceat(e, firsts)


def ordered_sum(values: Floats) -> float:
    """The sum of ``values`` added left to right, as ``sum()`` of a list of floats adds them on
    CPython 3.11 (numpy's own ``sum`` adds pairwise: the last bits can differ)."""
    import numpy

    if not len(values):
        return 0.0
    return float(numpy.cumsum(values)[-1])


def median(values: Floats) -> float:
    """:func:`gpudoctor.quantiles.median` of an array (the middle item, or ``(a + b) / 2`` of the two
    middle ones, as Python floats); ValueError when there are none."""
    import numpy

    n = len(values)
    if n == 0:
        raise ValueError("no median for empty data")
    mid = n // 2
    data = numpy.partition(values, [mid - 1, mid] if n % 2 == 0 else [mid])
    if n % 2 == 1:
        return float(data[mid])
    return (float(data[mid - 1]) + float(data[mid])) / 2


def total(starts: Floats, ends: Floats) -> float:
    """:func:`.timeline.total`: summed length of merged intervals (negative lengths included)."""
    return ordered_sum(ends - starts)


def intersection_length(a_starts: Floats, a_ends: Floats, b_starts: Floats, b_ends: Floats) -> float:
    """:func:`.timeline.intersection_length` of two merged, sorted interval lists, on arrays.

    Every pair of an ``a`` and a ``b`` interval that may overlap is formed (at most ``len(a) + len(b)``
    pairs for disjoint sorted lists), in the order the pure two-pointer walk meets them, and the
    positive overlaps are added in that order.
    """
    import numpy

    if not len(a_starts) or not len(b_starts):
        return 0.0
    first = numpy.searchsorted(b_ends, a_starts, side="right")
    last = numpy.searchsorted(b_starts, a_ends, side="left")
    counts = numpy.maximum(last - first, 0)
    pairs = int(counts.sum())
    if not pairs:
        return 0.0
    a_index = numpy.repeat(numpy.arange(len(a_starts)), counts)
    offsets = numpy.arange(pairs) - numpy.repeat(numpy.cumsum(counts) - counts, counts)
    b_index = numpy.repeat(first, counts) + offsets
    lo = numpy.maximum(a_starts[a_index], b_starts[b_index])
    hi = numpy.minimum(a_ends[a_index], b_ends[b_index])
    overlap = hi - lo
    return ordered_sum(overlap[overlap > 0])
