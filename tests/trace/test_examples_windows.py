"""Profile windows that the agent took of two planted examples on the H200 (tests/data/gpu_runs/h200-validate-examples-dec4).

Both planted problems were missed there: the validation of 4 Dec found neither GD202 on
examples/tf32_off.py (fixed: 4.6–5.1×) nor GD302 on examples/pageable_memcpy.py (fixed: 1.49–1.57×),
where the run of 29 Nov had found both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.model import Severity
from gpudoctor.pipeline import analyze_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def test_gemms_launched_before_the_window_still_say_their_precision() -> None:
    """tf32_off queues steps ahead: every GEMM that ran in the 5-step window was launched before the
    profiler started, so the classes by launch were all 0 ms — GD201 said 1.00×, GD202's trace block
    judged TF32 clean, and the live GD202 was withdrawn as cleared."""
    report = analyze_paths([str(DATA / "h200_tf32_off_window.json.gz")])
    rank = report.data["ranks"][0]
    assert rank["gemm_fp32_simt_ms_per_step"] == pytest.approx(rank["gemm_ms_per_step"], rel=0.01)
    assert rank["gemm_ms_per_step"] > 2.0
    found = {f.code: f for f in report.findings}
    for code in ("GD202", "GD201"):
        assert found[code].severity is not Severity.INFO
        assert found[code].impact is not None and found[code].impact.est_speedup_low > 1.5


def test_pageable_copies_are_bounded_by_the_gpu_without_them() -> None:
    """The copies are GPU busy time too (6.3 of 16.5 ms/step): bounded by the whole busy time GD302
    estimated 1.00×; pinned copies run beside the kernels, and the fix measured 1.49–1.57×."""
    report = analyze_paths([str(DATA / "h200_pageable_memcpy_window.json.gz")])
    (gd302,) = [f for f in report.findings if f.code == "GD302"]
    assert gd302.severity is Severity.WARNING and gd302.impact is not None
    assert gd302.impact.est_speedup_low <= 1.49 and gd302.impact.est_speedup_high >= 1.57
    assert gd302.impact.est_speedup_high < 2.0


def test_a_window_whose_kernels_ran_behind_the_host_is_pictured_on_the_gpu() -> None:
    """The window's five steps were enqueued in 3 ms each (the profiler's start drained the queue) and
    their kernels ran 43 ms per step, up to 237 ms after the last host span: clipped to the host's
    spans, GD202 said 1.82× for a fix measured at 4.6–5.3× tool-free. Pictured on the GPU, each
    step is its kernels' time, and the estimate holds the measured range."""
    report = analyze_paths([str(DATA / "h200_tf32_off_window.json.gz")])
    rank = report.data["ranks"][0]
    assert rank["gpu_paced_steps"] is True and rank["gpu_behind_host_ms"] > 200
    assert rank["profiled_step_ms"] == pytest.approx(3.0, abs=0.2)  # the host's spans, as they were
    assert rank["step_time_ms"] == pytest.approx(43.2, abs=0.5)
    assert rank["gemm_fp32_simt_ms_per_step"] > 40
    assert rank["bound"] == "gpu-compute"
    found = {f.code: f for f in report.findings}
    gd202 = found["GD202"].impact
    assert gd202 is not None and gd202.est_speedup_low <= 4.6 and gd202.est_speedup_high >= 5.0
    assert any("queued ahead of the GPU" in note for note in report.notes)


def test_a_window_in_step_with_its_kernels_keeps_the_host_spans() -> None:
    """The same test on a window whose kernels ran inside the steps: nothing moves."""
    report = analyze_paths([str(DATA / "h200_pageable_memcpy_window.json.gz")])
    assert "gpu_paced_steps" not in report.data["ranks"][0]
