"""Communication share of GPU kernel time, with HTA 0.5.0's kernel-type breakdown definition.

Why this exists: ``comm_pct`` (in :mod:`.metrics`) is communication time over the whole kernel
timeline, idle gaps included — HTA's temporal-breakdown denominator. Users and HTA's
``get_gpu_kernel_breakdown`` also speak of the *communication share of GPU kernel time*: the time
during which communication kernels run, over the time during which any computation,
communication or memory kernel runs. HTA splits that busy time into exclusive categories
("COMMUNICATION", "COMPUTATION overlapping COMMUNICATION", …); this module reproduces that split for
one rank (HTA pools all ranks; run it per rank to compare), over the same device events HTA keeps
(:func:`~gpudoctor.trace.timeline.hta_device_events`: the last ``ProfilerStep``'s work left out).

What it must not do: read files, know rule thresholds, or import anything heavy (numpy only through
:func:`.vectorized.numpy_for`, for a table of ≥ 1 M events).
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

from gpudoctor.trace import kernels as kn
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import pct
from gpudoctor.trace.reader import EventTable
from gpudoctor.trace.timeline import hta_device_arrays, hta_device_events, merge
from gpudoctor.trace.vectorized import Floats, numpy_for

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue

#: HTA's kernel types in its bit order (``include_memory_kernels=True``); OTHER is left out, as in HTA.
_TYPES = (kn.COMPUTATION, kn.COMMUNICATION, kn.MEMORY)


def hta_type_spans(t: EventTable) -> dict[str, list[tuple[float, float]]]:
    """Merged intervals of HTA's selected device events per HTA kernel type (computed once per table)."""
    cached = t.cache.get("hta_type_spans")
    if cached is not None:
        return cached
    np = numpy_for(t)
    if np is not None:
        out = {kind: list(zip(s.tolist(), e.tolist())) for kind, (s, e) in hta_type_arrays(np, t).items()}
        t.cache["hta_type_spans"] = out
        return out
    sel = hta_device_events(t)
    names, name = t.names, t.name
    type_of = {nid: kn.hta_kernel_type(names[nid]) for nid in {name[i] for i in sel.index}}
    grouped: dict[str, list[tuple[float, float]]] = {}
    for i, s, e in zip(sel.index, sel.start, sel.end):
        grouped.setdefault(type_of[name[i]], []).append((s, e))
    out = {kind: merge(spans) for kind, spans in grouped.items()}
    t.cache["hta_type_spans"] = out
    return out


def hta_type_arrays(np: Any, t: EventTable) -> dict[str, tuple[Floats, Floats]]:
    """:func:`hta_type_spans` as (starts, ends) arrays per type, once per table (numpy path only).

    The numpy path's callers take these: the lists of tuples would cost ~50 ms more for the 318 k
    merged intervals of the 1.1 GB synthetic trace (the arrays: ~12 ms).
    """
    cached: dict[str, tuple[Floats, Floats]] | None = t.cache.get("np:hta_type_spans")
    if cached is not None:
        return cached
    sel = hta_device_arrays(np, t)
    name = vectorized.column(t, "name")[sel.index]
    present = np.unique(name)
    kinds = sorted({kn.hta_kernel_type(t.names[nid]) for nid in present.tolist()})
    codes = np.zeros(len(t.names), dtype=np.int8)
    codes[present] = [kinds.index(kn.hta_kernel_type(t.names[nid])) for nid in present.tolist()]
    code = codes[name]
    found, first = np.unique(code, return_index=True)
    cached = {}
    for c in found[np.argsort(first)].tolist():  # in the order the types first occur, as the pure path groups them
        mine = code == c
        cached[kinds[c]] = vectorized.merge(sel.start[mine], sel.end[mine])
    t.cache["np:hta_type_spans"] = cached
    return cached


def kernel_type_time_us(t: EventTable) -> dict[frozenset[str], float]:
    """Busy GPU time split by which kernel types run at once (HTA's exclusive categories), in µs."""
    np = numpy_for(t)
    if np is not None:
        return _kernel_type_time_us_np(np, t)
    by_type = hta_type_spans(t)
    edges: list[tuple[float, int]] = []
    for bit, kind in enumerate(_TYPES):
        spans = by_type.get(kind, [])
        for s, e in spans:
            edges.append((s, 1 << bit))
            edges.append((e, -(1 << bit)))
    edges.sort(key=itemgetter(0))
    out: dict[frozenset[str], float] = {}
    keys = _TYPE_SETS
    running = 0
    for (time_us, delta), (next_us, _) in zip(edges, edges[1:]):
        running += delta
        if running > 0 and next_us > time_us:
            key = keys[running] if running < len(keys) else _type_set(running)
            out[key] = out.get(key, 0.0) + (next_us - time_us)
    return out


def _kernel_type_time_us_np(np: Any, t: EventTable) -> dict[frozenset[str], float]:
    """The numpy path of :func:`kernel_type_time_us`: the same edges, the same stable sort, and each
    category's segments added in time order."""
    by_type = hta_type_arrays(np, t)
    times, deltas = [], []
    for bit, kind in enumerate(_TYPES):
        spans = by_type.get(kind)
        if spans is not None and len(spans[0]):
            times.append(np.column_stack(spans).ravel())  # start, end, start, end … as the pure path appends them
            deltas.append(np.tile(np.array([1 << bit, -(1 << bit)], dtype=np.int64), len(spans[0])))
    if not times:
        return {}
    order = np.argsort(np.concatenate(times), kind="stable")
    at = np.concatenate(times)[order]
    running = np.cumsum(np.concatenate(deltas)[order])[:-1]
    length = at[1:] - at[:-1]
    counted = (running > 0) & (at[1:] > at[:-1])
    running, length = running[counted], length[counted]
    found, first = np.unique(running, return_index=True)
    return {_TYPE_SETS[r]: vectorized.ordered_sum(length[running == r]) for r in found[np.argsort(first)].tolist()}


def _type_set(running: int) -> frozenset[str]:
    """The kernel types whose bit is set in ``running`` (a running sum of ±(1 << bit) per span edge)."""
    return frozenset(k for bit, k in enumerate(_TYPES) if running & (1 << bit))


#: :func:`_type_set` of every mask of :data:`_TYPES`' bits, computed once instead of once per segment.
_TYPE_SETS = [_type_set(mask) for mask in range(1 << len(_TYPES))]


def comm_share_metrics(t: EventTable) -> dict[str, FactValue]:
    """Communication share of busy GPU kernel time, in HTA's kernel-type terms.

    Returns (empty when the trace has no GPU kernels):
        ``kernel_busy_us``: time during which any computation, communication or memory kernel runs;
        ``comm_kernel_share_pct``: share of it with a communication kernel running (alone or
        overlapping: the sum of HTA's categories that name COMMUNICATION);
        ``comm_only_kernel_share_pct``: share with communication running and nothing else
        (HTA's plain "COMMUNICATION" row).
    """
    split = kernel_type_time_us(t)
    busy = sum(split.values())
    if busy <= 0:
        return {}
    comm = sum(v for k, v in split.items() if kn.COMMUNICATION in k)
    only = split.get(frozenset({kn.COMMUNICATION}), 0.0)
    return {"kernel_busy_us": round(busy, 1), "comm_kernel_share_pct": pct(comm, busy),
            "comm_only_kernel_share_pct": pct(only, busy)}
