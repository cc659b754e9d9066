"""The numpy paths of timeline, comm and metrics against their pure-Python functions: exactly equal.

tests/trace/test_vectorized_metrics.py compares the rank metrics as rounded; here each function's own
result is compared as it is returned (the device selection, the merged spans per kernel type, the
kernel-type split, the per-step lists), on every shared trace and on small made-up tables that reach
the corners (a sync without a correlation id, a correlation id launched twice, negative ns times,
communication kernels in and between steps).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpudoctor.trace import comm, gaps, metrics, timeline, vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_ANNOTATION, K_KERNEL, K_MEMSET, K_PYTHON, K_RUNTIME, K_SYNC, EventTable
from gpudoctor.trace.reader import load_trace

pytest.importorskip("numpy")

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
_FILES = sorted(p for p in TRACES.rglob("*.json*") if not p.name.endswith(".result.json")) if TRACES.exists() else []


def _results(t: EventTable, mode: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every function with a numpy path, on a fresh cache, in ``mode``."""
    monkeypatch.setenv(vectorized.MODE_ENV, mode)
    t.cache.clear()
    steps = timeline.step_spans(t)
    ctx = Context(t, steps)
    out: dict[str, Any] = {
        "end_times": timeline.end_times(t).tolist(),
        "hta_device_events": timeline.hta_device_events(t),
        "hta_type_spans": comm.hta_type_spans(t),
        "kernel_type_time_us": comm.kernel_type_time_us(t),
        "comm_share_metrics": comm.comm_share_metrics(t),
        "temporal": metrics._temporal(t),
        "kernel_mix": metrics._kernel_mix(t, ctx),
        "launches": metrics._launches(t, ctx),
        "gaps": gaps.gap_metrics(t, ctx),
        "aten_ops_per_step": metrics.aten_ops_per_step(t, ctx),
        "outside_collective_steps": metrics.outside_collective_steps(t, ctx),
        "collectives": metrics._collectives(t, ctx),
    }
    t.cache.clear()
    out["temporal_first"] = metrics._temporal(t)  # the arrays made by _temporal itself, not by the calls above
    return out


def _assert_same(t: EventTable, monkeypatch: pytest.MonkeyPatch) -> None:
    pure = _results(t, "never", monkeypatch)
    fast = _results(t, "always", monkeypatch)
    for key, value in pure.items():
        assert fast[key] == value, key
        assert repr(fast[key]) == repr(value), key  # the same types (no numpy scalar, no 0 for 0.0)
        if isinstance(value, dict):
            assert list(fast[key]) == list(value), key


@pytest.mark.skipif(not _FILES, reason=f"shared traces not found under {TRACES}")
@pytest.mark.parametrize("path", _FILES, ids=lambda p: str(p.relative_to(TRACES)))
def test_each_numpy_path_returns_the_pure_result(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        t = load_trace(str(path), 0).events
    except Exception:  # the bad-input traces: nothing to compare
        return
    _assert_same(t, monkeypatch)


def _table(events: list[tuple[str, int, float, float, int, int]], ns: bool = False) -> EventTable:
    """A table of (name, kind, ts, dur, stream, correlation) events."""
    t = EventTable(threads=[(1, 1)], ns_resolution=ns)
    for name, kind, ts, dur, stream, corr in events:
        if name not in t.names:
            t.names.append(name)
        t.name.append(t.names.index(name))
        t.kind.append(kind)
        t.thread.append(0)
        t.ts.append(ts)
        t.dur.append(dur)
        t.stream.append(stream)
        t.correlation.append(corr)
        t.nbytes.append(-1)
    return t


def _steps_with_work(ns: bool) -> EventTable:
    events: list[tuple[str, int, float, float, int, int]] = []
    corr = 0
    for step in range(4):
        base = -50.3 + 100.0 * step if ns else 100.0 * step
        events.append((f"ProfilerStep#{step}", K_ANNOTATION, base, 90.0, -1, -1))
        for k, (name, kind) in enumerate((("sgemm_128x64", K_KERNEL), ("ncclDevKernel_AllReduce", K_KERNEL),
                                          ("Memset (Device)", K_MEMSET), ("ncclKernel_Broadcast", K_KERNEL),
                                          ("elementwise_kernel", K_KERNEL))):
            corr += 1
            launch = base + 2.5 * k + 0.25
            events.append(("cudaLaunchKernel", K_RUNTIME, launch, 1.5, -1, corr))
            if k == 2:  # a correlation id launched twice: the later call is the launch
                events.append(("cudaLaunchKernel", K_RUNTIME, launch + 0.5, 1.0, -1, corr))
            events.append((name, kind, base + 30.0 - 7.0 * k + (0.4 if ns else 0.0), 12.0 + k, 7 if k % 2 else 8, corr))
        events.append(("Event Sync", K_SYNC, base + 80.0, 3.0, 7, -1))  # a sync without an id
        events.append(("python_fn", K_PYTHON, base + 1.0, 5.0, 7, -1))
        events.append(("aten::mm", 1, base + 0.1, 4.0, -1, -1))
        events.append(("aten::add", 1, base + 89.9, 4.0, -1, -1))
    events.append(("ncclDevKernel_AllReduce", K_KERNEL, 1000.0, 5.0, 7, 999))  # launched by nothing known
    if ns:  # rounded up to 0: 0.0, as math.ceil's int makes it, not numpy's -0.0
        events += [("cudaLaunchKernel", K_RUNTIME, -0.9, 0.1, -1, 500), ("elementwise_kernel", K_KERNEL, -0.6, 0.3, 8, 500)]
    return _table(events, ns)


@pytest.mark.parametrize("ns", [False, True])
def test_the_corners_give_the_pure_results(ns: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same(_steps_with_work(ns), monkeypatch)


def test_an_empty_table_gives_the_pure_results(monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same(_table([]), monkeypatch)
