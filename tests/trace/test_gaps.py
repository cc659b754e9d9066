"""Long GPU gaps are split into the loop's waits for data and the host's own work, and that work is named.

GD304 used to count every long gap as host work to move off the step. On accelerate's cv_example window
(H200) its one 137 ms gap was 128 ms of ``DataLoader.__next__`` — GD102's input wait — and GD304 still
warned with an estimate of 1.15–1.34×. On shared/traces/h200/sync_pageable the gaps are the host
making the next batch with ``aten::randn`` on the CPU: that is GD304's, and now the message says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.pipeline import analyze_paths
from gpudoctor.trace import vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_ANNOTATION, K_CPU_OP, K_KERNEL, K_RUNTIME, EventTable
from gpudoctor.trace.gaps import gap_metrics
from gpudoctor.trace.timeline import step_spans

WINDOW = Path(__file__).resolve().parents[1] / "data" / "trace" / "h200_accelerate_cv_as_is.json.gz"
MS = 1000.0


def test_a_gap_that_is_the_loops_wait_for_data_is_not_gd304s() -> None:
    report = analyze_paths([str(WINDOW)])
    rank = report.data["ranks"][0]
    assert rank["max_gpu_gap_ms"] == pytest.approx(136.5, abs=0.1)
    assert rank["gpu_gap_input_ms"] == pytest.approx(128.4, abs=0.1)
    assert rank["gpu_gap_host_ms"] == pytest.approx(8.1, abs=0.1)
    codes = {f.code for f in report.findings}
    assert "GD102" in codes and "GD304" not in codes


def test_host_work_in_the_gaps_is_named(shared_traces: Path) -> None:
    report = analyze_paths([str(shared_traces / "h200" / "sync_pageable.json.gz")])
    (gd304,) = [f for f in report.findings if f.code == "GD304"]
    assert "the host ran its own work: aten::randn 328 ms" in gd304.message
    assert gd304.impact is not None and gd304.impact.cost_ms_per_step == pytest.approx(84.5, abs=0.1)


def _table() -> EventTable:
    """Two steps on one thread; in the first, a 350 ms gap holds a 120 ms wait for data, then a 150 ms
    ``checkpoint`` annotation (an ``aten::copy_`` inside it), then 30 ms that no op covers."""
    t = EventTable(threads=[(1, 1)])

    def add(name: str, kind: int, ts: float, dur: float, stream: int = -1, corr: int = -1) -> None:
        if name not in t.names:
            t.names.append(name)
        for column, value in ((t.name, t.names.index(name)), (t.thread, 0), (t.ts, ts), (t.dur, dur),
                              (t.stream, stream), (t.correlation, corr), (t.nbytes, -1)):
            column.append(value)
        t.kind.append(kind)

    for step, base in enumerate((0.0, 400 * MS)):
        add(f"ProfilerStep#{step}", K_ANNOTATION, base, 390 * MS)
        add("cudaLaunchKernel", K_RUNTIME, base + 1 * MS, 0.01 * MS, corr=step)
        add("sgemm", K_KERNEL, base + 2 * MS, 10 * MS, stream=7, corr=step)
        late = 362 * MS if step == 0 else 20 * MS  # the second step keeps its GPU busy
        add("cudaLaunchKernel", K_RUNTIME, base + late - 12 * MS, 0.01 * MS, corr=10 + step)
        add("sgemm", K_KERNEL, base + late, 10 * MS, stream=7, corr=10 + step)
    add("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", K_ANNOTATION, 20 * MS, 120 * MS)
    add("checkpoint", K_ANNOTATION, 150 * MS, 150 * MS)
    add("aten::copy_", K_CPU_OP, 160 * MS, 100 * MS)
    return t


@pytest.mark.parametrize("mode", ["never", "always"])
def test_the_rest_of_a_gap_goes_to_the_outermost_ops_and_to_untraced_python(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vectorized.MODE_ENV, mode)
    t = _table()
    values = gap_metrics(t, Context(t, step_spans(t)))
    assert values["gpu_gaps_over_100ms"] == 1                      # 12 → 362 ms; the others are 30 and 8 ms
    assert values["max_gpu_gap_ms"] == pytest.approx(350.0)
    assert values["gpu_gap_input_ms"] == pytest.approx(120.0)      # 20 → 140 ms
    assert values["gpu_gap_host_ms"] == pytest.approx(230.0)       # 12 → 20, 140 → 362
    # the annotation, not the op inside it; 12→20, 140→150 and 300→362 ms are covered by no op
    assert values["gpu_gap_host_ops"] == "checkpoint 150 ms, 80 ms in no traced op (Python the profiler does not record)"
