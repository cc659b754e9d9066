"""Where one rank's step goes, and what bounds it: the bottleneck verdict and the impact facts.

Why this exists: a finding is worth what its fix gains, and that depends on what bounds the step.
Every profiled step's wall time (its host ``ProfilerStep`` span) is split into parts that add up to
the step:

- GPU busy, by kernel class (first class wins where streams overlap): ``gpu:communication``,
  ``gpu:gemm/conv``, ``gpu:fusible`` (eager memory-bound kernels torch.compile fuses),
  ``gpu:memcpy``, ``gpu:other``;
- GPU idle, by what the host was doing: ``idle:input wait`` (inside the DataLoader's ``__next__``),
  ``idle:host sync`` (from the end of a sync call — ``.item()``, ``synchronize``, a sync copy — toward
  the next GPU work: the queue the sync drained, refilled — for at most 1 ms, or the host's wait in
  the sync when longer: :func:`~gpudoctor.trace.timeline.sync_idle`), ``idle:host/launch`` (the rest:
  Python, launches, anything else on the host).

From the same timeline come the facts the impact estimates need: ``gpu_busy_ms_per_step`` (the floor
for a fix that shortens host work) and ``host_floor_ms`` — the step minus the time the host spends
blocked waiting for the GPU (in sync calls, and in kernel launches once the launch queue is full) —
the floor for a fix that shortens GPU work.

The jobs are three modules: :mod:`.partition` splits the steps into those parts (and adds the GEMM
time by precision), :mod:`.hostfloor` measures the host's side (its work, its waits for the GPU, the
floor); this module turns both into the impact facts and the verdict.

What it must not do: read files, know rule thresholds, or render anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudoctor.bottleneck import PARTS, Bottleneck, verdict_from_parts
from gpudoctor.catalog.throughput import ratios_for
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import EventTable
from gpudoctor.trace.hostfloor import HOST_PROFILER_INFLATION, host_floor, host_time
from gpudoctor.trace.partition import gpu_paced_steps, partition

if TYPE_CHECKING:  # annotations only: the rank workers never import the rules' data model
    from gpudoctor.model import FactValue


def bottleneck_metrics(t: EventTable, ctx: Context, compute_major: int | None = None,
                       device_name: str | None = None) -> dict[str, FactValue]:
    """Impact facts and the step-part shares of one rank (empty without steps and GPU work)."""
    out: dict[str, FactValue] = {}
    out.update({k: v for k, v in ratios_for(compute_major, device_name).items()})
    if not ctx.steps or not ctx.device:
        return out
    parts, gemm_us = partition(t, ctx)
    blocked_us, alloc_us, (active_us, loader_us, untraced_us) = host_time(t, ctx)
    n = ctx.n_steps
    host_step_us = step_us = sum(b - a for _, a, b in ctx.steps)
    paced = gpu_paced_steps(t, ctx)
    if paced is not None:  # the GPU's side of the picture from the GPU's own steps; the host's stays
        parts, gemm_us = partition(t, Context(t, paced))
        step_us = sum(b - a for _, a, b in paced)
        out["gpu_paced_steps"] = True
        out["gpu_behind_host_ms"] = round((paced[-1][2] - ctx.steps[-1][2]) / 1000.0, 3)
    if not step_us > 0:  # no time to share out (plausible_steps leaves no zero-length host step)
        return out
    step_ms = step_us / 1000.0 / n
    gpu_busy = sum(v for k, v in parts.items() if k.startswith("gpu:")) / 1000.0 / n
    own_host_us = max(0.0, active_us - loader_us)
    # Kineto's bookkeeping slows the host, so it can lengthen only the GPU idle the host causes — not
    # the wait for DataLoader workers, which it does not trace (a bursty loader's 50 ms/step of input
    # idle on pytorch/examples ImageNet was taken off the step, and GD102 estimated 1.13x for 1.46x).
    input_idle_us = parts["idle:input wait"]
    unprofiled_us = max(gpu_busy * 1000.0 * n + input_idle_us,
                        step_us - own_host_us * (1.0 - 1.0 / HOST_PROFILER_INFLATION))
    out.update({
        "step_time_ms": round(unprofiled_us / 1000.0 / n, 3),
        "gpu_busy_ms_per_step": round(gpu_busy, 3),
        "gpu_idle_ms_per_step": round(step_ms - gpu_busy, 3),
        "host_floor_ms": round(host_floor(host_step_us, blocked_us, active_us, loader_us) / 1000.0 / n, 3),
        "host_active_ms_per_step": round(active_us / 1000.0 / n, 3),
        "host_untraced_ms_per_step": round(untraced_us / 1000.0 / n, 3),
        "sync_gpu_idle_ms_per_step": round(parts["idle:host sync"] / 1000.0 / n, 3),
        "input_gpu_idle_ms_per_step": round(parts["idle:input wait"] / 1000.0 / n, 3),
        "allocator_ms_per_step": round(alloc_us / 1000.0 / n, 3),
    })
    classes = _gemm_classes(gemm_us, parts["gpu:gemm/conv"])
    for cls, us in classes.items():
        out[f"{cls}_ms_per_step"] = round(us / 1000.0 / n, 3)
    if gpu_busy > 0:
        out["matmul_fp32_simt_pct_of_gpu"] = round(100.0 * classes["matmul_fp32_simt"] / 1000.0 / n / gpu_busy, 2)
        out["fp32_simt_pct_of_gpu"] = round(100.0 * classes["gemm_fp32_simt"] / 1000.0 / n / gpu_busy, 2)
        out["gemm_lowp_unaligned_pct_of_gpu"] = round(100.0 * classes["gemm_lowp_unaligned"] / 1000.0 / n / gpu_busy, 2)
    out["sync_gpu_idle_pct"] = round(100.0 * parts["idle:host sync"] / step_us, 2) if step_us > 0 else 0.0
    for name in PARTS:
        out["part_" + _slug(name) + "_ms"] = round(parts[name] / 1000.0 / n, 3)
    verdict = verdict_from_parts({p: parts[p] / 1000.0 / n for p in PARTS}, step_ms,
                                 allocator_ms=alloc_us / 1000.0 / n)
    out["bound"] = verdict.bound
    out["bound_share_pct"] = verdict.share_pct
    return out


def _slug(part: str) -> str:
    return part.replace(":", "_").replace("/", "_").replace(" ", "_")


def parts_from_facts(values: dict[str, Any]) -> dict[str, float]:
    """The step parts (ms per step) back from a rank's facts."""
    return {p: float(values.get("part_" + _slug(p) + "_ms") or 0.0) for p in PARTS}


def _gemm_classes(gemm_us: dict[str, float], part_gemm_us: float) -> dict[str, float]:
    """µs per precision class, scaled to the GEMM/conv part of the step picture.

    The classes come from the kernels launched inside the steps; the picture's part is the GEMM time
    inside the steps' wall time. When the GPU runs behind the host the two differ, and the picture is
    what the step is made of. GEMMs whose names carry no precision count as fp32 when the run has no
    bf16/fp16 GEMM at all (autocast off: cuBLAS' plain fp32 kernels often carry no hint).
    """
    launched = gemm_us["gemm"]
    scale = part_gemm_us / launched if launched > 0 else 0.0
    no_lowp = gemm_us["gemm_lowp"] == 0.0
    matmul = gemm_us["matmul_fp32_simt"] + (gemm_us["gemm_unknown_matmul"] if no_lowp else 0.0)
    conv = gemm_us["conv_fp32_simt"] + (gemm_us["gemm_unknown_conv"] if no_lowp else 0.0)
    return {"gemm": part_gemm_us, "gemm_fp32_simt": (matmul + conv) * scale, "matmul_fp32_simt": matmul * scale,
            "conv_fp32_simt": conv * scale, "attention_fp32_simt": gemm_us["attention_fp32_simt"] * scale, "gemm_tf32": gemm_us["gemm_tf32"] * scale,
            "gemm_lowp": gemm_us["gemm_lowp"] * scale, "gemm_lowp_unaligned": gemm_us["gemm_lowp_unaligned"] * scale}


def rank_bottleneck(values: dict[str, Any], rank: int | None) -> Bottleneck | None:
    """The verdict of one rank from its facts (None without step parts)."""
    if values.get("step_time_ms") is None:  # no step parts: no steps, or no GPU work in them
        return None
    parts = parts_from_facts(values)
    # the parts add up to the profiled step — or, pictured on the GPU (gpu_paced_steps), to its step there
    step = sum(parts.values()) if values.get("gpu_paced_steps") else values.get("profiled_step_ms") or values.get("step_time_ms")
    if not isinstance(step, (int, float)) or step <= 0:
        return None
    where = f" on rank {rank}" if rank is not None else ""
    return verdict_from_parts(parts, float(step), float(values.get("allocator_ms_per_step") or 0.0), where)

