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
from gpudoctor.catalog.finalize import apply_gates
from gpudoctor.catalog.merge import merge_findings
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import StepStats
from gpudoctor.model import Finding, Severity, Source
from gpudoctor.pipeline import analyze_paths


def bound_by_live_input(findings: list[Finding], wait_pct: float, options: dict | None = None) -> list[Finding]:
    """GD102's ``[gate]`` as finalize applies it, with the live job's data wait."""
    return apply_gates(list(findings), load_catalog(), options or {}, {"data_wait_pct": wait_pct})


def _live_input_finding(wait_pct: float) -> Finding:
    wait_ms = wait_pct / 100 * 125.0   # the agent's split: all of it workers producing slower than the loop
    steps = StepStats(time.time(), 400, 40, data_wait_pct=wait_pct, step_time_p50_ms=120.0, steps_per_s=8.0,
                      data_wait_steady_ms_per_step=wait_ms, data_wait_main_ms_per_step=0.0)
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


def test_gpu_side_findings_gain_nothing_when_the_input_cannot_go_faster() -> None:
    """accelerate's cv_example on the H200 after GD102's own fix (run5/run6): 14 workers fill what the
    16 CPUs allow, the loop still waits 32% of a 38.3 ms step, GD102 says more workers gain nothing. The
    profile window's GD403 warned at 1.10–1.15× and GD201 said 1.03–1.04×; inductor measured 0.94× and
    bf16 0.92× — the step stays at the input's pace."""
    from gpudoctor.live.facts import input_values, loader_values
    from gpudoctor.model import FactSet, Location

    window = Path(__file__).resolve().parents[1] / "data" / "trace" / "h200_accelerate_cv_gd102.json.gz"
    trace = analyze_paths([str(window)]).findings
    assert {f.code: f.severity for f in trace}.get("GD403") is Severity.WARNING
    job = {"cpu_count_allowed": 16.0, "worker_count": 28, "worker_busy_count": 14, "worker_cpu_mean_pct": 80.0,
           "process_cpu_pct": 100.0, "loader_workers": 14, "data_wait_pct": 32.0, "step_time_ms": 38.3,
           "step_time_p50_ms": 37.0, "steps_per_s": 26.1, "gpu_busy_ms_per_step": 22.6, "window_steps": 261}
    job.update(loader_values(job))
    job.update(data_wait_steady_ms_per_step=0.32 * 38.3, data_wait_main_ms_per_step=0.0, loader_steady_steps=261,
               loader_steady_step_ms=38.3, loader_steady_wait_ms=0.32 * 38.3)   # all of it steady-state production
    job.update(input_values(job))
    live = evaluate(load_catalog(), [FactSet("job", Source.LIVE, job, Location(pid=10), timestamp=time.time())],
                    [Source.LIVE]).findings
    (gd102,) = [f for f in live if f.code == "GD102"]
    assert gd102.severity is Severity.INFO and gd102.impact is not None and gd102.impact.est_speedup_high < 1.05
    bounded = {f.code: f for f in bound_by_live_input([*trace, gd102], 32.0)}
    for code in ("GD403", "GD201"):
        f = bounded[code]
        assert f.severity is Severity.INFO and f.impact is not None
        assert f.impact.est_speedup_low == f.impact.est_speedup_high == 1.0
        assert "more workers will not hide it (GD102)" in f.impact.basis and f.impact.after is None
    # an input fix that still gains something leaves the GPU-side estimates as they are
    from msgspec.structs import replace

    gaining = replace(gd102, impact=replace(gd102.impact, est_speedup_high=1.3))
    kept = {f.code: f for f in bound_by_live_input([*trace, gaining], 32.0)}
    assert kept["GD403"].severity is Severity.WARNING


def test_a_gd102_option_moves_the_gate(trace_file: Callable[[str], Path]) -> None:
    """The gate compares the wait with GD102's max_dataloader_pct as the user set it (issue 37 item 1)."""
    findings = [*analyze_paths([trace_file("h200/resnet_fp32.json.gz")]).findings, _live_input_finding(45.0)]
    held = {f.code: f.severity for f in bound_by_live_input(findings, 30.0)}
    assert held["GD201"] is Severity.INFO                       # 30% >= the default 10%
    raised = {f.code: f.severity for f in bound_by_live_input(findings, 30.0, {"GD102": {"max_dataloader_pct": 35.0}})}
    assert raised["GD201"] is not Severity.INFO                  # 30% < the user's 35%: nothing steps back
