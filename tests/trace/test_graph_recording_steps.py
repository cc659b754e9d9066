"""Leading profiled steps that record CUDA graphs are left out of the step metrics (trace/metrics.py).

The trace: gpudoctor's automatic 5-step profile window on pytorch/examples DCGAN under
``torch.compile(mode="reduce-overhead")`` with ``cudagraph_mark_step_begin()``, on the H200
(tests/data/gpu_runs/h200-dcgan/warmup_gate/): ProfilerStep#1–2 record graphs (191.6 and 55.4 ms),
#3–5 replay them (11.0–13.2 ms).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gpudoctor.trace.analysis import analyze_rank
from gpudoctor.trace.reader import load_trace
from gpudoctor.trace.timeline import graph_recording_steps, step_spans

TRACE = Path(__file__).resolve().parents[1] / "data" / "trace" / "h200_dcgan_reduce_overhead_window.json.gz"


def test_recording_steps_are_found_and_left_out() -> None:
    trace = load_trace(TRACE)
    steps = step_spans(trace.events)
    assert [round((b - a) / 1000.0, 1) for _, a, b in steps][:2] == [191.6, 55.4]
    assert graph_recording_steps(trace.events, steps) == 2
    values = analyze_rank(trace).metrics.values
    assert values["cuda_graph_recording_steps_left_out"] == 2
    assert values["step_count"] == 3
    assert 10.0 < values["profiled_step_ms"] < 14.0  # the replaying steps' mean, not 56.5 ms
    assert any("first 2 of 5 profiled steps recorded CUDA graphs" in n for n in trace.notes)


def test_a_trace_without_graph_capture_keeps_every_step(shared_traces: Path) -> None:
    path = shared_traces / "h200" / "resnet_bf16.json.gz"    # skipped where ../shared is absent
    values = analyze_rank(load_trace(path)).metrics.values
    assert values["cuda_graph_recording_steps_left_out"] == 0
    assert values["step_count"] == len(step_spans(load_trace(path).events))


def test_nothing_is_left_out_when_fewer_than_two_steps_would_remain(tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("name") not in ("ProfilerStep#4", "ProfilerStep#5")]  # 2 of 3 steps record
    cut = tmp_path / "three_steps.json"
    cut.write_text(json.dumps(doc))
    trace = load_trace(cut)
    assert graph_recording_steps(trace.events, step_spans(trace.events)) == 2
    values = analyze_rank(trace).metrics.values
    assert values["cuda_graph_recording_steps_left_out"] == 0
    assert values["step_count"] == 3
    assert not any("recorded CUDA graphs" in n for n in trace.notes)
