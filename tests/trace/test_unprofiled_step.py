"""The unprofiled step estimate takes Kineto's host overhead off the GPU idle the host causes only.

torch.profiler's per-op bookkeeping slows the training thread (1.2–1.8× measured on the H200), so a
profiled step is longer than the real one where the GPU waits for the host. It does not slow
DataLoader workers, which it does not trace: a GPU waiting for a batch waits as long without the
profiler. On pytorch/examples ImageNet (4 workers, H200) taking the overhead off that wait made GD102
estimate 1.13× where more workers measured 1.46×.

The trace here is written out event by event so that every expected number follows from it: three
100 ms steps, each a 40 ms wait in the loader's ``__next__`` (the GPU idle), 60 ms of host ops whose
kernels keep the GPU busy from 45 ms to 100 ms (55 ms), 5 ms of launch gap between.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.trace.hostfloor import HOST_PROFILER_INFLATION
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

STEP_US, WAIT_US, GPU_FROM_US = 100_000.0, 40_000.0, 45_000.0


def _trace(tmp_path: Path, wait_us: float) -> Path:
    events: list[dict[str, Any]] = []
    for i in range(3):
        t0 = 1_000_000.0 + i * STEP_US
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": 1, "tid": 1,
                       "ts": t0, "dur": STEP_US, "args": {}})
        if wait_us:
            events.append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": t0 + 1.0, "dur": wait_us - 2.0,
                           "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "args": {}})
        host_from = t0 + wait_us
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::convolution", "pid": 1, "tid": 1,
                       "ts": host_from, "dur": t0 + STEP_US - host_from - 1.0, "args": {"External id": i + 1}})
        corr = 100 + i
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": host_from + 10.0, "dur": 10.0, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw",
                       "pid": 0, "tid": 7, "ts": t0 + GPU_FROM_US, "dur": STEP_US - GPU_FROM_US,
                       "args": {"stream": 7, "correlation": corr, "device": 0}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9}],
        "traceEvents": events}))
    return path


def test_the_wait_for_workers_stays_in_the_unprofiled_step(tmp_path: Path) -> None:
    v = compute_rank_metrics(load_trace(_trace(tmp_path, WAIT_US))).values
    assert v["profiled_step_ms"] == pytest.approx(100.0, abs=0.01)
    assert v["gpu_busy_ms_per_step"] == pytest.approx(55.0, abs=0.01)
    assert v["input_gpu_idle_ms_per_step"] == pytest.approx(40.0, abs=0.1)
    host_overhead = 60.0 * (1 - 1 / HOST_PROFILER_INFLATION)   # 22.5 ms: more than the 5 ms the host idles the GPU
    assert host_overhead > 5.0
    # only the host-caused idle (5 ms) can go; the 40 ms wait for a batch stays
    assert v["step_time_ms"] == pytest.approx(95.0, abs=0.1)


def test_without_a_loader_the_host_overhead_comes_off_the_step(tmp_path: Path) -> None:
    # the same step with no loader: the host runs 100 ms, the GPU idles its first 45 ms waiting for it
    v = compute_rank_metrics(load_trace(_trace(tmp_path, 0.0))).values
    assert v["input_gpu_idle_ms_per_step"] == pytest.approx(0.0, abs=0.01)
    expected = 100.0 - 100.0 * (1 - 1 / HOST_PROFILER_INFLATION)  # 62.5 ms, above the 55 ms of GPU work
    assert v["step_time_ms"] == pytest.approx(expected, abs=0.1)
