"""Impact estimates and the bottleneck verdict on real H200 traces (shared/traces/h200).

What they pin: a fix is worth what it gains given what bounds the step — GPU-side fixes do not warn
while the GPU waits for data, a sync costs what the GPU idles after it, and the verdict names the
bound with step parts that add up to the step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.model import Severity
from gpudoctor.pipeline import analyze_paths


def _report(path: Path):  # type: ignore[no-untyped-def]
    return analyze_paths([path])


def _by_code(report):  # type: ignore[no-untyped-def]
    return {f.code: f for f in report.findings}


def test_input_bound_job_puts_the_input_fix_first_and_gpu_fixes_do_not_warn(trace_file: Callable[[str], Path]) -> None:
    report = _report(trace_file("h200/loader_bound.json.gz"))
    assert report.findings[0].code == "GD102"
    found = _by_code(report)
    assert found["GD102"].impact is not None and found["GD102"].impact.est_speedup_low > 2.0
    for code in ("GD201", "GD202"):
        assert found[code].severity is Severity.INFO, code
        assert found[code].impact is not None and found[code].impact.est_speedup_high < 1.1
        assert "host's floor" in found[code].impact.basis
    assert report.bottleneck is not None and report.bottleneck.bound == "input"


def test_gpu_bound_fp32_model_estimates_bf16_from_kernel_time(trace_file: Callable[[str], Path]) -> None:
    report = _report(trace_file("h200/resnet_fp32.json.gz"))
    gd201 = _by_code(report)["GD201"]
    assert gd201.impact is not None
    assert 1.3 < gd201.impact.est_speedup_low <= gd201.impact.est_speedup_high < 2.2
    assert gd201.impact.cost_ms_per_step == pytest.approx(14.9, abs=0.3)  # the GEMM/conv part of the step picture
    assert report.findings[0].code == "GD201"
    assert report.bottleneck is not None and report.bottleneck.bound == "gpu-compute"


def test_step_parts_add_up_to_the_step(trace_file: Callable[[str], Path]) -> None:
    for name in ("resnet_fp32", "loader_bound", "sync_pageable", "compile_break"):
        bottleneck = _report(trace_file(f"h200/{name}.json.gz")).bottleneck
        assert bottleneck is not None
        assert sum(ms for _, ms, _ in bottleneck.parts) == pytest.approx(bottleneck.step_ms, rel=0.02), name


def test_sync_costs_what_the_gpu_idles_after_it(trace_file: Callable[[str], Path]) -> None:
    sync = _by_code(_report(trace_file("h200/sync_pageable.json.gz")))["GD301"]
    assert sync.impact is not None and sync.impact.cost_ms_per_step > 50  # the GPU idles ~86 ms/step after .item()
    assert "idle" in sync.message


def test_json_report_has_bottleneck_and_impact(trace_file: Callable[[str], Path]) -> None:
    from gpudoctor.report.render import to_dict

    data = to_dict(_report(trace_file("h200/resnet_tf32.json.gz")))
    assert data["bottleneck"]["bound"] == "gpu-compute"
    assert {p["name"] for p in data["bottleneck"]["parts"]} >= {"gpu:gemm/conv", "idle:host/launch"}
    with_impact = [f for f in data["findings"] if f["impact"]]
    assert with_impact and all({"cost_ms_per_step", "cost_pct_of_step", "est_speedup_low", "est_speedup_high",
                                "basis"} <= set(f["impact"]) for f in with_impact)
    gains = [f["impact"]["est_speedup"] for f in with_impact]
    assert gains == sorted(gains, reverse=True)
