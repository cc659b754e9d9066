"""GPU-side findings of a profile window do not warn while the live loop waits for data.

The case: pytorch/examples' ImageNet script on the H200 (docs/validation.md) — the agent measured a
45% data wait over many steps, while the 5-step window caught ready batches and its trace read
GPU-bound, so GD403/GD203 warned beside GD102. Here the real fp32 ResNet trace's findings (GPU-side,
critical and warning) are put beside a live data wait.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpudoctor.catalog.merge import bound_by_live_input
from gpudoctor.model import Severity
from gpudoctor.pipeline import analyze_paths


def test_gpu_side_findings_become_info_while_the_loop_waits_for_data(trace_file: Callable[[str], Path]) -> None:
    findings = analyze_paths([trace_file("h200/resnet_fp32.json.gz")]).findings
    gpu_side = {f.code for f in findings if f.impact is not None and f.impact.side == "gpu"
                and f.severity is not Severity.INFO}
    assert {"GD201", "GD202"} <= gpu_side
    bounded = {f.code: f for f in bound_by_live_input(findings, 45.0)}
    for code in gpu_side:
        assert bounded[code].severity is Severity.INFO
        assert bounded[code].impact is not None and "waits for data 45%" in bounded[code].impact.basis
    unchanged = {f.code: f.severity for f in bound_by_live_input(findings, 4.0)}
    assert unchanged == {f.code: f.severity for f in findings}
