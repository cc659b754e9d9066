"""What bounds a live job's step, from the agent's timings and NVML — until a profile window says more.

Why this exists: the dashboard's top line must name the bottleneck within seconds of attaching. The
agent measures the step time and the wait for the next batch, NVML how busy the GPU is; that splits
the step into GPU busy (kernel classes unknown), input wait and the rest of the idle time (host work).
When attach's profile window has been analysed, the trace's verdict (with kernel classes, sync idle
and the impact facts) replaces this one — unless the window's few steps were not the job's usual
ones: a bursty DataLoader can have its batches ready for exactly those steps, so that the trace shows
a GPU-bound step the loop does not have (:func:`reconciled_bottleneck`).

Pure: facts in, a verdict out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudoctor.bottleneck import Bottleneck, verdict_from_parts

#: The agent's mean step must be this much longer than the window's for the window to count as
#: unrepresentative (step-to-step noise of a steady loop stays well under it).
UNREPRESENTATIVE_STEP_RATIO = 1.15


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


#: GD102's default ``max_dataloader_pct``: a data wait from this share of the step means the GPU waits
#: for input (the live session passes the resolved option)
INPUT_BOUND_PCT = 10.0


def reconciled_bottleneck(trace: Bottleneck, job: Mapping[str, Any], input_bound_pct: float = INPUT_BOUND_PCT) -> Bottleneck:
    """The profile window's verdict, its step set to the loop's own where the window missed the input wait.

    The trace knows what the GPU does in a step (kernel classes, sync idle); the agent knows how long
    the loop's steps take over many seconds and how much of that is the wait for the next batch. When
    the agent's mean step (``1000 / steps_per_s``) is at least :data:`UNREPRESENTATIVE_STEP_RATIO` ×
    the window's and the agent measures a data wait of at least GD102's threshold
    (``input_bound_pct``: its ``max_dataloader_pct``), the window
    caught steps whose batches were ready: the GPU parts keep their ms per step, the step becomes the
    loop's (``step_time_ms``, the mean step live estimates start from), and the extra time is GPU idle
    — input wait up to the agent's measured wait, host idle for the rest. Measured on the H200 (pytorch/examples ImageNet ``--dummy``, 4 workers): window 128.5 ms
    "GPU busy 93%", loop 219 ms with 51% data wait; adding workers measured 1.66×.
    """
    step, wait = job.get("step_time_ms"), job.get("data_wait_pct")
    if trace.bound == "memory" or not isinstance(step, (int, float)) or not isinstance(wait, (int, float)):
        return trace
    if wait < input_bound_pct or step < trace.step_ms * UNREPRESENTATIVE_STEP_RATIO:
        return trace
    step, wait = float(step), float(wait)
    parts = {name: ms for name, ms, _ in trace.parts}
    extra = step - trace.step_ms
    more_wait = min(extra, max(0.0, step * wait / 100.0 - parts.get("idle:input wait", 0.0)))
    parts["idle:input wait"] = parts.get("idle:input wait", 0.0) + more_wait
    parts["idle:host/launch"] = parts.get("idle:host/launch", 0.0) + extra - more_wait
    return verdict_from_parts(parts, step, basis="trace+live")
