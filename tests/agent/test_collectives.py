"""The agent's DDP collective-wait measurement on real 2-rank gloo training (CPU).

The numbers behind live compute-straggler detection: the rank that finishes its backward early must
see a long wait, the late rank a short one; the registered hook must give the same gradients as DDP's
own all-reduce; a program's own comm hook must be left alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).resolve().parent / "ddp_comm_hook_job.py"


@pytest.fixture(scope="module")
def results() -> list[dict]:
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(JOB)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hook_keeps_ddp_gradients(results: list[dict]) -> None:
    for r in results:
        assert r["max_grad_diff"] < 1e-6, r


def test_early_rank_waits_for_the_late_one(results: list[dict]) -> None:
    fast, slow = results[0], results[1]          # rank 1 sleeps 200 ms before each backward
    assert fast["status"].startswith("timing"), fast["status"]
    assert len(fast["waits_ms"]) >= 5 and len(slow["waits_ms"]) >= 5
    fast_ms = sorted(fast["waits_ms"])[len(fast["waits_ms"]) // 2]
    slow_ms = sorted(slow["waits_ms"])[len(slow["waits_ms"]) // 2]
    # at least half the planted delay (a busy machine can start rank 0's backward late, not early)
    assert fast_ms > 100.0, fast["waits_ms"]
    assert slow_ms < fast_ms / 2, (fast["waits_ms"], slow["waits_ms"])


def test_a_programs_own_comm_hook_is_left_alone(results: list[dict]) -> None:
    for r in results:
        assert "own DDP comm hook" in r["user_hook_status"], r["user_hook_status"]
