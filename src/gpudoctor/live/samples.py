"""The frozen samples that live collectors return and live views show.

This is the contract between the collectors (``nvml``, ``process``, ``shm``, ``stacks``, the agent
client — whose :class:`StepStats` is declared with the wire format in ``gpudoctor.agent.protocol``),
the session that merges them, and the views (headless report, dashboard). Every field name carries its unit; a field the hardware, driver or permissions do not give is ``None``.

No heavy imports here: the dashboard, the headless report and the tests all import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudoctor.agent.protocol import AgentStatus, ProfileState, StepStats
from gpudoctor.bottleneck import Bottleneck
from gpudoctor.model import Finding, NotEvaluated

__all__ = ["AgentState", "AgentStatus", "GpuSample", "ProcessSample", "ProfileState", "ShmSample", "Snapshot",
           "StackSample", "StepStats", "WorkerSample"]


@dataclass(frozen=True)
class GpuSample:
    """One NVML reading of one GPU. Check by hand: ``nvidia-smi -q -i <index>``."""

    timestamp: float
    index: int
    name: str
    uuid: str
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] = ()          # active clock-event reasons, e.g. ("hw_thermal",)
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_tx_mib_s: float | None = None
    pcie_rx_mib_s: float | None = None
    ecc_uncorrected_volatile: int | None = None
    retired_pages: int | None = None
    remapped_rows_pending: bool | None = None
    # GPM (Hopper and later); None elsewhere.
    gpm_sm_util_pct: float | None = None
    gpm_sm_occupancy_pct: float | None = None
    gpm_tensor_util_pct: float | None = None
    gpm_dram_bw_util_pct: float | None = None
    gpm_fp32_util_pct: float | None = None
    gpm_fp16_util_pct: float | None = None
    # The target's own share, from per-process accounting.
    target_pids: tuple[int, ...] = ()
    target_sm_util_pct: float | None = None
    target_mem_used_mib: float | None = None
    other_pids: tuple[int, ...] = ()                 # processes of others on this GPU


@dataclass(frozen=True)
class WorkerSample:
    pid: int
    cpu_pct: float | None
    rss_mib: float | None
    role: str = "dataloader"                        # dataloader | rank | compile | program | other


@dataclass(frozen=True)
class ProcessSample:
    """The target and its children. Check by hand: ``ps -o pid,pcpu,rss,nlwp --ppid <pid>``."""

    timestamp: float
    pid: int
    alive: bool
    cmdline: tuple[str, ...] = ()
    username: str | None = None
    python_version: str | None = None
    cpu_pct: float | None = None
    rss_mib: float | None = None
    num_threads: int | None = None
    cpu_affinity: tuple[int, ...] | None = None
    cgroup_cpu_quota: float | None = None           # CPUs granted by the cgroup, None when unlimited
    workers: tuple[WorkerSample, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # NCCL_*, CUDA_*, OMP_NUM_THREADS, PYTORCH_CUDA_ALLOC_CONF …
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    started_at: float | None = None                 # the process's start (epoch seconds)
    stopped: bool = False                           # state T in /proc (SIGSTOP, Ctrl-Z): it does no work


@dataclass(frozen=True)
class ShmSample:
    """/dev/shm. Check by hand: ``df -h /dev/shm``."""

    timestamp: float
    total_mib: float | None
    free_mib: float | None
    target_segments_mib: float | None = None        # torch's shared-memory segments held by the target tree
    target_segments: int | None = None
    error_text_seen: str | None = None              # "Bus error" / "No space left on device" from the job's output


@dataclass(frozen=True)
class StackSample:
    """Shares of main-thread py-spy samples per activity. Check by hand: ``py-spy dump --pid <pid>``."""

    timestamp: float
    window_s: float
    samples: int
    share_pct: dict[str, float] = field(default_factory=dict)  # data_loading, forward, backward, optimizer, host_sync, checkpoint, logging, other
    top_frames: tuple[tuple[str, float], ...] = ()              # ("file.py:40 fn", pct), most frequent leaf frames


@dataclass(frozen=True)
class AgentState:
    """Whether the in-process agent is there, and why not if it is not."""

    status: AgentStatus
    detail: str = ""                                # one sentence: why unavailable / what to do
    socket_path: str | None = None
    profile_status: str | None = None               # label for views: idle | armed | recording 2/3 | analysing …
    profile_trace_path: str | None = None
    profile_state: ProfileState | None = None       # what code compares (None: no window asked for)
    profile_detail: str = ""                        # the agent's sentence: stopped early, time window instead …

    def __post_init__(self) -> None:  # recorded samples and older callers pass the plain text
        object.__setattr__(self, "status", AgentStatus(self.status))
        state = self.profile_state
        if self.profile_status:  # the label leads ("recording 2/3" → recording), also after replace()
            word = self.profile_status.split()[0].rstrip(":")
            state = next((p for p in ProfileState if word == p.value), state)
        if state is not None:
            object.__setattr__(self, "profile_state", ProfileState(state))


@dataclass(frozen=True)
class Snapshot:
    """Everything a live view shows at one moment — the dashboard and the headless report alike."""

    timestamp: float
    started_at: float
    target_pid: int
    process: ProcessSample | None
    gpus: tuple[GpuSample, ...]
    shm: ShmSample | None
    stacks: StackSample | None
    steps: StepStats | None
    agent: AgentState
    findings: tuple[Finding, ...] = ()
    not_evaluated: tuple[NotEvaluated, ...] = ()
    notes: tuple[str, ...] = ()                      # one-line hints: "NVML not available: …"
    ranks: tuple[int, ...] = ()                      # pids of sibling ranks watched, when several
    rank_table: tuple[dict, ...] = ()                # per-rank rows for the rank table (many-ranks)
    step_samples_ms: tuple[float, ...] = ()          # raw step times seen while attached (agent), oldest first
    rank_profile_status: str | None = None           # all-ranks profile window: "rank 0: done, rank 1: …"
    rank_profile: tuple[dict, ...] = ()              # per-rank overlap/communication rows of its analysis
    bottleneck: Bottleneck | None = None             # what bounds the step (profile window's trace, else live)
