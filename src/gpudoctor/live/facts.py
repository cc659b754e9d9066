"""Live readings → fact sets for the rules engine (scopes ``gpu``, ``job`` and ``run``).

The session hands this module the latest samples of each collector plus the GPU readings of the
last window; it returns plain :class:`~gpudoctor.model.FactSet` objects whose names are documented
in ``docs/rules-format.md`` (live fact names). A reading that is missing gives no fact, so rules
that need it report "not evaluated: needs …" instead of passing silently.

Pure functions, no I/O, no threads: easy to test with recorded samples.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from gpudoctor.agent.protocol import AGENT_FACTS
from gpudoctor.live.nvml import HW_THROTTLES
from gpudoctor.live.samples import GpuSample, ProcessSample, ShmSample, StackSample, StepStats
from gpudoctor.model import FactSet, Location, Source

#: NCCL variables that switch a fast transport off, with the values that do so (as GD805 reads them).
NCCL_DISABLING = {"NCCL_P2P_DISABLE": ("1", "true", "yes"), "NCCL_SHM_DISABLE": ("1", "true", "yes"),
                  "NCCL_IB_DISABLE": ("1", "true", "yes"), "NCCL_NVLS_ENABLE": ("0", "false")}
_ON = ("1", "true", "yes", "on")
#: A process this young (seconds) whose agent has counted no step is still starting.
STARTUP_GRACE_S = 180.0
#: DataLoader workers a fix may add: the CPUs the process may use, less these for the training loop and
#: its pin-memory thread, at most LOADER_WORKERS_MAX (GD102's snippet and its estimate use the same count)
LOADER_CPUS_KEPT = 2
LOADER_WORKERS_MAX = 16
#: Loading whose workers each use less CPU than this (none is "busy"), or the loop's own when it loads,
#: waits on storage: more workers than CPUs still help it, up to LOADER_WORKERS_MAX
LOADER_CPU_BOUND_PCT = 50.0
#: The facts a profile window's trace analysis gets from the live session (trace ``run`` scope)
LOADER_CONTEXT = ("loader_workers_usable", "loader_scaling_max", "loader_bound_text")


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


def gpu_facts(window: Sequence[GpuSample], pid: int, loop_paused: bool = False,
              profiling: bool = False) -> FactSet:
    """Facts of one GPU from its readings over the last window (last reading for states)."""
    last = window[-1]
    values: dict[str, Any] = {
        "gpu_util_pct": _mean([g.util_pct for g in window]),
        "loop_paused": loop_paused,
        "profile_window_recent": profiling,
        "mem_used_mib": last.mem_used_mib,
        "mem_total_mib": last.mem_total_mib,
        "mem_used_pct": (100.0 * last.mem_used_mib / last.mem_total_mib
                         if last.mem_used_mib is not None and last.mem_total_mib else None),
        "power_w": last.power_w,
        "power_limit_w": last.power_limit_w,
        "temperature_c": last.temperature_c,
        "sm_clock_mhz": last.sm_clock_mhz,
        "sm_clock_max_mhz": last.sm_clock_max_mhz,
        "throttle_reasons": list(last.throttle_reasons),
        "throttle_reason_text": ", ".join(r.replace("_", " ") for r in last.throttle_reasons) or "none",
        "throttle_hw": any(r in HW_THROTTLES for r in last.throttle_reasons),
        "throttle_power": "sw_power_cap" in last.throttle_reasons,
        "pcie_gen": last.pcie_gen,
        "pcie_gen_max": last.pcie_gen_max,
        "pcie_width": last.pcie_width,
        "pcie_width_max": last.pcie_width_max,
        "pcie_tx_mib_s": last.pcie_tx_mib_s,
        "pcie_rx_mib_s": last.pcie_rx_mib_s,
        "ecc_uncorrected_volatile": last.ecc_uncorrected_volatile,
        "retired_pages": last.retired_pages,
        "remapped_rows_pending": last.remapped_rows_pending,
        "target_sm_util_pct": _mean([g.target_sm_util_pct for g in window]),
        "target_mem_used_mib": last.target_mem_used_mib,
        "other_process_count": len(last.other_pids),
        "other_pids_text": ", ".join(str(p) for p in last.other_pids[:8]) or "none",
        "device_name": last.name,
    }
    if None not in (last.pcie_gen, last.pcie_gen_max, last.pcie_width, last.pcie_width_max):
        values["pcie_degraded"] = bool(last.pcie_gen < last.pcie_gen_max  # type: ignore[operator]
                                       or last.pcie_width < last.pcie_width_max)  # type: ignore[operator]
    for name in ("gpm_sm_util_pct", "gpm_sm_occupancy_pct", "gpm_tensor_util_pct", "gpm_dram_bw_util_pct",
                 "gpm_fp32_util_pct", "gpm_fp16_util_pct"):
        values[name] = _mean([getattr(g, name) for g in window])
    return FactSet("gpu", Source.LIVE, values, Location(gpu=last.index, pid=pid), timestamp=last.timestamp)


def process_values(proc: ProcessSample) -> dict[str, Any]:
    """Job facts from the process tree: workers, CPUs, threads, environment."""
    workers = [w for w in proc.workers if w.role == "dataloader"]
    cpus = [w.cpu_pct for w in workers if w.cpu_pct is not None]
    allowed: float | None = float(len(proc.cpu_affinity)) if proc.cpu_affinity else float(os.cpu_count() or 1)
    if proc.cgroup_cpu_quota is not None:
        allowed = min(allowed, proc.cgroup_cpu_quota) if allowed else proc.cgroup_cpu_quota
    env = proc.env
    omp = _int(env.get("OMP_NUM_THREADS"))
    # torch sizes its intra-op pool to the machine's cores when OMP_NUM_THREADS is unset;
    # it ignores the cgroup quota.
    intraop = omp if omp is not None else (os.cpu_count() or 1)
    busy_workers = sum(1 for c in cpus if c >= 50.0)
    values: dict[str, Any] = {
        "process_alive": proc.alive,
        "process_cpu_pct": proc.cpu_pct,
        "process_rss_mib": proc.rss_mib,
        "process_threads": proc.num_threads,
        "worker_count": len(workers),
        "worker_busy_count": busy_workers,
        "worker_cpu_mean_pct": fmean(cpus) if cpus else None,
        "worker_cpu_min_pct": min(cpus) if cpus else None,
        "cpu_count_allowed": allowed,
        "omp_num_threads": omp,
        "intraop_threads": intraop,
        "python_version": proc.python_version,
        "nccl_env": [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith("NCCL_")],
        "cuda_launch_blocking": env.get("CUDA_LAUNCH_BLOCKING", "0").lower() in _ON,
        "pytorch_cuda_alloc_conf": env.get("PYTORCH_CUDA_ALLOC_CONF"),
        "torch_env_debug_vars": [f"{k}={env[k]}" for k in ("TORCH_DISTRIBUTED_DEBUG", "TORCH_SHOW_CPP_STACKTRACES",
                                                          "TORCH_LOGS", "TORCHDYNAMO_VERBOSE")
                                 if env.get(k)],
    }
    if proc.alive and proc.cmdline:  # environ was readable: unset variables are facts too
        disabled = [f"{k}={env[k]}" for k, bad in NCCL_DISABLING.items() if env.get(k, "").lower() in bad]
        values.update({"nccl_debug": env.get("NCCL_DEBUG", ""), "nccl_debug_subsys": env.get("NCCL_DEBUG_SUBSYS", ""),
                       "nccl_transports_disabled": disabled,
                       "nccl_transports_disabled_text": ", ".join(disabled) or "none"})
    values["local_world_size"] = _int(env.get("LOCAL_WORLD_SIZE"))
    if proc.cpu_pct is not None or workers:
        # the intra-op pool counts whole when it is sized beyond the CPUs the process may use (torch's
        # default in a container: the host's cores); within them, only the cores the loop keeps busy — a
        # GPU loop's pool mostly sleeps, and 14 workers beside a 16-thread pool on 16 CPUs are not
        # oversubscribed (GD102's snippet on the H200: 3.20x, the CPUs 75% busy)
        if proc.cpu_pct is None or (allowed and intraop > allowed):
            loop = intraop
        else:
            loop = max(1, math.ceil(proc.cpu_pct / 100.0))
        compute = loop + busy_workers
        values["loop_compute_threads"] = loop
        values["compute_threads"] = compute
        values["compute_threads_per_cpu"] = compute / allowed if allowed else None
    return values


def loader_values(job: dict[str, Any]) -> dict[str, Any]:
    """How much faster more DataLoader workers could make the input (GD102's bound), from the job's facts.

    The workers producing now: the agent's ``loader_workers`` (num_workers of the loader the loop
    iterates), else the worker processes using at least half a core, else all of them (a loader
    waiting on storage); persistent workers of a loader not in use (an evaluation loader during
    training) sit idle and do not count. ``loader_workers_usable``: the workers the CPUs allow,
    shared among the local ranks (:data:`LOADER_WORKERS_MAX` when loading hardly uses CPU: it waits
    on storage, and workers beyond the CPUs overlap those waits). ``loader_scaling_max``: how many
    times shorter the input's period can get — usable ÷ producing workers, as workers do not scale
    past the CPUs; for loading in the loop (no workers), step ÷ (its wait ÷ usable workers), a worker
    being about as fast at loading as the loop was, its batches overlapping the step.

    Measured on the H200's 16 CPUs (accelerate's cv_example, ResNet-50d on decoded JPEGs): 4 → 8
    workers 1.70–2.08× in three runs, 4 → 12 workers 1.92×/2.06×, 4 → 14 (with pinned memory and
    persistent workers) 3.20×/2.73× (tests/data/gpu_runs/h200-accelerate-cv/).
    """
    cpus = job.get("cpu_count_allowed")
    if not isinstance(cpus, (int, float)) or cpus <= 0:
        return {}
    agent_workers = job.get("loader_workers")
    if isinstance(agent_workers, int):
        producing = agent_workers
    else:
        producing = int(job.get("worker_busy_count") or job.get("worker_count") or 0)
    local_ranks = job.get("local_world_size")
    per_rank = cpus / local_ranks if isinstance(local_ranks, int) and local_ranks > 1 else cpus
    usable = max(1, min(LOADER_WORKERS_MAX, int(per_rank) - LOADER_CPUS_KEPT))
    # loading waits on storage, not on CPUs, when no worker uses half a core (the mean over all workers
    # would count an evaluation loader's idle persistent ones), or the loop that loads uses less than that
    if producing:
        storage_bound = job.get("worker_count", 0) > 0 and not job.get("worker_busy_count")
    else:
        cpu = job.get("process_cpu_pct")
        storage_bound = isinstance(cpu, (int, float)) and cpu < LOADER_CPU_BOUND_PCT
    if storage_bound:
        usable = LOADER_WORKERS_MAX     # workers beyond the CPUs overlap the waits
    if producing:
        scaling = max(1.0, usable / producing)
    else:
        # loading in the loop (wait D of step S): in `usable` workers a batch takes D / usable and overlaps
        # the rest of the step, so the input's period goes from S to D / usable
        wait, step = job.get("data_wait_pct"), job.get("step_time_ms")
        known = isinstance(wait, (int, float)) and wait > 0 and isinstance(step, (int, float)) and step > 0
        scaling = max(1.0, 100.0 * usable / wait) if known else float(usable)  # type: ignore[operator]
    if not producing:
        text = f"; loading moves out of the loop into up to {usable} worker{'s' if usable > 1 else ''}"
    elif scaling < 1.1:
        text = (f"; but {producing} workers already use what the {cpus:.0f} CPUs allow: more workers "
                "will not hide it, cheaper samples will (GD104)")
    else:
        text = (f"; {producing} workers produce, the {cpus:.0f} CPUs fit {usable}: more workers make the "
                f"input at most {scaling:.1f}× faster")
    return {"loader_workers_usable": usable, "loader_scaling_max": scaling, "loader_bound_text": text,
            "loader_storage_bound": storage_bound}


#: A batch handed over by a worker costs the loop a little more than one it made itself (unpickling the
#: shared-memory handles, the pin-memory thread) and workers that share cores with the loop run slower:
#: the low estimate takes a worker's batch this much longer, and the loop this share of its old loading
#: time as the handover
WORKER_SLOWDOWN_LOW = 1.15
LOOP_SLOWDOWN_LOW = 1.1
HANDOVER_SHARE_LOW = 0.05


def _loop_cores_after(job: dict[str, Any], loop_threads: int) -> int:
    """The cores the training loop keeps busy once its loading moved to workers: at most its compute
    threads, and where its CPU use was measured, the share of it that is not loading (a GPU job's loop
    with 16 intra-op threads that mostly sleep used one core, and the low estimate gave the workers one
    core of 16: 1.00x, while 14 workers measured 5.3x on an H100)."""
    cpu, dt, wait = (job.get(k) for k in ("process_cpu_pct", "loader_main_step_ms", "loader_main_wait_ms"))
    if (job.get("loader_workers") == 0 and isinstance(cpu, (int, float)) and isinstance(dt, (int, float))
            and isinstance(wait, (int, float)) and dt > 0):
        own_share = max(0.0, float(dt) - float(wait)) / float(dt)
        return max(1, min(loop_threads, math.ceil(float(cpu) / 100.0 * own_share)))
    return loop_threads


def input_values(job: dict[str, Any]) -> dict[str, Any]:
    """What more DataLoader workers (GD102's fix) would save per step, from the agent's wait split.

    Only the parts of the wait that workers remove count: batches loaded in the training process
    (``data_wait_main_ms_per_step``) and workers producing slower than the loop consumes
    (``data_wait_steady_ms_per_step``). The workers' restarts (GD106) and the first batches of an
    epoch (each worker's first batch takes a whole batch's time, however many there are) do not.

    The time one batch takes to produce (``input_batch_ms``): in the loop, its wait; from W workers that
    keep the loop waiting in steady state, W × the steady step (the loop then runs at the workers'
    period). With U workers a steady step becomes max(the loop's own work, batch ÷ U): the high end with
    the workers the CPUs allow (``loader_workers_usable``), the low end with the cores left free (``cpu_count_allowed`` less
    the loop's compute threads and the pin-memory thread; where workers are busy on the CPU, the workers
    of now plus as many as the cores they and the loop leave idle fit, at what one uses now), each batch
    :data:`WORKER_SLOWDOWN_LOW` and the loop's own work :data:`LOOP_SLOWDOWN_LOW` slower — and, where workers are forked again every epoch, the extra
    forks of U workers instead of W. Measured on DCGAN (H200, 2 workers forked every 16-step epoch):
    8 workers made it 0.85× as fast; the restart part was 5.4 ms of the 8.6 ms wait.
    """
    step = job.get("step_time_ms")
    window = job.get("window_steps")
    usable = job.get("loader_workers_usable")
    if not all(isinstance(v, (int, float)) and v > 0 for v in (step, window)):
        return {}
    main_ms = float(job.get("data_wait_main_ms_per_step") or 0.0)
    steady_ms = float(job.get("data_wait_steady_ms_per_step") or 0.0)
    if job.get("data_wait_steady_ms_per_step") is None and job.get("data_wait_main_ms_per_step") is None:
        return {}
    fixable = main_ms + steady_ms
    workers = job.get("loader_workers")
    out: dict[str, Any] = {"input_wait_fixable_ms_per_step": fixable,
                           "input_wait_fixable_pct": 100.0 * fixable / float(step),  # type: ignore[arg-type]
                           "input_wait_cause": ("batches loaded in the training process (num_workers=0)"
                                                if workers == 0 and main_ms else "workers producing slower than the loop")}
    if not isinstance(usable, (int, float)) or usable <= 0:
        return out  # no CPU count: no estimate (GD102 says what it needs)
    cpus = job.get("cpu_count_allowed")
    loop_threads = job.get("loop_compute_threads")
    per_worker, count, loop_cpu = (job.get(k) for k in ("worker_cpu_mean_pct", "worker_count", "process_cpu_pct"))
    free = (max(1, int(cpus) - _loop_cores_after(job, int(loop_threads)) - 1) if isinstance(cpus, (int, float))
            and isinstance(loop_threads, int) else int(usable))
    # a loop that loads with under half a core may wait on storage — or be starved of CPU by other
    # processes (this project's shared 2-core machine): only idle workers, measured, widen the low end
    idle_workers = bool(job.get("worker_count")) and not job.get("worker_busy_count")
    low_workers = int(usable) if idle_workers else max(1, min(int(usable), free))
    if (isinstance(workers, int) and workers > 0 and isinstance(cpus, (int, float)) and not job.get("loader_storage_bound")
            and isinstance(per_worker, (int, float)) and per_worker >= LOADER_CPU_BOUND_PCT
            and isinstance(count, int) and isinstance(loop_cpu, (int, float))):
        # the cores the workers and the loop leave free now, each added worker using what one uses now
        idle = max(0.0, float(cpus) - loop_cpu / 100.0 - count * per_worker / 100.0)
        low_workers = max(1, min(int(usable), workers + int(idle / (per_worker / 100.0))))
    if isinstance(workers, int) and workers > 0:
        rows, dt, wait = (job.get(k) for k in ("loader_steady_steps", "loader_steady_step_ms", "loader_steady_wait_ms"))
        producing = workers
    else:
        rows, dt, wait = (job.get(k) for k in ("loader_main_steps", "loader_main_step_ms", "loader_main_wait_ms"))
        producing = 0
    if not (isinstance(rows, int) and rows > 0 and isinstance(dt, (int, float)) and isinstance(wait, (int, float))):
        return out
    share = min(1.0, rows / float(window))  # type: ignore[arg-type]
    own = max(0.0, float(dt) - float(wait))                 # the loop's own work in such a step
    batch = float(wait) if not producing else producing * float(dt)
    high_step = max(own, batch / float(usable))
    low_step = max(LOOP_SLOWDOWN_LOW * own + (HANDOVER_SHARE_LOW * float(wait) if not producing else 0.0),
                   WORKER_SLOWDOWN_LOW * batch / low_workers)
    saved_high = max(0.0, share * (float(dt) - high_step))
    saved_low = max(0.0, share * (float(dt) - low_step))
    fork = job.get("loader_start_fork_ms_per_step")
    extra_forks = 0.0
    if producing and isinstance(fork, (int, float)) and (job.get("loader_worker_starts") or 0) >= 2:
        extra_forks = float(fork) * max(0.0, low_workers / producing - 1.0)
        saved_low = max(0.0, saved_low - extra_forks)
    out.update(input_batch_ms=batch, input_workers_low=low_workers,
               input_saved_ms_low=min(saved_low, fixable), input_saved_ms_high=min(saved_high, fixable),
               input_extra_fork_ms_per_step=extra_forks)
    if producing:
        out["input_wait_cause"] = f"{producing} worker{'s' if producing > 1 else ''} producing slower than the loop"
        head = (f"{producing} worker{'s' if producing > 1 else ''} keep the loop waiting {float(wait):.1f} ms of a "
                f"{float(dt):.1f} ms step in steady state: one batch takes {batch:.1f} ms to produce")
    else:
        out["input_wait_cause"] = "batches loaded in the training process (num_workers=0)"
        head = f"one step's batches take {batch:.1f} ms to load in the training loop, of a {float(dt):.1f} ms step"
    def workers_text(n: int) -> str:
        return f"{n} worker{'s' if n != 1 else ''}"

    if producing and int(usable) <= producing:
        out["input_wait_basis"] = (f"{head}; {workers_text(producing)} already use what the CPUs allow: more "
                                   "will not hide it, cheaper samples will (GD104)")
        return out
    text = (f"{head}; with {workers_text(int(usable))} (what the CPUs allow) a step takes max(the loop's own "
            f"{own:.1f} ms, {batch:.1f} ÷ {int(usable)}) = {high_step:.1f} ms; with {low_workers} (the cores left "
            f"free) and the work {100 * (WORKER_SLOWDOWN_LOW - 1):.0f}% slower {low_step:.1f} ms")
    if extra_forks:
        text += (f"; {workers_text(low_workers)} forked again every epoch cost {extra_forks:.1f} ms per step more than "
                 f"{producing} (unless persistent_workers=True, GD106)")
    excluded = [f"{float(v):.1f} ms per step of {what}" for what, v in (
        ("worker restarts (GD106)", job.get("data_wait_restart_ms_per_step")),
        ("the first batches of an epoch", job.get("data_wait_first_ms_per_step")))
        if isinstance(v, (int, float)) and v >= 0.05]
    if excluded:
        text += "; not counted, as more workers do not remove it: " + " and ".join(excluded)
    out["input_wait_basis"] = text
    return out


def shm_values(shm: ShmSample) -> dict[str, Any]:
    values: dict[str, Any] = {
        "shm_total_mib": shm.total_mib,
        "shm_free_mib": shm.free_mib,
        "shm_segments_mib": shm.target_segments_mib,
        "shm_segments": shm.target_segments,
        "shm_error_seen": shm.error_text_seen is not None,
        "shm_error_text": shm.error_text_seen,
    }
    if shm.total_mib and shm.free_mib is not None:
        values["shm_free_pct"] = 100.0 * shm.free_mib / shm.total_mib
        values["shm_used_pct"] = 100.0 - values["shm_free_pct"]
    return values


def stack_values(stacks: StackSample, min_samples: int = 20) -> dict[str, Any]:
    """py-spy shares; too few samples (a window cut short) give no facts."""
    if stacks.samples < min_samples:
        return {"stack_samples": stacks.samples}
    values: dict[str, Any] = {f"stack_{k}_pct": v for k, v in stacks.share_pct.items()}
    values["stack_samples"] = stacks.samples
    values["stack_top_frame"] = stacks.top_frames[0][0] if stacks.top_frames else None
    values["stack_top_frame_pct"] = stacks.top_frames[0][1] if stacks.top_frames else None
    return values


def step_values(steps: StepStats) -> dict[str, Any]:
    """Agent facts: step timing, input wait, compile counters, precision flags, CUDA memory."""
    values: dict[str, Any] = {name: getattr(steps, name) for name in AGENT_FACTS}  # declared in the protocol
    for name in ("loader_batch_mib", "loader_workers", "loader_prefetch_factor"):  # shm_need_values' facts
        if values[name] is None:
            del values[name]
    values["step_source"] = str(steps.step_source)
    values["graph_break_reasons"] = [f"{reason} ({count}×)" for reason, count in steps.graph_break_reasons[:5]]
    values["graph_break_top_reason"] = steps.graph_break_reasons[0][0] if steps.graph_break_reasons else None
    values["cuda_in_use"] = bool(steps.cuda_mem_total_mib)
    if steps.unaligned_weight_shapes is not None:  # read at the first optimizer step
        values["unaligned_weight_count"] = len(steps.unaligned_weight_shapes)
        values["unaligned_weight_shapes_text"] = ", ".join(steps.unaligned_weight_shapes) or "none"
        values["model_compiled"] = bool(steps.unique_graphs)
    total, reserved, alloc = steps.cuda_mem_total_mib, steps.cuda_mem_reserved_mib, steps.cuda_mem_allocated_mib
    if total and steps.cuda_mem_peak_mib is not None:
        values["cuda_mem_peak_pct"] = 100.0 * steps.cuda_mem_peak_mib / total
    if total and reserved is not None:
        values["cuda_mem_reserved_pct"] = 100.0 * reserved / total
    if reserved and alloc is not None:
        values["cuda_mem_fragmentation_pct"] = 100.0 * (reserved - alloc) / reserved
    return values


def shm_need_values(steps: StepStats) -> dict[str, Any]:
    """/dev/shm the DataLoader's in-flight batches take: workers × prefetch factor × batch size.

    Each worker's finished batches wait in shared memory until the main process takes them; with
    ``prefetch_factor`` batches per worker that is the least /dev/shm the loader needs.
    """
    workers, prefetch, batch = steps.loader_workers, steps.loader_prefetch_factor, steps.loader_batch_mib
    if not workers or not prefetch or batch is None:
        return {}
    return {"loader_batch_mib": batch, "loader_workers": workers, "loader_prefetch_factor": prefetch,
            "shm_needed_mib": workers * prefetch * batch}


def steps_in_window(totals: Sequence[tuple[float, int]], now: float, window_s: float) -> int | None:
    """Steps the agent counted in the last ``window_s`` seconds, from its ``steps_total`` at each poll.

    ``totals`` are (time, steps_total) pairs, oldest first. None when the polls do not reach back
    to the window's start (an agent that just connected) or none falls inside the window (an agent
    that stopped answering): too little to say the loop stood still.
    """
    if not totals or totals[0][0] > now - window_s or totals[-1][0] <= now - window_s:
        return None
    before = next((total for at, total in reversed(totals) if at <= now - window_s), totals[0][1])
    return max(0, totals[-1][1] - before)


def build_factsets(pid: int, gpu_windows: Sequence[Sequence[GpuSample]], proc: ProcessSample | None,
                   shm: ShmSample | None, stacks: StackSample | None, steps: StepStats | None,
                   session_s: float, window_steps_counted: int | None = None,
                   profiling: bool = False) -> list[FactSet]:
    """All live fact sets for one evaluation window.

    ``window_steps_counted``: steps the agent counted in this window (:func:`steps_in_window`), or
    None when unknown. A loop that has stepped before and counted none now is paused (compiling,
    evaluating, saving, exiting), and so is one whose agent has counted no step yet in a process
    younger than :data:`STARTUP_GRACE_S` (building the model, cuDNN's autotuner, the first compile):
    the GPU's idle then is not a cost of the training step. In an older process, or without process
    readings, a loop with no step seen is judged: one the agent cannot see still gets NVML's verdict.
    ``profiling``: gpudoctor's own profile window ran in this window or its export is just over — the
    profiler's host overhead and the export leave the GPU idle, so NVML's utilization then says
    nothing about the job's step.
    """
    # Only GPUs the target uses are judged (a CPU-only process on a GPU machine gets no GPU findings).
    starting = bool(steps is not None and steps.steps_total == 0 and proc is not None
                    and proc.started_at is not None and proc.timestamp - proc.started_at < STARTUP_GRACE_S)
    paused = starting or bool(steps is not None and steps.steps_total > 0 and window_steps_counted == 0)
    out = [gpu_facts(w, pid, paused, profiling) for w in gpu_windows if w and w[-1].target_pids]
    job: dict[str, Any] = {}
    if proc is not None:
        job.update(process_values(proc))
    if shm is not None:
        job.update(shm_values(shm))
    if stacks is not None:
        job.update(stack_values(stacks))
    if steps is not None:
        job.update(step_values(steps))
        job.update(shm_need_values(steps))
    target_gpus = [g for g in out if g.values.get("gpu_util_pct") is not None]
    if target_gpus:
        job["gpu_util_pct"] = fmean(float(g.values["gpu_util_pct"]) for g in target_gpus)  # type: ignore[arg-type]
        tensor = [g.values.get("gpm_tensor_util_pct") for g in target_gpus]
        if all(t is not None for t in tensor):
            job["gpm_tensor_util_pct"] = fmean(tensor)  # type: ignore[arg-type]
    job.update(impact_values(job))
    job.update(loader_values(job))
    job.update(input_values(job))
    out.append(FactSet("job", Source.LIVE, {k: v for k, v in job.items() if v is not None}, Location(pid=pid)))
    run: dict[str, Any] = {"session_s": session_s, "gpu_count": len(out) - 1}
    if proc is not None:
        run.update({"rank": proc.rank, "local_rank": proc.local_rank, "world_size": proc.world_size})
    out.append(FactSet("run", Source.LIVE, {k: v for k, v in run.items() if v is not None}, Location(pid=pid)))
    return out


def impact_values(job: dict[str, Any]) -> dict[str, Any]:
    """The step time live impact estimates start from, and the GPU's busy time in it (NVML util × step).

    The mean step of the window (``1000 / steps_per_s``) where the agent measured a rate, else the
    median: a gain is a change of throughput, and the data wait share is of the window's total time —
    with a bursty DataLoader the median step is one whose batch was ready (pytorch/examples ImageNet on
    the H200, 4 workers: median 122 ms — as with 12 workers —, mean 188 ms, p90 438 ms).
    """
    rate = job.get("steps_per_s")
    step = 1000.0 / float(rate) if isinstance(rate, (int, float)) and rate > 0 else job.get("step_time_p50_ms")
    if not isinstance(step, (int, float)) or step <= 0:
        return {}
    values: dict[str, Any] = {"step_time_ms": float(step)}
    util = job.get("gpu_util_pct")
    if isinstance(util, (int, float)):
        values["gpu_busy_ms_per_step"] = float(step) * min(100.0, float(util)) / 100.0
    return values


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None
