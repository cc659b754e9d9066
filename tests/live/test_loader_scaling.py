"""GD102's bound on what more DataLoader workers can gain: the CPUs, measured on a real third-party job.

The numbers are the H200 runs of accelerate's ``examples/cv_example.py`` (bench/validation/accelerate_cv_validation.py,
tests/data/gpu_runs/h200-accelerate-cv/): 16 CPUs, ResNet-50d on JPEGs decoded by 4 workers; as is 97.9 ms per
step, 67% of it waiting for data, the GPU busy 18.2 ms; 8 workers measured 1.70× and 1.84×, 12 workers
1.92× and 2.06×. After GD102's fix (8 workers): 50.3 ms, 63% waiting, the GPU busy 10.2 ms; 12 workers
against those 8 measured 1.04× and 1.21× — the unbounded estimate had promised 1.80–2.74×.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import input_values, loader_values
from gpudoctor.model import FactSet, Location, Severity, Source
from gpudoctor.pipeline import analyze_paths

CATALOG = load_catalog()


def _job(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"cpu_count_allowed": 16.0, "worker_count": 4, "worker_busy_count": 4,
                            "worker_cpu_mean_pct": 95.0, "process_cpu_pct": 60.0}
    base.update(values)
    return base


def test_cpu_bound_workers_can_grow_to_what_the_cpus_allow() -> None:
    v = loader_values(_job())
    assert v["loader_workers_usable"] == 14 and v["loader_scaling_max"] == pytest.approx(3.5)
    assert "4 workers produce, the 16 CPUs fit 14" in v["loader_bound_text"]


def test_the_agents_num_workers_beats_the_process_count() -> None:
    # 16 worker processes, 8 of them the idle persistent workers of an evaluation loader
    v = loader_values(_job(worker_count=16, worker_busy_count=8, loader_workers=8))
    assert v["loader_scaling_max"] == pytest.approx(14 / 8)
    assert loader_values(_job(worker_count=16, worker_busy_count=8))["loader_scaling_max"] == pytest.approx(14 / 8)


def test_workers_that_fill_the_cpus_leave_nothing_to_scale() -> None:
    v = loader_values(_job(loader_workers=14))
    assert v["loader_scaling_max"] == 1.0 and "will not hide it" in v["loader_bound_text"]


def test_loading_that_waits_on_storage_is_not_bounded_by_the_cpus() -> None:
    v = loader_values(_job(cpu_count_allowed=2.0, worker_count=2, worker_busy_count=0, worker_cpu_mean_pct=10.0,
                           loader_workers=2))
    assert v["loader_workers_usable"] == 16 and v["loader_scaling_max"] == pytest.approx(8.0)


def test_an_idle_evaluation_loader_does_not_make_busy_workers_look_storage_bound() -> None:
    # the H200 run3 state after GD102's snippet: 14 training workers at ~77% CPU, 14 persistent evaluation
    # workers idle; the mean over all 28 is below half a core, yet the producing ones are CPU-bound
    v = loader_values(_job(worker_count=28, worker_busy_count=14, worker_cpu_mean_pct=38.0, loader_workers=14))
    assert v["loader_workers_usable"] == 14 and v["loader_scaling_max"] == 1.0


def test_loading_in_the_loop_gains_the_overlap_on_a_small_machine() -> None:
    # 2 CPUs: one worker, as fast at loading as the loop; 90% of a 20 ms step is loading, so the input's
    # period becomes 18 ms against a 20 ms step: 1.11× at best
    v = loader_values(_job(cpu_count_allowed=2.0, worker_count=0, worker_busy_count=0, loader_workers=0,
                           process_cpu_pct=100.0, data_wait_pct=90.0, step_time_ms=20.0))
    assert v["loader_workers_usable"] == 1 and v["loader_scaling_max"] == pytest.approx(100 / 90)


def _steady(job: dict[str, Any]) -> dict[str, Any]:
    """The agent's split of such a job's wait: all of it steady-state production (epochs of thousands of steps)."""
    wait = job["data_wait_pct"] / 100 * job["step_time_ms"]
    return {**job, "data_wait_steady_ms_per_step": wait, "data_wait_main_ms_per_step": 0.0,
            "loader_steady_steps": job["window_steps"], "loader_steady_step_ms": job["step_time_ms"],
            "loader_steady_wait_ms": wait}


def _gd102(job: dict[str, Any]) -> tuple[float, float]:
    job = _steady({**job, **loader_values(job)})
    job.update(input_values(job))
    fs = FactSet("job", Source.LIVE, job, Location(pid=10), timestamp=time.time())
    found = [f for f in evaluate(CATALOG, [fs], [Source.LIVE]).findings if f.code == "GD102"]
    assert found and found[0].impact is not None, found
    return found[0].impact.est_speedup_low, found[0].impact.est_speedup_high


def test_gd102_live_estimate_on_the_h200_cv_example_before_and_after_its_fix() -> None:
    before = _job(data_wait_pct=67.0, step_time_ms=97.9, step_time_p50_ms=47.4, steps_per_s=10.22,
                  gpu_busy_ms_per_step=18.2, loader_workers=4, window_steps=50)
    low, high = _gd102(before)
    # the estimate is for the 14 workers the CPUs allow: 14 (with pinned memory and persistent workers)
    # measured 2.73× and 3.20×; the range is narrow (issue 36: high/low <= 1.5), 12 workers measured ~2×
    assert 2.6 <= low <= 2.9 and 2.9 <= high <= 3.2 and high / low <= 1.5
    after = _job(data_wait_pct=63.0, step_time_ms=50.3, step_time_p50_ms=15.2, steps_per_s=19.9,
                 gpu_busy_ms_per_step=10.2, loader_workers=8, worker_count=16, worker_busy_count=8,
                 window_steps=186)
    low, high = _gd102(after)
    # 16 worker processes at 95% of a core and the loop fill the 16 CPUs: the low end adds no worker;
    # 12 workers against those 8 measured 1.04–1.21× (the estimate without the CPU count: 1.80–2.74×)
    assert low == pytest.approx(1.0) and 1.21 <= high <= 1.8
    unbounded = {k: v for k, v in after.items() if k != "cpu_count_allowed"}   # no CPU count: no estimate
    fs = FactSet("job", Source.LIVE, {**(s := _steady(unbounded)), **input_values(s)}, Location(pid=10),
                 timestamp=time.time())
    (finding,) = [f for f in evaluate(CATALOG, [fs], [Source.LIVE]).findings if f.code == "GD102"]
    assert finding.impact is None


def test_a_profile_windows_trace_is_bounded_by_the_live_context_a_trace_alone_is_not(
        shared_traces: Any) -> None:
    path = str(shared_traces / "h200" / "loader_bound.json.gz")
    alone = analyze_paths([path])
    (plain,) = [f for f in alone.findings if f.code == "GD102"]
    context = loader_values(_job(loader_workers=8))            # 8 workers producing, 14 usable: 1.75×
    with_live = analyze_paths([path], context=context)
    (bounded,) = [f for f in with_live.findings if f.code == "GD102"]
    assert plain.impact is not None and bounded.impact is not None
    assert plain.impact.est_speedup_high > 8.0                  # 2.62–8.59×: workers hide all of it
    assert bounded.impact.est_speedup_high == pytest.approx(1.75, abs=0.01)
    assert "the 16 CPUs fit 14" in bounded.impact.basis and "fit" not in plain.impact.basis


def test_a_merged_gd102_keeps_the_agents_estimate_over_the_profile_windows() -> None:
    # run3 on the H200: the window's 5 steps were 41.6 ms (batches ready), the loop's mean 110 ms
    from msgspec.structs import replace

    from gpudoctor.catalog.merge import merge_findings
    from gpudoctor.model import Finding, Impact

    rule = CATALOG.get("GD102")
    assert rule is not None and rule.estimate_from == (Source.LIVE, Source.TRACE)
    base = Finding(code="GD102", name="input-bound", severity=Severity.CRITICAL, title="t", message="m",
                   source=Source.TRACE, evidence=(), fix=rule.fix, estimate_from=rule.estimate_from)
    trace = replace(base, impact=Impact(37.5, 50.6, 1.673, 2.352, "window", "host"))
    live = replace(base, source=Source.LIVE, impact=Impact(73.3, 66.3, 1.87, 2.97, "agent", "host"))
    (merged,) = merge_findings([trace, live])
    assert merged.source is Source.LIVE and merged.also_sources == (Source.TRACE,)
    assert merged.impact is not None and merged.impact.est_speedup_high == 2.97
    # a rule that says nothing keeps the trace's (kernel-measured) estimate
    (other,) = merge_findings([replace(trace, estimate_from=()), replace(live, estimate_from=())])
    assert other.source is Source.TRACE


def _gd305(affinity: int, omp: str, loop_cpu_pct: float, busy_workers: int) -> list[str]:
    from gpudoctor.live.facts import build_factsets
    from gpudoctor.live.samples import ProcessSample, WorkerSample

    workers = tuple(WorkerSample(100 + i, 80.0, 300.0) for i in range(busy_workers))
    proc = ProcessSample(time.time(), 10, True, cpu_pct=loop_cpu_pct, num_threads=40,
                         cpu_affinity=tuple(range(affinity)), workers=workers, env={"OMP_NUM_THREADS": omp})
    factsets = build_factsets(10, [], proc, None, None, None, 600.0)
    return [f.message for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings if f.code == "GD305"]


def test_gd102s_advice_does_not_read_as_oversubscription() -> None:
    # the H200 after GD102's snippet: 14 busy workers beside a 16-thread pool that mostly sleeps, 16 CPUs
    assert _gd305(16, "16", loop_cpu_pct=106.0, busy_workers=14) == []
    # a container of 4 CPUs whose process sized its pool to a 64-core host: oversubscribed however idle
    (message,) = _gd305(4, "64", loop_cpu_pct=100.0, busy_workers=2)
    assert message.startswith("66 compute threads (the loop's 64 of 64 intra-op + 2 busy workers)")
    # the pool within the CPUs, but the loop keeps 15 cores busy next to 14 workers on 16 CPUs
    assert _gd305(16, "16", loop_cpu_pct=1490.0, busy_workers=14)


def test_the_accelerate_windows_long_gap_is_the_input_wait_not_host_work() -> None:
    # the H200 run3 profile window of accelerate's cv_example, as is: its one 137 ms gap is 128 ms of
    # DataLoader.__next__. GD304 used to count it as host work, and GD302 (pageable copies) was said to
    # share its cost; GD102's snippet removed the gap with the wait (trace/gaps.py, tests/trace/test_gaps.py)
    from pathlib import Path

    trace = Path(__file__).resolve().parents[1] / "data" / "trace" / "h200_accelerate_cv_as_is.json.gz"
    findings = {f.code: f for f in analyze_paths([str(trace)]).findings}
    assert {"GD102", "GD302"} <= set(findings) and "GD304" not in findings
    assert findings["GD302"].impact is not None and findings["GD302"].impact.shares_cost_with is None


def test_a_gpu_loop_that_loads_in_process_frees_its_loading_core_for_the_workers() -> None:
    """H100, ResNet-18 decoding in the loop (tests/data/gpu_runs/h100-input-dec7): 159.4 ms of a 176.9 ms
    step loaded in the loop, 16 CPUs, torch's 16 intra-op threads mostly asleep (the GPU computes). The
    low end counted those 16 threads as busy and gave the workers one core: 1.00–10.11×, while GD102's
    fix (14 workers, pinned, persistent) measured 7.91×."""
    job = _job(worker_count=0, worker_busy_count=0, loader_workers=0, process_cpu_pct=105.0,
               data_wait_pct=90.1, step_time_ms=176.9, window_steps=80, loop_compute_threads=16,
               data_wait_main_ms_per_step=159.4, data_wait_steady_ms_per_step=0.0,
               loader_main_steps=80, loader_main_step_ms=176.9, loader_main_wait_ms=159.4)
    job.update(loader_values(job))
    v = input_values(job)
    assert v["input_workers_low"] == 14
    low, high = 176.9 / (176.9 - v["input_saved_ms_low"]), 176.9 / (176.9 - v["input_saved_ms_high"])
    assert 5.5 < low < 7.91 < high, (low, high)
    # a CPU job whose loop computes on its threads keeps them: the workers still get what is left
    cpu = {**job, "cpu_count_allowed": 2.0, "loop_compute_threads": 2, "process_cpu_pct": 190.0,
           "loader_main_step_ms": 150.0, "loader_main_wait_ms": 50.0, "step_time_ms": 150.0}
    cpu.update(loader_values(cpu))
    assert input_values(cpu)["input_workers_low"] == 1
