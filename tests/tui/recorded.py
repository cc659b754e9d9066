"""Recorded live sessions for the dashboard's tests and benchmarks, and a FakeSession to replay them.

The numbers are the ones measured on an H200 (``../shared/traces/h200/live_probe*.json`` and the
H200 traces' README): the DataLoader-bound resnet18 loop (NVML util 14–18 %, GPM SM util ~10 %,
tensor-core util 0.02 %, 9.2 steps/s) and the fp32 loop (tensor-core util 0.18 %, SM util 87.5 %,
21.3 steps/s, 560 W). Findings are produced by the real rules engine (``load_catalog`` + ``evaluate``)
on fact sets carrying those numbers — nothing here writes a Finding by hand.

Time is fixed (``STARTED_AT``), so screens rendered from these sessions never change with the clock.
"""

from __future__ import annotations

import gzip
import json
import threading
from dataclasses import replace
from pathlib import Path

from gpudoctor.catalog import Catalog, evaluate, load_catalog
from gpudoctor.catalog.throughput import ratios_for
from gpudoctor.live.bottleneck import live_bottleneck
from gpudoctor.live.samples import (
    AgentState,
    GpuSample,
    ProcessSample,
    ShmSample,
    Snapshot,
    StackSample,
    StepStats,
)
from gpudoctor.model import FactSet, Finding, Location, NotEvaluated, Source

STARTED_AT = 1_764_400_000.0
PID = 4242
TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

# NVML util / GPM SM util / tensor util per second, from live_probe.json's "loader" readings.
LOADER_UTIL = (18, 14, 14, 16, 17, 15, 14, 18, 16, 15, 14, 17)
LOADER_SM = (9.74, 12.04, 11.47, 10.2, 10.9, 9.9, 11.1, 10.4, 9.8, 11.6, 10.7, 10.1)
FP32_SM = (87.52, 87.44, 87.55, 87.6, 87.4, 87.5, 87.52, 87.48, 87.55, 87.5, 87.46, 87.53)


def _gpu(t: float, util: float, sm: float, tensor: float, power_w: float, mem_used_mib: float) -> GpuSample:
    return GpuSample(
        timestamp=t, index=0, name="NVIDIA H200", uuid="GPU-5f1c0000-0000-0000-0000-000000000000",
        util_pct=util, mem_util_pct=util * 0.26, mem_used_mib=mem_used_mib, mem_total_mib=143771.0,
        power_w=power_w, power_limit_w=700.0, temperature_c=58.0, sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0, mem_clock_mhz=3201.0, pcie_gen=5, pcie_gen_max=5, pcie_width=16,
        pcie_width_max=16, ecc_uncorrected_volatile=0, gpm_sm_util_pct=sm, gpm_sm_occupancy_pct=sm * 0.28,
        gpm_tensor_util_pct=tensor, gpm_dram_bw_util_pct=sm * 0.16, gpm_fp32_util_pct=sm * 0.33,
        gpm_fp16_util_pct=0.0, target_pids=(PID,), target_sm_util_pct=util, target_mem_used_mib=mem_used_mib - 500,
    )


def _live_facts(gpu: GpuSample, process: ProcessSample, shm: ShmSample, steps: StepStats) -> list[FactSet]:
    """The fact sets a live session derives from one set of samples (names as the live rules use them)."""
    at = Location(pid=process.pid, gpu=gpu.index)
    assert gpu.mem_used_mib is not None and gpu.mem_total_mib is not None
    gpu_facts = {
        "gpu_util_pct": gpu.util_pct, "loop_paused": False,  # the recorded loop steps in every window
        "profile_window_recent": False,                     # and takes no profile window
        "mem_used_pct": 100 * gpu.mem_used_mib / gpu.mem_total_mib, "other_process_count": len(gpu.other_pids), "throttle_hw": False, "throttle_power": False,
        "pcie_degraded": False, "ecc_uncorrected_volatile": 0, "remapped_rows_pending": False,
        "tensor_util_pct": gpu.gpm_tensor_util_pct, "sm_util_pct": gpu.gpm_sm_util_pct,
    }
    assert shm.total_mib is not None and shm.free_mib is not None
    job_facts = {
        "worker_count": len(process.workers), "gpu_util_pct": gpu.util_pct, "shm_total_mib": shm.total_mib,
        "shm_free_pct": 100 * shm.free_mib / shm.total_mib, "shm_error_seen": False,
        "compute_threads_per_cpu": 0.5, "data_wait_pct": steps.data_wait_pct,
        "step_time_p50_ms": steps.step_time_p50_ms, "cuda_alloc_retries": 0,
        "cuda_mem_peak_pct": 4.0, "cuda_mem_fragmentation_pct": 3.0, "cuda_mem_reserved_pct": 4.0,
        "mem_trend_mib_per_100_steps": 0.0, "autocast_enabled": steps.autocast_enabled,
    }
    return [FactSet("gpu", Source.LIVE, gpu_facts, at, gpu.timestamp),
            FactSet("job", Source.LIVE, job_facts, Location(pid=process.pid), gpu.timestamp)]


#: Per-rank facts of the profiled window, as the trace analyzer reports them for each workload.
TRACE_FACTS = {
    "input_bound": {"idle_pct": 71.4, "compute_pct": 26.9, "non_compute_pct": 1.7, "dataloader_pct": 61.3,
                    "dataloader_ms_per_step": 66.4, "step_time_p50_ms": 108.3, "gemm_time_pct": 58.0,
                    "gemm_fp32_simt_pct": 96.0, "gemm_tf32_pct": 0.0, "gemm_lowp_pct": 0.0,
                    "step_time_ms": 108.3, "gpu_busy_ms_per_step": 31.0, "host_floor_ms": 104.0,
                    "input_gpu_idle_ms_per_step": 64.0, "gemm_fp32_simt_ms_per_step": 17.2,
                    "gemm_tf32_ms_per_step": 0.0, **ratios_for(9)},
    "fp32": {"idle_pct": 4.1, "compute_pct": 94.6, "non_compute_pct": 1.3, "dataloader_pct": 0.4,
             "dataloader_ms_per_step": 0.2, "step_time_p50_ms": 46.9, "gemm_time_pct": 71.0,
             "gemm_fp32_simt_pct": 97.0, "gemm_tf32_pct": 0.0, "gemm_lowp_pct": 0.0,
             "step_time_ms": 46.9, "gpu_busy_ms_per_step": 45.0, "host_floor_ms": 12.0,
             "input_gpu_idle_ms_per_step": 0.1, "gemm_fp32_simt_ms_per_step": 30.5, "gemm_tf32_ms_per_step": 0.0,
             **ratios_for(9)},
}


def judge(factsets: list[FactSet], sources: tuple[Source, ...],
          catalog: Catalog | None = None) -> tuple[tuple[Finding, ...], tuple[NotEvaluated, ...]]:
    """Run the real rules engine."""
    result = evaluate(catalog or load_catalog(), factsets, sources)
    return tuple(result.findings), tuple(result.not_evaluated)


def trace_findings(workload: str, catalog: Catalog | None = None) -> tuple[Finding, ...]:
    facts = FactSet("rank", Source.TRACE, TRACE_FACTS[workload], Location(rank=0), STARTED_AT + 90)
    return judge([facts], (Source.TRACE,), catalog)[0]


def session_snapshots(workload: str = "input_bound", seconds: int = 12, catalog: Catalog | None = None,
                      alive_until: int | None = None) -> list[Snapshot]:
    """One snapshot per second of a recorded session of ``workload`` (``input_bound`` or ``fp32``)."""
    catalog = catalog or load_catalog()
    out = []
    for i in range(seconds):
        t = STARTED_AT + 60 + i
        if workload == "input_bound":
            gpu = _gpu(t, LOADER_UTIL[i % 12], LOADER_SM[i % 12], 0.02, 148.0 + i % 3, 5428.0)
            steps = StepStats(t, steps_total=540 + 9 * i, window_steps=92, step_time_p50_ms=108.3,
                              step_time_p90_ms=121.7, steps_per_s=9.2 + 0.05 * (i % 3), data_wait_pct=61.3,
                              data_wait_p50_ms=66.4, autocast_enabled=False, tf32_matmul=False,
                              # the agent's split: examples/input_bound.py loads in the loop (num_workers=0)
                              loader_workers=0, data_wait_main_ms_per_step=66.6, data_wait_steady_ms_per_step=0.0,
                              loader_main_steps=92, loader_main_step_ms=108.7, loader_main_wait_ms=66.6)
            stacks = StackSample(t, 5.0, 250, {"data_loading": 86.0, "forward": 7.0, "backward": 5.0, "other": 2.0},
                                 (("SlowSet.__getitem__ (workload.py:57)", 64.4),
                                  ("SlowSet.__getitem__ (workload.py:55)", 21.6),
                                  ("<genexpr> (workload.py:81)", 4.4),
                                  ("collate_tensor_fn (torch/utils/data/_utils/collate.py:275)", 2.0)))
            cmd = ("python", "examples/input_bound.py", "--steps", "0")
        else:
            gpu = _gpu(t, 99.0, FP32_SM[i % 12], 0.18, 559.9 - i % 2, 5428.0)
            steps = StepStats(t, steps_total=1280 + 21 * i, window_steps=213, step_time_p50_ms=46.9,
                              step_time_p90_ms=47.4, steps_per_s=21.3, data_wait_pct=0.4,
                              autocast_enabled=False, tf32_matmul=False)
            stacks = StackSample(t, 5.0, 244, {"forward": 41.0, "host_sync": 14.0, "backward": 9.0, "other": 36.0},
                                 (("synchronize (torch/cuda/__init__.py:1162)", 13.9),
                                  ("Conv2d._conv_forward (torch/nn/modules/conv.py:548)", 10.7),
                                  ("batch_norm (torch/nn/functional.py:2846)", 2.9)))
            cmd = ("python", "train_resnet.py", "--precision", "fp32")
        alive = alive_until is None or i < alive_until
        process = ProcessSample(t, PID, alive, cmd, "alice", "3.12.3", 99.6, 2210.0, 31, None, None, (), {})
        shm = ShmSample(t, total_mib=131072.0, free_mib=131072.0, target_segments_mib=0.0, target_segments=0)
        live = _live_facts(gpu, process, shm, steps)
        findings, not_evaluated = judge(live, (Source.LIVE,), catalog)
        bottleneck = live_bottleneck(next(fs.values for fs in live if fs.scope == "job"))
        agent = AgentState("connected", socket_path=f"/tmp/gpudoctor-0/agent-{PID}.sock", profile_status="idle")
        if not alive:
            agent = AgentState("lost", "the target exited")
        out.append(Snapshot(t, STARTED_AT, PID, process, (gpu,), shm, stacks, steps, agent, findings,
                            not_evaluated, notes=(), bottleneck=bottleneck))
    return out


class FakeSession:
    """Replays recorded snapshots with the live session's interface (snapshot / profile / close / history).

    Each ``snapshot()`` moves one second forward (``loop=True`` cycles, else the last one repeats).
    ``profile(steps)`` walks ``agent.profile_status`` through armed → recording → analysing → done over
    the next snapshots; while "analysing" it parses a real trace (``parse_trace``) like the session does,
    then adds the trace findings the real engine produces.
    """

    def __init__(self, snapshots: list[Snapshot], *, loop: bool = False, history_len: int = 0,
                 workload: str = "input_bound", parse_trace: Path | None = None) -> None:
        self._snapshots = snapshots
        self._i = history_len
        self._loop = loop
        self._workload = workload
        self._parse_trace = parse_trace
        self._profile: list[str] = []
        self._extra: tuple[Finding, ...] = ()
        self._lock = threading.Lock()
        self.closed = False
        self.profile_requests: list[int] = []
        self.parsed_events = 0

    def history(self) -> list[Snapshot]:
        return self._snapshots[: self._i]

    def snapshot(self) -> Snapshot:
        with self._lock:
            index = self._i % len(self._snapshots) if self._loop else min(self._i, len(self._snapshots) - 1)
            self._i += 1
            base = self._snapshots[index]
            status = self._profile.pop(0) if self._profile else None
        if status == "analysing" and self._parse_trace is not None:
            with gzip.open(self._parse_trace, "rt") as stream:
                self.parsed_events = len(json.load(stream)["traceEvents"])
        if status == "done":
            self._extra = trace_findings(self._workload)
        agent = replace(base.agent, profile_status=status or ("done" if self._extra else base.agent.profile_status))
        findings = tuple({f.key: f for f in (*base.findings, *self._extra)}.values())
        return replace(base, agent=agent, findings=findings)

    def profile(self, steps: int) -> str:
        with self._lock:
            self.profile_requests.append(steps)
            self._profile = ["armed", *(f"recording {i}/{steps}" for i in range(1, steps + 1)), "analysing", "done"]
        return "armed"

    def close(self) -> None:
        self.closed = True


PINNED_RULES = Path(__file__).resolve().parents[1] / "data" / "tui" / "rules"


def pinned_catalog() -> Catalog:
    """GD101/102/201/202 as they were when the snapshots were taken, so rule edits elsewhere don't move pixels."""
    from gpudoctor.catalog.rulefile import load_rule_file

    rules = [load_rule_file(path) for path in sorted(PINNED_RULES.glob("GD*.md"))]
    return Catalog({rule.code: rule for rule in rules})


def profiled_session(workload: str = "input_bound", catalog: Catalog | None = None) -> FakeSession:
    """A session stopped on its last second, with the findings of a finished profile already in."""
    catalog = catalog or load_catalog()
    snapshots = session_snapshots(workload, catalog=catalog)
    extra = trace_findings(workload, catalog)
    last = snapshots[-1]
    agent = replace(last.agent, profile_status="done")
    snapshots[-1] = replace(last, agent=agent, findings=tuple({f.key: f for f in (*last.findings, *extra)}.values()))
    return FakeSession(snapshots, history_len=len(snapshots) - 1, workload=workload)


def sync(test):  # type: ignore[no-untyped-def]
    """Run an ``async def`` test with asyncio (no async pytest plugin is needed for Pilot tests)."""
    import asyncio
    import functools

    @functools.wraps(test)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return asyncio.run(test(*args, **kwargs))

    return wrapper


def two_rank_session(catalog: Catalog | None = None) -> FakeSession:
    """Rank 0 input-bound, rank 1 the fp32 compute one: a rank table and per-rank trace findings."""
    catalog = catalog or load_catalog()
    rank1 = FactSet("rank", Source.TRACE, TRACE_FACTS["fp32"], Location(rank=1), STARTED_AT + 90)
    extra = (*trace_findings("input_bound", catalog), *judge([rank1], (Source.TRACE,), catalog)[0])
    table = ({"rank": 0, "pid": PID, "step_time_ms": 108.3, "data_wait_pct": 61.3, "status": "straggler"},
             {"rank": 1, "pid": PID + 1, "step_time_ms": 46.9, "data_wait_pct": 0.4, "status": "ok"})
    snapshots = [replace(s, findings=(*s.findings, *extra), ranks=(PID, PID + 1), rank_table=table)
                 for s in session_snapshots(catalog=catalog)]
    return FakeSession(snapshots, history_len=len(snapshots) - 1)
