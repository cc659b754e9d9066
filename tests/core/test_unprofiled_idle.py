"""GD101 on a trace judges the step without the profiler, not only the profiled window (issue 12)."""

from __future__ import annotations

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Location, Source


def _gd101(**values: object) -> list[str]:
    facts = FactSet("rank", Source.TRACE, values, Location(rank=0))
    result = evaluate(load_catalog().select(["GD101"]), [facts], [Source.TRACE])
    return [f.severity.value for f in result.findings]


def test_host_bound_step_idle_only_under_the_profiler_is_quiet() -> None:
    # the HF GPT-2 Trainer compiled in bf16 (H200): 47% idle profiled; 24.4 ms GPU work in a 31.9 ms real step
    assert _gd101(idle_pct=47.0, has_steps=True, gpu_busy_ms_per_step=24.4, step_time_ms=31.9) == []


def test_idle_that_holds_without_the_profiler_still_warns() -> None:
    assert _gd101(idle_pct=47.0, has_steps=True, gpu_busy_ms_per_step=24.4, step_time_ms=45.0) == ["warning"]
    # the launch-bound compile_break trace: 0.16 ms GPU work in a 2.17 ms unprofiled step
    assert _gd101(idle_pct=89.9, has_steps=True, gpu_busy_ms_per_step=0.157, step_time_ms=2.168) == ["critical"]


def test_trace_without_steps_is_judged_on_its_idle_share() -> None:
    assert _gd101(idle_pct=75.0, has_steps=False) == ["critical"]
