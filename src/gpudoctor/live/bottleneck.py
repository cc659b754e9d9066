"""What bounds a live job's step, from the agent's timings and NVML — until a profile window says more.

Why this exists: the dashboard's top line must name the bottleneck within seconds of attaching. The
agent measures the step time and the wait for the next batch, NVML how busy the GPU is; that splits
the step into GPU busy (kernel classes unknown), input wait and the rest of the idle time (host work).
When attach's profile window has been analysed, the trace's verdict (with kernel classes, sync idle
and the impact facts) replaces this one.

Pure: facts in, a verdict out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudoctor.bottleneck import Bottleneck, verdict_from_parts


def live_bottleneck(job: Mapping[str, Any]) -> Bottleneck | None:
    """The verdict from a live ``job`` fact set (None without a step time and GPU utilization)."""
    step = job.get("step_time_ms") or job.get("step_time_p50_ms")
    util = job.get("gpu_util_pct")
    if not isinstance(step, (int, float)) or step <= 0 or not isinstance(util, (int, float)):
        return None
    step = float(step)
    busy = step * min(max(float(util), 0.0), 100.0) / 100.0
    idle = step - busy
    wait = job.get("data_wait_pct")
    input_wait = min(idle, step * float(wait) / 100.0) if isinstance(wait, (int, float)) else 0.0
    parts = {"gpu:busy": busy, "idle:input wait": input_wait, "idle:host/launch": idle - input_wait}
    return verdict_from_parts(parts, step, basis="live")
