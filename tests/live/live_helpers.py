"""Real attach targets for the live tests: CPU torch training loops started as subprocesses.

(Named ``live_helpers`` rather than ``conftest`` so the tests can import it by a unique name.)
"""

from __future__ import annotations

import dataclasses
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpudoctor.agent.protocol import StepStats

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WORKLOAD = HERE / "workload.py"
LIGHT_TARGET = HERE / "light_target.py"
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]


def start_workload(mode: str, *extra: str, prefix: tuple[str, ...] = (), timeout_s: float = 180.0,
                   stdout: int | None = None, script: Path = WORKLOAD) -> subprocess.Popen[str]:
    """Start ``workload.py <mode>`` (or another ``script``) and wait until it printed "ready"."""
    proc = subprocess.Popen([*prefix, sys.executable, str(script), mode, *extra], stdout=subprocess.PIPE,
                            stderr=stdout if stdout is not None else subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready and "ready" in proc.stdout.readline():
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"workload {mode} exited early with {proc.returncode}")
    proc.kill()
    raise RuntimeError(f"workload {mode} not ready after {timeout_s} s")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def workload() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """One running workload per mode for the whole module (torch start-up is the slow part)."""
    started: dict[str, subprocess.Popen[str]] = {}

    def factory(mode: str) -> subprocess.Popen[str]:
        if mode not in started or started[mode].poll() is not None:
            started[mode] = start_workload(mode)
        return started[mode]

    yield factory
    for proc in started.values():
        stop(proc)


def run_cli(*args: str, timeout_s: float = 180.0, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *GPUDOCTOR, *args], capture_output=True, text=True, timeout=timeout_s,
                          cwd=REPO)


def step_stats(**fields: object) -> StepStats:
    """An agent stats reply with every field unknown except a stepping loop's basics and ``fields``."""
    values: dict[str, object] = {f.name: None for f in dataclasses.fields(StepStats)}
    values.update(timestamp=100.0, steps_total=50, window_steps=8, step_source="optimizer", graph_break_reasons=())
    values.update(fields)
    return StepStats(**values)
