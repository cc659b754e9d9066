"""GPU readings from NVML (nvidia-ml-py): what the GPUs the target uses are doing right now.

Per GPU: utilization, memory, power, clocks, clock-event (throttle) reasons, temperature, PCIe link
(current vs max) and throughput, ECC and row remapping, GPM metrics on Hopper and later (SM util,
occupancy, tensor-core util, DRAM bandwidth, FP32/FP16 pipes; GPM needs two samples some time apart,
so the first reading has none), and the target's own share from per-process accounting.

Check by hand: ``nvidia-smi -q -i <index>``, ``nvidia-smi --query-gpu=utilization.gpu,memory.used,
power.draw,clocks.sm,pcie.link.gen.current,pcie.link.width.current --format=csv``,
``nvidia-smi --query-compute-apps=pid,used_memory --format=csv`` and ``nvidia-smi dmon -s u``
(GPM: ``dcgmi dmon -e 1002,1004`` where DCGM is installed).

A field the driver or GPU does not support is ``None`` and logged once with a hint; nothing here
raises to the caller after :meth:`NvmlCollector.open` succeeded. No torch, textual or rich.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from gpudoctor.live.samples import GpuSample

log = logging.getLogger("gpudoctor.live.nvml")

#: NVML clock-event reason bits → our names (nvmlClocksEventReason*).
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}
HW_THROTTLES = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")

# GPM metric ids (nvml.h NVML_GPM_METRIC_*) → GpuSample field.
GPM_METRICS = {
    2: "gpm_sm_util_pct",
    3: "gpm_sm_occupancy_pct",
    5: "gpm_tensor_util_pct",
    10: "gpm_dram_bw_util_pct",
    12: "gpm_fp32_util_pct",
    13: "gpm_fp16_util_pct",
}


_NVIDIA_DEV_RE = re.compile(r"^/dev/nvidia(\d+)$")


class NvmlUnavailable(Exception):
    """NVML cannot be used here (no driver, no GPU); ``str`` is one sentence."""


def map_target_gpus(procs_by_gpu: Mapping[int, Iterable[tuple[int, float | None]]],
                    tree_pids: Iterable[int]) -> dict[int, tuple[list[int], list[int], float | None]]:
    """For each GPU: (target pids on it, other pids on it, MiB used by the target's pids).

    ``procs_by_gpu`` maps a GPU index to (pid, used MiB) pairs from NVML's process list. A GPU
    appears in the result only if one of ``tree_pids`` (the target and its children) uses it.
    """
    tree = set(tree_pids)
    out: dict[int, tuple[list[int], list[int], float | None]] = {}
    for index, procs in procs_by_gpu.items():
        mine, others, mem = [], [], 0.0
        mem_known = False
        for pid, used in procs:
            if pid in tree:
                mine.append(pid)
                if used is not None:
                    mem += used
                    mem_known = True
            else:
                others.append(pid)
        if mine:
            out[index] = (sorted(set(mine)), sorted(set(others)), mem if mem_known else None)
    return out


def device_minors(pids: Iterable[int]) -> dict[int, set[int]]:
    """PID → minor numbers of the ``/dev/nvidiaN`` devices it holds open (works across PID namespaces)."""
    out: dict[int, set[int]] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                m = _NVIDIA_DEV_RE.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if m:
                out.setdefault(pid, set()).add(int(m.group(1)))
    return out


class NvmlCollector:
    """Opens NVML once and samples the GPUs; ``nvml`` may be replaced by a fake in tests."""

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml: Any = nvml
        self._handles: list[Any] = []
        self._hinted: set[str] = set()
        self._gpm_prev: dict[int, Any] = {}
        self._gpm_ok: dict[int, bool] = {}
        self._proc_util_ts: dict[int, int] = {}
        self.opened = False

    def open(self) -> None:
        """Initialise NVML; raise NvmlUnavailable with one sentence when it cannot be used."""
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                raise NvmlUnavailable("nvidia-ml-py is not installed: pip install nvidia-ml-py.") from None
            self._nvml = pynvml
        nv = self._nvml
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
            raise NvmlUnavailable(f"NVML is not available ({_short(exc)}): no NVIDIA driver or GPU visible "
                                  "here; GPU readings are skipped.") from None
        if not self._handles:
            raise NvmlUnavailable("NVML sees no GPU; GPU readings are skipped.")
        self.opened = True

    def close(self) -> None:
        if not self.opened:
            return
        for sample in self._gpm_prev.values():
            self._call("gpm", self._nvml.nvmlGpmSampleFree, sample)
        self._gpm_prev.clear()
        self._call("shutdown", self._nvml.nvmlShutdown)
        self.opened = False

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one NVML call; None (and one logged hint per field) when unsupported."""
        try:
            return fn(*args)
        except Exception as exc:
            if what not in self._hinted:
                self._hinted.add(what)
                log.info("NVML: %s not available on this GPU/driver (%s); shown as empty.", what, _short(exc))
            return None

    def processes(self) -> dict[int, list[tuple[int, float | None]]]:
        """GPU index → (pid, used MiB) of compute and graphics processes."""
        nv = self._nvml
        out: dict[int, list[tuple[int, float | None]]] = {}
        for index, handle in enumerate(self._handles):
            procs = []
            for fn_name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                fn = getattr(nv, fn_name, None)
                for p in (self._call("process list", fn, handle) if fn else None) or ():
                    used = getattr(p, "usedGpuMemory", None)
                    procs.append((int(p.pid), used / 2**20 if isinstance(used, int) else None))
            out[index] = procs
        return out

    def sample(self, tree_pids: Iterable[int]) -> tuple[GpuSample, ...]:
        """Readings of the GPUs the target uses (all GPUs, none marked as the target's, while it uses none).

        A GPU is the target's when NVML lists one of the tree's PIDs on it, or — when NVML reports
        PIDs of another PID namespace (containers) — when the target holds ``/dev/nvidia<minor>`` open.
        """
        if not self.opened:
            return ()
        tree = set(tree_pids)
        procs = self.processes()
        mapping = map_target_gpus(procs, tree)
        if not mapping and tree:
            held = device_minors(tree)
            for index, handle in enumerate(self._handles):
                minor = self._call("minor number", self._nvml.nvmlDeviceGetMinorNumber, handle)
                holders = sorted(pid for pid, minors in held.items() if minor in minors)
                if holders:
                    # NVML's PIDs are of another namespace: they include ours, so only a surplus
                    # means other processes (named with their host PIDs).
                    listed = [p for p, _ in procs.get(index, [])]
                    mapping[index] = (holders, listed if len(listed) > len(holders) else [], None)
        indices = sorted(mapping) or list(range(len(self._handles)))
        out = []
        for index in indices:
            mine, others, target_mem = mapping.get(index, ([], [p for p, _ in procs.get(index, [])], None))
            out.append(self._sample_one(index, tuple(mine), tuple(others), target_mem))
        return tuple(out)

    def _sample_one(self, index: int, mine: tuple[int, ...], others: tuple[int, ...],
                    target_mem: float | None) -> GpuSample:
        nv, h, call = self._nvml, self._handles[index], self._call
        now = time.time()
        util = call("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        mem = call("memory", nv.nvmlDeviceGetMemoryInfo, h)
        power_mw = call("power", nv.nvmlDeviceGetPowerUsage, h)
        limit_mw = call("power limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        reasons = call("clock-event reasons", reasons_fn, h)
        ecc = call("ECC errors", nv.nvmlDeviceGetTotalEccErrors, h, 1, 0)  # uncorrected, volatile
        remap = call("row remapping", nv.nvmlDeviceGetRemappedRows, h)
        retired = call("retired pages", nv.nvmlDeviceGetRetiredPages, h, 1)  # double-bit ECC
        pcie_tx = call("PCIe throughput", nv.nvmlDeviceGetPcieThroughput, h, 0)
        pcie_rx = call("PCIe throughput", nv.nvmlDeviceGetPcieThroughput, h, 1)
        name = call("name", nv.nvmlDeviceGetName, h) or f"GPU {index}"
        uuid = call("uuid", nv.nvmlDeviceGetUUID, h) or ""
        gpm = self._gpm(index, h)
        return GpuSample(
            timestamp=now, index=index,
            name=name.decode() if isinstance(name, bytes) else str(name),
            uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
            util_pct=_f(getattr(util, "gpu", None)), mem_util_pct=_f(getattr(util, "memory", None)),
            mem_used_mib=_mib(getattr(mem, "used", None)), mem_total_mib=_mib(getattr(mem, "total", None)),
            power_w=power_mw / 1000 if power_mw is not None else None,
            power_limit_w=limit_mw / 1000 if limit_mw is not None else None,
            temperature_c=_f(call("temperature", nv.nvmlDeviceGetTemperature, h, 0)),
            sm_clock_mhz=_f(call("SM clock", nv.nvmlDeviceGetClockInfo, h, 1)),
            sm_clock_max_mhz=_f(call("SM max clock", nv.nvmlDeviceGetMaxClockInfo, h, 1)),
            mem_clock_mhz=_f(call("memory clock", nv.nvmlDeviceGetClockInfo, h, 2)),
            throttle_reasons=tuple(n for bit, n in THROTTLE_BITS.items() if reasons is not None and reasons & bit),
            pcie_gen=call("PCIe generation", nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_gen_max=call("PCIe max generation", nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_width=call("PCIe width", nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_width_max=call("PCIe max width", nv.nvmlDeviceGetMaxPcieLinkWidth, h),
            pcie_tx_mib_s=pcie_tx / 1024 if pcie_tx is not None else None,  # NVML gives KB/s
            pcie_rx_mib_s=pcie_rx / 1024 if pcie_rx is not None else None,
            ecc_uncorrected_volatile=ecc,
            retired_pages=len(retired) if retired is not None else None,
            remapped_rows_pending=bool(remap[2]) if remap is not None else None,
            target_pids=mine, target_sm_util_pct=self._process_util(index, h, mine),
            target_mem_used_mib=target_mem, other_pids=others,
            **gpm,
        )

    def _process_util(self, index: int, handle: Any, pids: tuple[int, ...]) -> float | None:
        if not pids:
            return None
        last = self._proc_util_ts.get(index, 0)
        samples = self._call("per-process utilization", self._nvml.nvmlDeviceGetProcessUtilization, handle, last)
        if not samples:
            return None
        latest: dict[int, Any] = {}
        for s in samples:
            if s.pid in pids and (s.pid not in latest or s.timeStamp > latest[s.pid].timeStamp):
                latest[s.pid] = s
        self._proc_util_ts[index] = max(int(s.timeStamp) for s in samples)
        if not latest:
            return None
        return float(min(100, sum(s.smUtil for s in latest.values())))

    def _gpm(self, index: int, handle: Any) -> dict[str, float | None]:
        """GPM metrics between the previous sample of this GPU and now ({} until two exist)."""
        nv = self._nvml
        if index not in self._gpm_ok:
            support = self._call("GPM", nv.nvmlGpmQueryDeviceSupport, handle)
            self._gpm_ok[index] = bool(getattr(support, "isSupportedDevice", 0))
        if not self._gpm_ok[index]:
            return {}
        current = self._call("GPM", nv.nvmlGpmSampleAlloc)
        if current is None:
            self._gpm_ok[index] = False
            return {}
        if self._call("GPM", nv.nvmlGpmSampleGet, handle, current) is None:
            self._call("GPM", nv.nvmlGpmSampleFree, current)
            self._gpm_ok[index] = False
            return {}
        previous = self._gpm_prev.get(index)
        self._gpm_prev[index] = current
        if previous is None:
            return {}
        try:
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1 = previous
            request.sample2 = current
            for slot, metric_id in enumerate(GPM_METRICS):
                request.metrics[slot].metricId = metric_id
            result = self._call("GPM metrics", nv.nvmlGpmMetricsGet, request)
        finally:
            self._call("GPM", nv.nvmlGpmSampleFree, previous)
        if result is None:
            return {}
        out: dict[str, float | None] = {}
        for slot, field_name in enumerate(GPM_METRICS.values()):
            metric = result.metrics[slot]
            out[field_name] = float(metric.value) if metric.nvmlReturn == 0 else None
        return out


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _mib(value: Any) -> float | None:
    return value / 2**20 if isinstance(value, (int, float)) else None


def _short(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:120]
