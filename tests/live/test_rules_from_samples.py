"""Live samples → fact sets → the real rule catalog → findings; hysteresis; NVML mapping."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.hysteresis import Hysteresis
from gpudoctor.live.nvml import NvmlCollector, NvmlUnavailable, map_target_gpus
from gpudoctor.live.samples import GpuSample, ProcessSample, ShmSample, StackSample, StepStats, WorkerSample
from gpudoctor.model import Source

CATALOG = load_catalog()


def _gpu(**kw: object) -> GpuSample:
    base: dict[str, object] = dict(timestamp=time.time(), index=0, name="H200", uuid="GPU-x", util_pct=95.0,
                                   mem_used_mib=10_000.0, mem_total_mib=143_771.0, pcie_gen=5, pcie_gen_max=5,
                                   pcie_width=16, pcie_width_max=16, ecc_uncorrected_volatile=0,
                                   remapped_rows_pending=False, target_pids=(10,))
    base.update(kw)
    return GpuSample(**base)  # type: ignore[arg-type]


def _codes(gpus: list[GpuSample] | None = None, **parts: object) -> set[str]:
    factsets = build_factsets(10, [gpus] if gpus else [], parts.get("proc"), parts.get("shm"),  # type: ignore[arg-type]
                              parts.get("stacks"), parts.get("steps"), 10.0)  # type: ignore[arg-type]
    return {f.code for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings}


def test_healthy_gpu_fires_nothing() -> None:
    assert not _codes([_gpu(), _gpu()]) & {"GD101", "GD701", "GD702", "GD703", "GD704", "GD501"}


@pytest.mark.parametrize(("change", "code"), [
    ({"util_pct": 14.0}, "GD101"),
    ({"throttle_reasons": ("hw_thermal",), "sm_clock_mhz": 1200.0, "sm_clock_max_mhz": 1980.0,
      "temperature_c": 91.0}, "GD701"),
    ({"pcie_width": 4}, "GD702"),
    ({"other_pids": (777,)}, "GD703"),
    ({"remapped_rows_pending": True}, "GD704"),
    ({"mem_used_mib": 140_000.0}, "GD501"),
    ({"gpm_sm_util_pct": 87.8, "gpm_tensor_util_pct": 0.18}, "GD201"),   # the H200 fp32 reading
])
def test_each_gpu_problem_fires_its_rule(change: dict[str, object], code: str) -> None:
    assert code in _codes([_gpu(**change)])


def test_bf16_gpm_reading_is_not_missing_autocast() -> None:
    assert "GD201" not in _codes([_gpu(gpm_sm_util_pct=71.0, gpm_tensor_util_pct=8.0)])


def test_job_facts_fire_input_shm_threads_and_agent_rules() -> None:
    now = time.time()
    proc = ProcessSample(now, 10, True, cpu_pct=100.0, num_threads=40, cpu_affinity=(0, 1),
                         workers=(WorkerSample(11, 99.0, 100.0), WorkerSample(12, 97.0, 100.0)),
                         env={"OMP_NUM_THREADS": "16"})
    shm = ShmSample(now, total_mib=64.0, free_mib=2.0, target_segments_mib=60.0, target_segments=8)
    stacks = StackSample(now, 5.0, 250, {"data_loading": 86.0, "forward": 10.0, "other": 4.0},
                         (("workload.py:57 SlowSet.__getitem__", 67.0),))
    steps = StepStats(now, 400, 40, data_wait_pct=61.0, graph_breaks=3,
                      graph_break_reasons=(("train.py:12 print", 3),), recompiles=2, recompiles_in_window=2,
                      cuda_mem_allocated_mib=1000.0, cuda_mem_reserved_mib=9000.0, cuda_mem_total_mib=10000.0,
                      cuda_mem_peak_mib=9500.0, mem_allocated_trend_mib_per_100_steps=300.0)
    codes = _codes([_gpu(util_pct=20.0)], proc=proc, shm=shm, stacks=stacks, steps=steps)
    assert {"GD102", "GD103", "GD104", "GD305", "GD401", "GD402", "GD501", "GD502", "GD503"} <= codes


def test_warm_up_recompiles_are_info_and_recent_ones_warn() -> None:
    def gd402(recent: int) -> list[str]:
        steps = StepStats(time.time(), 400, 40, recompiles=2, recompiles_in_window=recent)
        factsets = build_factsets(10, [], None, None, None, steps, 10.0)
        return [f.severity.value for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings if f.code == "GD402"]

    assert gd402(0) == ["info"]        # both recompiles were before the window: warm-up
    assert gd402(1) == ["warning"]     # still recompiling now


def test_missing_evidence_is_not_evaluated_not_passed() -> None:
    factsets = build_factsets(10, [], None, None, None, None, 1.0)
    result = evaluate(CATALOG, factsets, [Source.LIVE])
    needs = {n.code for n in result.not_evaluated}
    assert {"GD101", "GD102", "GD701"} <= needs
    assert not result.findings


def test_hysteresis_needs_two_of_three_windows_on_and_two_off() -> None:
    finding = evaluate(CATALOG, build_factsets(10, [[_gpu(util_pct=5.0)]], None, None, None, None, 1.0),
                       [Source.LIVE]).findings
    gd101 = [f for f in finding if f.code == "GD101"]
    h = Hysteresis(2, 2)
    windows = [gd101, [], [], gd101, [], gd101, [], gd101, [], [], gd101]
    shown = [bool(h.update(w, float(i))) for i, w in enumerate(windows)]
    # a hit, two misses, a hit: only one of the last three; then hit-miss-hit (a bursty problem: two of
    # three) shows it, and the alternating misses never reach two in a row until the end
    assert shown == [False, False, False, False, False, True, True, True, True, False, False]
    assert set(h.first_seen.values()) == {5.0}


def test_map_target_gpus_counts_only_the_process_tree() -> None:
    procs = {0: [(10, 500.0), (99, 100.0)], 1: [(11, 300.0)], 2: [(98, 50.0)]}
    mapping = map_target_gpus(procs, {10, 11, 12})
    assert mapping == {0: ([10], [99], 500.0), 1: ([11], [], 300.0)}


def test_no_nvml_here_is_one_sentence() -> None:
    collector = NvmlCollector()
    try:
        collector.open()
    except NvmlUnavailable as exc:
        assert "\n" not in str(exc) and str(exc).endswith(".")
    else:  # a machine with a GPU: the sample must work
        assert collector.sample([]) is not None
        collector.close()


class _FakeNvml(SimpleNamespace):
    """Just enough NVML for one GPU whose optional queries all fail (old driver)."""

    def __init__(self) -> None:
        def fail(*_: object) -> None:
            raise RuntimeError("Not Supported")
        super().__init__(
            nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
            nvmlDeviceGetHandleByIndex=lambda i: i,
            nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=10, usedGpuMemory=2**30)],
            nvmlDeviceGetGraphicsRunningProcesses=fail,
            nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=42, memory=7),
            nvmlDeviceGetName=lambda h: b"Old GPU",
        )

    def __getattr__(self, name: str) -> object:
        def fail(*_: object) -> None:
            raise RuntimeError("Not Supported")
        return fail


def test_unsupported_nvml_fields_are_none_not_errors() -> None:
    collector = NvmlCollector(_FakeNvml())
    collector.open()
    (gpu,) = collector.sample([10])
    assert gpu.util_pct == 42.0 and gpu.name == "Old GPU" and gpu.target_pids == (10,)
    assert gpu.target_mem_used_mib == 1024.0
    assert gpu.power_w is None and gpu.pcie_gen is None and gpu.gpm_tensor_util_pct is None


def test_nccl_variables_left_on_in_the_environment() -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "0"}
    proc = ProcessSample(time.time(), 10, True, cmdline=("python", "train.py"), env=env)
    factsets = build_factsets(10, [], proc, None, None, None, 1.0)
    findings = {f.code: f for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings}
    assert "NCCL_P2P_DISABLE=1" in findings["GD805"].message and "IB" not in findings["GD805"].message
    assert "GD609" in findings
    clean = ProcessSample(time.time(), 10, True, cmdline=("python", "train.py"), env={})
    result = evaluate(CATALOG, build_factsets(10, [], clean, None, None, None, 1.0), [Source.LIVE])
    assert not {"GD609", "GD805"} & {f.code for f in result.findings}
    assert not {"GD609", "GD805"} & {n.code for n in result.not_evaluated}


def test_gpus_the_target_does_not_use_are_not_judged() -> None:
    idle_other_gpu = _gpu(util_pct=0.0, target_pids=())
    assert "GD101" not in _codes([idle_other_gpu])


def test_device_files_map_a_target_whose_pids_nvml_cannot_see() -> None:
    # In a container NVML lists host PIDs; the target's open /dev/nvidiaN still names its GPU.
    from gpudoctor.live.nvml import device_minors

    assert device_minors([2**22 + 99]) == {}
    collector = NvmlCollector(_FakeNvml())
    collector._nvml.nvmlDeviceGetComputeRunningProcesses = lambda h: [SimpleNamespace(pid=424242, usedGpuMemory=0)]
    collector._nvml.nvmlDeviceGetMinorNumber = lambda h: 0
    collector.open()
    import gpudoctor.live.nvml as nvml_mod

    original = nvml_mod.device_minors
    nvml_mod.device_minors = lambda pids: {10: {0}}  # type: ignore[assignment]
    try:
        (gpu,) = collector.sample([10])
    finally:
        nvml_mod.device_minors = original
    assert gpu.target_pids == (10,) and gpu.other_pids == (), "the one NVML process is the target itself"


def test_gd301_live_block_reads_the_agents_sync_count() -> None:
    # host_syncs_per_step is what the agent's sampled sync counter reports (tests/agent/test_steps.py)
    steps = StepStats(time.time(), 400, 40, host_syncs_per_step=3.0, host_sync_ms_per_step=0.4)
    assert "GD301" in _codes([_gpu(util_pct=55.0)], steps=steps)
    assert "GD301" not in _codes([_gpu(util_pct=55.0)], steps=StepStats(time.time(), 400, 40, host_syncs_per_step=0.0))
