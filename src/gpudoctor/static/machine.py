"""``gpudoctor check --env``: facts about this machine that decide whether training will run well.

Reads the NVIDIA driver through NVML, the installed torch's ``version.py`` as *text* (torch is never
imported here: it takes seconds and may initialise CUDA), the cuDNN versions torch was built with and
loads (asked of a child interpreter, only for a CUDA build of torch), NCCL's wheel metadata,
``/dev/shm`` and the ptrace policy. Every fact that cannot be read is ``None`` (the rule is then "not evaluated"), never
an exception. Check by hand with ``nvidia-smi``, ``df -h /dev/shm``,
``cat /proc/sys/kernel/yama/ptrace_scope`` and ``python -c 'import torch; print(torch.version.cuda)'``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from gpudoctor.isolated import python_c
from gpudoctor.model import FactSet, Location, Source
from gpudoctor.report.model import MetricTable

CAP_SYS_PTRACE_BIT = 19
_CUDA_RE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", re.M)
_VERSION_RE = re.compile(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)


def cuda_number(text: str | None) -> int | None:
    """``"12.4"`` → 12040, NVML's encoding (major * 1000 + minor * 10)."""
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]) * 1000 + (int(parts[1]) * 10 if len(parts) > 1 else 0)
    except ValueError:
        return None


def torch_build() -> dict[str, Any]:
    """torch's version and CUDA build, read from ``torch/version.py`` without importing torch."""
    out: dict[str, Any] = {"torch_version": None, "torch_cuda": None}
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return out
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text(encoding="utf-8")
    except OSError:
        return out
    cuda, version = _CUDA_RE.search(text), _VERSION_RE.search(text)
    out["torch_version"] = version.group(1) if version else None
    out["torch_cuda"] = cuda.group(1) if cuda else None
    return out


#: Run in a child interpreter (never in gpudoctor's own process): the cuDNN torch was built with
#: and the one it loads. Neither call creates a CUDA context.
_CUDNN_PROBE = (
    "import json, torch\n"
    "c = getattr(torch._C, '_cudnn', None) if torch.backends.cudnn.is_available() else None\n"
    "print(json.dumps({'build': list(c.getCompileVersion()) if c else None,"
    " 'runtime': list(c.getRuntimeVersion()) if c else None}))\n"
)
CUDNN_PROBE_TIMEOUT_S = 60.0


def cudnn_versions(python: str | None = None, timeout_s: float = CUDNN_PROBE_TIMEOUT_S) -> dict[str, Any]:
    """cuDNN build and runtime versions as torch reports them, from ``python -c`` in a child process.

    ``cudnn_versions_differ`` is True when major or minor differ (patch releases do not change
    kernels much; a minor release changes the engine heuristics and kernels the convolutions use).
    All None when torch has no cuDNN, or the child fails or times out. By hand:
    ``python -c 'import torch; print(torch._C._cudnn.getCompileVersion(), torch.backends.cudnn.version())'``.
    """
    out: dict[str, Any] = {"cudnn_build": None, "cudnn_runtime": None, "cudnn_versions_differ": None}
    try:
        done = subprocess.run(python_c(_CUDNN_PROBE, python), capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
        reply = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return out
    return {**out, **cudnn_comparison(reply.get("build"), reply.get("runtime"))}


def cudnn_comparison(build: list[int] | None, runtime: list[int] | None) -> dict[str, Any]:
    """``[9, 10, 2]`` and ``[9, 19, 0]`` → ``9.10.2``, ``9.19.0`` and whether major.minor differ."""
    if not build or not runtime or len(build) < 2 or len(runtime) < 2:
        return {"cudnn_build": None, "cudnn_runtime": None, "cudnn_versions_differ": None}
    return {"cudnn_build": ".".join(str(int(v)) for v in build),
            "cudnn_runtime": ".".join(str(int(v)) for v in runtime),
            "cudnn_versions_differ": list(build[:2]) != list(runtime[:2])}


def nccl_version() -> str | None:
    for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def nvml_facts() -> dict[str, Any]:
    """Driver version, the CUDA version it supports, GPU count and UUIDs; Nones without NVML."""
    out: dict[str, Any] = {"driver_version": None, "driver_cuda": None, "gpu_count": None, "gpu_uuids": None}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no permission: all "not available"
        return out
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        out["driver_version"] = driver.decode() if isinstance(driver, bytes) else driver
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        out["driver_cuda"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        count = pynvml.nvmlDeviceGetCount()
        out["gpu_count"] = count
        uuids = []
        for index in range(count):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else uuid)
        out["gpu_uuids"] = uuids
    except Exception:  # a partial answer is still useful
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def unmatched_devices(visible: str, gpu_count: int, uuids: list[str]) -> int:
    """How many entries of ``CUDA_VISIBLE_DEVICES`` name no GPU of this machine."""
    missing = 0
    for entry in (e.strip() for e in visible.split(",") if e.strip()):
        if entry.isdigit():
            missing += int(entry) >= gpu_count
        elif entry.startswith(("GPU-", "MIG-")):
            missing += not any(u.startswith(entry) for u in uuids)
        else:
            missing += 1
            break  # CUDA stops at the first invalid entry
    return missing


def ptrace_facts() -> dict[str, Any]:
    scope: int | None
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        scope = 0 if Path("/proc/self").exists() else None  # no Yama: classic ptrace rules
    cap = False
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                cap = bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE_BIT & 1)
    except (OSError, ValueError, IndexError):
        pass
    if scope is None:
        return {"ptrace_scope": None, "cap_sys_ptrace": cap, "ptrace_permitted": None, "ptrace_reason": None}
    if scope >= 3:
        permitted, reason = False, "kernel.yama.ptrace_scope=3 forbids ptrace for everyone"
    elif scope == 0 or cap:
        permitted, reason = True, "allowed"
    else:
        permitted, reason = False, f"kernel.yama.ptrace_scope={scope} and no CAP_SYS_PTRACE"
    return {"ptrace_scope": scope, "cap_sys_ptrace": cap, "ptrace_permitted": permitted, "ptrace_reason": reason}


def machine_factset() -> FactSet:
    """One fact set of scope ``machine`` (source ``env``)."""
    values: dict[str, Any] = {**torch_build(), **nvml_facts(), **ptrace_facts()}
    values["torch_cuda_version"] = cuda_number(values["torch_cuda"])
    values["driver_cuda_version"] = cuda_number(values["driver_cuda"])
    values["nccl_version"] = nccl_version()
    if values["torch_cuda"] is not None:  # a CPU build has no cuDNN: no child interpreter to start
        values.update(cudnn_versions())
    else:
        values.update(cudnn_comparison(None, None))
    values["is_root"] = hasattr(os, "geteuid") and os.geteuid() == 0
    try:
        stat = os.statvfs("/dev/shm")
        values["shm_size_mib"] = round(stat.f_blocks * stat.f_frsize / 1048576, 1)
    except OSError:
        values["shm_size_mib"] = None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    values["cuda_visible_devices"] = visible
    if visible is None:
        values["cuda_visible_devices_unmatched"] = 0
    elif values["gpu_count"] is not None:
        values["cuda_visible_devices_unmatched"] = unmatched_devices(visible, values["gpu_count"],
                                                                     values["gpu_uuids"] or [])
    else:
        values["cuda_visible_devices_unmatched"] = None
    values["gpu_uuids"] = tuple(values["gpu_uuids"] or ())
    return FactSet(scope="machine", source=Source.ENV, values=values, location=Location(label="this machine"))


def machine_table(machine: FactSet) -> MetricTable:
    shown = ("driver_version", "driver_cuda", "gpu_count", "torch_version", "torch_cuda", "cudnn_build",
             "cudnn_runtime", "nccl_version",
             "shm_size_mib", "cuda_visible_devices", "ptrace_scope", "cap_sys_ptrace", "ptrace_permitted")
    rows = [{"metric": name, "value": _why_absent(machine, name) if machine.get(name) is None else machine.get(name)}
            for name in shown]
    return MetricTable(title="This machine", columns=["metric", "value"], rows=rows, key="machine")


def _why_absent(machine: FactSet, name: str) -> str:
    """``n/a`` with the reason a reader needs: no driver, a CPU build of torch, a variable not set."""
    if name == "cuda_visible_devices":
        return "not set"
    if name in ("driver_version", "driver_cuda", "gpu_count"):
        return "n/a (no NVIDIA driver: NVML not found)"
    if name in ("torch_version", "torch_cuda", "cudnn_build", "cudnn_runtime", "nccl_version"):
        if machine.get("torch_version") is None:
            return "n/a (torch is not installed in this Python)"
        if machine.get("torch_cuda") is None:
            return "n/a (torch is a CPU build)"
    return "n/a"
