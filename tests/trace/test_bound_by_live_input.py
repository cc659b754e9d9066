"""GPU-side findings of a profile window do not warn while the live loop waits for data.

The case: pytorch/examples' ImageNet script on the H200 (docs/validation.md) — the agent measured a
45% data wait over many steps, while the 5-step window caught ready batches and its trace read
GPU-bound, so GD403/GD203 warned beside GD102. Here the real fp32 ResNet trace's findings (GPU-side,
critical and warning) are put beside a live data wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.merge import bound_by_live_input, merge_findings
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import StepStats
from gpudoctor.model import Finding, Severity, Source
from gpudoctor.pipeline import analyze_paths


def _live_input_finding(wait_pct: float) -> Finding:
    steps = StepStats(time.time(), 400, 40, data_wait_pct=wait_pct, step_time_p50_ms=120.0, steps_per_s=8.0)
    factsets = build_factsets(10, [], None, None, None, steps, 10.0)
    return next(f for f in evaluate(load_catalog(), factsets, [Source.LIVE]).findings if f.code == "GD102")


def test_gpu_side_findings_become_info_while_the_loop_waits_for_data(trace_file: Callable[[str], Path]) -> None:
    findings = analyze_paths([trace_file("h200/resnet_fp32.json.gz")]).findings
    gpu_side = {f.code for f in findings if f.impact is not None and f.impact.side == "gpu"
                and f.severity is not Severity.INFO}
    assert {"GD201", "GD202"} <= gpu_side
    # without the input finding in the list nothing steps back: the list would point at a fix it does not name
    assert [f.severity for f in bound_by_live_input(findings, 45.0)] == [f.severity for f in findings]
    findings = [*findings, _live_input_finding(45.0)]
    bounded = {f.code: f for f in bound_by_live_input(findings, 45.0)}
    assert bounded["GD102"].severity is Severity.CRITICAL
    # the input fix comes first in the list, even where a GPU-side estimate is larger
    order = [f.code for f in merge_findings(bounded.values())]
    assert order[0] == "GD102"
    assert all(bounded[c].impact.after == "GD102" for c in gpu_side)  # type: ignore[union-attr]
    assert bounded["GD201"].impact.describe().endswith("after the GD102 fix")  # type: ignore[union-attr]
    for code in gpu_side:
        assert bounded[code].severity is Severity.INFO
        assert bounded[code].impact is not None and "waits for data 45%" in bounded[code].impact.basis
    unchanged = {f.code: f.severity for f in bound_by_live_input(findings, 4.0)}
    assert unchanged == {f.code: f.severity for f in findings}
