"""GD401's cost: GPU idle in the windows between consecutive compiled graphs of one call.

Real traces: the H200 ``compile_break`` trace (``.item()`` + ``print`` in forward: three graphs per
call, a launch-bound step), the H200 Hugging Face GPT-2 ``Trainer`` (bf16 + torch.compile, five
regions per call, GPU-bound), a CPU trace of ``bench/validation/graph_break_probe.py`` with K = 2 planted
breaks (``--cpu --tiny --sizes launch --breaks 2``) and the CPU gradient-accumulation traces of
``tests/data/trace/record_compiled_accumulation.py``. The expected numbers are derived here from each
trace's own JSON events by a plain second reading, not written in.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.impact import severity_from
from gpudoctor.catalog.merge import merge_findings
from gpudoctor.model import FactSet, Finding, Location, Severity, Source
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "trace"
HF_TRACE = REPO / "tests" / "data" / "gpu_runs" / "h200-remaining-gains" / "traces" / "hf_bf16c_v50257.json.gz"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _raw(path: Path) -> dict[str, float]:
    """Windows, eager kernels and GPU idle per step, read straight from the trace's JSON events.

    Windows: consecutive ``## Call CompiledFxGraph`` host calls inside the step's outer compiled
    region (forward), and consecutive ones outside it (backward), on one thread. GPU idle of a
    window: from the GPU end of the last device event launched before it to the GPU start of the
    first launched after it, less the union of all device work (the idle after host syncs included).
    """
    with gzip.open(path) as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    host = [e for e in events if e.get("cat") not in (*DEVICE_CATS, "gpu_user_annotation")]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in host if e["name"].startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: (e["ts"], e["tid"]) for e in events
              if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    device = [(e["ts"], e["ts"] + e["dur"], e.get("cat"), launch.get(e["args"].get("correlation")))
              for e in events if e.get("cat") in DEVICE_CATS]
    busy = _union([(a, b) for a, b, _, _ in device if b > a])
    windows: list[tuple[Any, float, float]] = []
    for lo, hi in steps:
        def inside(e: dict[str, Any], lo: float = lo, hi: float = hi) -> bool:
            return lo <= e["ts"] <= hi
        regions = [e for e in host if e["name"].startswith("Torch-Compiled Region") and inside(e)]
        outer = [r for r in regions if not any(o is not r and o["tid"] == r["tid"] and o["ts"] <= r["ts"]
                                               and r["ts"] + r["dur"] <= o["ts"] + o["dur"] for o in regions)]
        assert len(outer) == 1, "these traces call one compiled function per step"
        fx = [e for e in host if e["name"].startswith("## Call CompiledFxGraph") and inside(e)]
        region = outer[0]
        forward = [e for e in fx if e["tid"] == region["tid"] and region["ts"] <= e["ts"] <= region["ts"] + region["dur"]]
        backward = [e for e in fx if e not in forward]
        for group in (forward, backward):
            group.sort(key=lambda e: e["ts"])
            windows += [(b["tid"], a["ts"] + a["dur"], b["ts"]) for a, b in zip(group, group[1:])]
    idle = eager = 0.0
    for tid, a, b in windows:
        mine = sorted((lt, start, end, cat) for start, end, cat, (lt, th) in
                      ((s, e, c, lk) for s, e, c, lk in device if lk is not None) if th == tid)
        earlier = [m for m in mine if m[0] <= a]
        later = [m for m in mine if m[0] >= b]
        eager += sum(1 for m in mine if a < m[0] < b and m[3] == "kernel")
        if earlier and later and later[0][1] > earlier[-1][2]:
            lo, hi = earlier[-1][2], later[0][1]
            idle += (hi - lo) - sum(max(0.0, min(hi, y) - max(lo, x)) for x, y in busy)
    n = len(steps)
    return {"windows": len(windows) / n, "eager": eager / n, "idle_ms": idle / 1000.0 / n}


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _gd401(values: dict[str, Any], source: Source = Source.TRACE, scope: str = "rank") -> list[Finding]:
    location = Location(rank=0) if scope == "rank" else Location()
    result = evaluate(load_catalog(), [FactSet(scope, source, values, location)], [source])
    return [f for f in result.findings if f.code == "GD401"]


def _options() -> dict[str, Any]:
    return dict(load_catalog().rules["GD401"].options)


def test_compile_break_gpu_idles_between_its_graphs(trace_file: Callable[[str], Path]) -> None:
    path = trace_file("h200/compile_break.json.gz")
    values = compute_rank_metrics(load_trace(path)).values
    raw = _raw(path)
    assert values["graph_break_windows_per_step"] == raw["windows"] == 4.0   # 2 forward + 2 backward
    assert values["graph_break_backward_windows_per_step"] == 2.0
    assert values["graph_break_eager_kernels_per_step"] == round(raw["eager"], 1)
    idle = values["graph_break_gpu_idle_ms_per_step"]
    # the module leaves the idle after the .item() syncs to GD301: at most that much below the raw idle
    assert raw["idle_ms"] - values["sync_gpu_idle_ms_per_step"] - 0.002 <= idle <= raw["idle_ms"] + 0.002
    assert idle > 0.1 * values["step_time_ms"]  # a launch-bound step pays for its breaks
    [finding] = _gd401(values)
    assert finding.impact is not None and finding.impact.side == "host"
    assert finding.impact.cost_ms_per_step == pytest.approx(idle, abs=1e-3)
    assert finding.severity is severity_from(finding.impact, _options())
    assert finding.severity is not Severity.INFO


def test_hf_trainer_breaks_cost_nothing_on_a_gpu_bound_step() -> None:
    if not HF_TRACE.exists():
        pytest.skip(f"{HF_TRACE} not found")
    values = compute_rank_metrics(load_trace(HF_TRACE)).values
    raw = _raw(HF_TRACE)
    assert values["compiled_graphs_per_call"] == 5.0  # five regions per call (two of them run graphs)
    assert values["graph_break_windows_per_step"] == raw["windows"]
    assert values["graph_break_eager_kernels_per_step"] == round(raw["eager"], 1)
    assert values["sync_gpu_idle_ms_per_step"] == 0.0
    assert values["graph_break_gpu_idle_ms_per_step"] == pytest.approx(raw["idle_ms"], abs=0.002)
    [finding] = _gd401(values)
    assert finding.impact is not None
    # the unprofiled step is the GPU's busy time: removing host work in the windows gains nothing
    assert values["step_time_ms"] <= values["gpu_busy_ms_per_step"]
    assert finding.impact.est_speedup_high == 1.0
    assert finding.severity is Severity.INFO


def test_planted_breaks_give_two_windows_each() -> None:
    """K = 2 planted ``graph_break()`` calls: 3 graphs, 2 forward and 2 backward windows per step."""
    path = DATA / "graph_break_probe_k2_cpu.json.gz"
    values = compute_rank_metrics(load_trace(path)).values
    assert values["compiled_graphs_per_call"] == 3.0
    assert values["graph_break_windows_per_step"] == _raw(path)["windows"] == 4.0
    assert values["graph_break_backward_windows_per_step"] == 2.0
    assert values["graph_break_host_ms_per_step"] > 0
    assert "graph_break_gpu_idle_ms_per_step" not in values  # a CPU trace has no GPU to idle
    [finding] = _gd401(values)
    assert finding.impact is None and "GPU trace" in finding.impact_note
    assert finding.severity is Severity.INFO


def test_accumulation_without_breaks_has_no_windows() -> None:
    values = compute_rank_metrics(load_trace(DATA / "compiled_accumulation_cpu.json.gz")).values
    assert values["graph_break_windows_per_step"] == 0.0
    broken = compute_rank_metrics(load_trace(DATA / "compiled_accumulation_break_cpu.json.gz")).values
    # four calls per step of two graphs each: one forward and one backward window per call
    assert broken["graph_break_windows_per_step"] == 8.0
    assert broken["graph_break_backward_windows_per_step"] == 4.0


def test_severity_follows_the_estimate(trace_file: Callable[[str], Path]) -> None:
    values = compute_rank_metrics(load_trace(trace_file("h200/compile_break.json.gz"))).values
    step = values["step_time_ms"]
    seen = set()
    for share in (0.01, 0.05, 0.3):  # the same trace with less and less of the step lost in the windows
        [finding] = _gd401({**values, "graph_break_gpu_idle_ms_per_step": share * step})
        assert finding.impact is not None
        assert finding.severity is severity_from(finding.impact, _options())
        seen.add(finding.severity)
    [cheap] = _gd401({**values, "graph_break_gpu_idle_ms_per_step": 0.01 * step})
    assert cheap.severity is Severity.INFO  # under the 2% cost floor: never a warning
    assert len(seen) >= 2


def test_live_counters_alone_are_info_and_the_trace_estimate_wins() -> None:
    live = {"graph_breaks": 7, "graph_break_top_reason": "train.py:12 Tensor.item()"}
    [finding] = _gd401(live, Source.LIVE, "job")
    assert finding.severity is Severity.INFO and finding.impact is None
    assert "profile window" in finding.impact_note
    traced = compute_rank_metrics(load_trace(DATA / "graph_break_probe_k2_cpu.json.gz")).values
    estimate = {**traced, "graph_break_gpu_idle_ms_per_step": 2.0, "step_time_ms": 6.0,
                "gpu_busy_ms_per_step": 1.0}
    [from_trace] = _gd401(estimate)
    assert from_trace.impact is not None
    [merged] = merge_findings([finding, replace(from_trace, location=Location())])
    assert merged.source is Source.TRACE and merged.impact is not None


H200_PROBE = REPO / "tests" / "data" / "gpu_runs" / "h200-graph-breaks"


@pytest.mark.parametrize("variant", ["launch_k2", "launch_k8", "gpu_k2", "gpu_k8"])
def test_estimate_brackets_the_measured_gain_of_removing_planted_breaks(variant: str) -> None:
    """H200 probe (bench/validation/graph_break_probe.py): the K = 0 / K speedup measured beside each trace."""
    if not (H200_PROBE / f"{variant}.json.gz").exists():
        pytest.skip(f"{H200_PROBE} not found")
    import importlib.util

    spec = importlib.util.spec_from_file_location("graph_break_probe", REPO / "bench" / "validation" / "graph_break_probe.py")
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    measured = next(r for r in probe._results(H200_PROBE)["variants"] if r["variant"] == variant)["speedup_k0_over_k"]
    values = compute_rank_metrics(load_trace(H200_PROBE / f"{variant}.json.gz")).values
    [finding] = _gd401(values)
    assert finding.impact is not None
    assert finding.impact.est_speedup_low - 0.005 <= measured <= finding.impact.est_speedup_high + 0.005
    if measured < 1.1:  # the GPU-bound model: breaks that cost nothing never warn
        assert finding.severity is Severity.INFO
    else:
        assert finding.severity is not Severity.INFO
