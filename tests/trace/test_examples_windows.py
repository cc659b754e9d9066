"""Profile windows that the agent took of two planted examples on the H200 (bench/results/h200-validate-examples-dec4).

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
