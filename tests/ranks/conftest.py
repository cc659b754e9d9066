"""Fixtures for the many-ranks tests: real 2-rank DDP runs (gloo, CPU) and their per-step timings."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median

import pytest

from gpudoctor.live.stragglers import RankWindow

HERE = Path(__file__).resolve().parent
DDP_JOB = HERE / "ddp_job.py"
WARMUP_STEPS = 5


def run_ddp(out: Path, mode: str, steps: int = 40, *extra: str, timeout_s: float = 280.0) -> dict[int, list[dict]]:
    """Run the 2-rank DDP job to completion; return each rank's per-step rows."""
    pytest.importorskip("torch")
    cmd = [sys.executable, str(DDP_JOB), "--mode", mode, "--steps", str(steps), "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}


def to_windows(rows: dict[int, list[dict]], window_steps: int = 5) -> list[list[RankWindow]]:
    """Cut each rank's rows (after warm-up) into windows of medians, as an agent would report them."""
    n = min(len(v) for v in rows.values())
    out = []
    for start in range(WARMUP_STEPS, n - window_steps + 1, window_steps):
        wins = []
        for rank, rr in sorted(rows.items()):
            chunk = rr[start:start + window_steps]

            def med(key: str, chunk: Sequence[dict] = chunk) -> float:
                return float(median(row[key] for row in chunk))
            wins.append(RankWindow(
                rank=rank, pid=chunk[-1]["pid"], steps_total=chunk[-1]["step"], window_steps=len(chunk),
                step_time_ms=med("step_ms"), data_wait_ms=med("data_wait_ms"), h2d_ms=med("h2d_ms"),
                collective_wait_ms=med("collective_wait_ms"), compute_ms=med("compute_ms"),
                cpu_run_delay_pct=_wait_share_pct(chunk)))
        out.append(wins)
    return out


def _wait_share_pct(chunk: Sequence[dict]) -> float:
    """Share of the main thread's runnable time spent waiting for a CPU over the window."""
    delay = sum(row["run_delay_ms"] for row in chunk)
    cpu = sum(row["cpu_ms"] for row in chunk)
    return 100.0 * delay / (delay + cpu) if delay + cpu > 0 else 0.0


_RUNS: dict[str, dict[int, list[dict]]] = {}
#: The input-slowed rank's per-sample read delay in ``ddp_runs`` (160 ms per 32-sample batch): the
#: fast rank's wait in the all-reduce stays most of its step even while a busy 2-core machine
#: stretches both ranks' compute (ddp_job.py's 2.5 ms default gave 42% there under load, not > 50%).
RUNS_READ_DELAY_MS = 5.0


def ddp_run(out: Path, mode: str) -> dict[int, list[dict]]:
    """One run as ``ddp_runs`` makes them (40 steps, the input rank's read delay), into ``out``."""
    return run_ddp(out, mode, 40, "--read-delay-ms", str(RUNS_READ_DELAY_MS))


@pytest.fixture(scope="session")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[int, list[dict]]]:
    """``ddp_runs(mode)``: rows of a finished real DDP run in that mode (run once per session)."""
    def get(mode: str) -> dict[int, list[dict]]:
        if mode not in _RUNS:
            _RUNS[mode] = ddp_run(tmp_path_factory.mktemp(f"ddp_{mode}"), mode)
        return _RUNS[mode]
    return get


_SHORT_PROFILED: dict[str, Path] = {}


@pytest.fixture(scope="session")
def short_profiled_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``short_profiled_run(mode)``: the folder of a finished 12-step DDP run in that mode with
    ddp_job.py's own 4-step profile (``rank<r>.pt.trace.json``), run once per session."""
    def get(mode: str) -> Path:
        if mode not in _SHORT_PROFILED:
            out = tmp_path_factory.mktemp(f"ddp_{mode}_profiled")
            run_ddp(out, mode, 12, "--profile", timeout_s=120.0)
            _SHORT_PROFILED[mode] = out
        return _SHORT_PROFILED[mode]
    return get
