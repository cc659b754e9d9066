"""`check --env`: machine facts read without importing torch, and their rules."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Source
from gpudoctor.static import machine


def test_cuda_number() -> None:
    assert machine.cuda_number("12.4") == 12040
    assert machine.cuda_number("13.0") == 13000
    assert machine.cuda_number("12.10") == 12100
    assert machine.cuda_number(None) is None and machine.cuda_number("x") is None


def test_torch_build_matches_installed_metadata() -> None:
    try:
        expected = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    assert machine.torch_build()["torch_version"] == expected


def test_unmatched_devices() -> None:
    uuids = ["GPU-aaaa-1111", "GPU-bbbb-2222"]
    assert machine.unmatched_devices("0,1", 2, uuids) == 0
    assert machine.unmatched_devices("1,2,3", 2, uuids) == 2
    assert machine.unmatched_devices("GPU-bbbb", 2, uuids) == 0
    assert machine.unmatched_devices("GPU-cccc", 2, uuids) == 1


def test_machine_facts_here() -> None:
    facts = machine.machine_factset()
    assert facts.scope == "machine" and facts.source is Source.ENV
    stat = os.statvfs("/dev/shm")
    assert facts.get("shm_size_mib") == round(stat.f_blocks * stat.f_frsize / 1048576, 1)
    assert facts.get("ptrace_permitted") in (True, False)


def _judge(values: dict[str, object]) -> dict[str, str]:
    base = {"driver_cuda_version": None, "torch_cuda_version": None, "shm_size_mib": 65536.0,
            "ptrace_permitted": True, "cuda_visible_devices_unmatched": 0}
    result = evaluate(load_catalog(), [FactSet("machine", Source.ENV, {**base, **values})], [Source.ENV])
    return {f.code: f.message for f in result.findings}


def test_env_rules_fire_on_bad_machines() -> None:
    found = _judge({"driver_cuda_version": 12040, "driver_cuda": "12.4", "torch_cuda_version": 13000,
                    "torch_cuda": "13.0", "shm_size_mib": 64.0, "ptrace_permitted": False,
                    "ptrace_reason": "kernel.yama.ptrace_scope=1 and no CAP_SYS_PTRACE",
                    "cuda_visible_devices": "3", "cuda_visible_devices_unmatched": 1, "gpu_count": 2})
    assert set(found) == {"GD803", "GD103", "GD804", "GD706"}
    assert "supports CUDA up to 12.4" in found["GD803"] and "CUDA 13.0" in found["GD803"]


def test_env_rules_quiet_on_good_machine() -> None:
    assert _judge({"driver_cuda_version": 13000, "driver_cuda": "13.0", "torch_cuda_version": 13000,
                   "torch_cuda": "13.0"}) == {}


def test_cudnn_comparison_ignores_patch_releases() -> None:
    assert machine.cudnn_comparison([9, 10, 2], [9, 19, 0]) == {
        "cudnn_build": "9.10.2", "cudnn_runtime": "9.19.0", "cudnn_versions_differ": True}
    assert machine.cudnn_comparison([9, 19, 0], [9, 19, 1])["cudnn_versions_differ"] is False
    assert machine.cudnn_comparison(None, [9, 19, 0])["cudnn_versions_differ"] is None


def test_cudnn_probe_runs_in_a_child_interpreter() -> None:
    """The real probe in this interpreter: torch is imported in the child only, never here."""
    import subprocess
    import sys

    try:
        importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    imported_before = "torch" in sys.modules
    facts = machine.cudnn_versions(timeout_s=120)
    assert ("torch" in sys.modules) == imported_before
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cudnn.is_available())"],
                           capture_output=True, text=True, timeout=120, check=True)
    if child.stdout.strip() == "True":  # a CUDA build with cuDNN: both versions are read
        assert facts["cudnn_build"] and facts["cudnn_runtime"]
        assert facts["cudnn_versions_differ"] in (True, False)
    else:  # the CPU build in CI: nothing to compare, the rule is not evaluated
        assert facts == {"cudnn_build": None, "cudnn_runtime": None, "cudnn_versions_differ": None}
    assert machine.cudnn_versions("/nonexistent/python")["cudnn_versions_differ"] is None


def test_cudnn_mismatch_rule() -> None:
    found = _judge({"torch_version": "2.11.0", "torch_cuda": "13.0", "cudnn_build": "9.10.2",
                    "cudnn_runtime": "9.19.0", "cudnn_versions_differ": True})
    assert set(found) == {"GD806"}
    assert "built with cuDNN 9.10.2 but loads cuDNN 9.19.0" in found["GD806"]
    assert _judge({"cudnn_build": "9.19.0", "cudnn_runtime": "9.19.1", "cudnn_versions_differ": False}) == {}
