"""``gpudoctor run`` on a loop written with Hugging Face accelerate: step times from the wrapped
optimizer, the DataLoader wait, and the finding — never an "ok" without data."""

from __future__ import annotations

import json
import sys

import pytest
from live_helpers import HERE, run_cli

pytest.importorskip("accelerate", reason="accelerate is not installed (pip install accelerate)")


def test_an_accelerate_loop_reports_its_steps_and_its_input_wait() -> None:
    # the loop ends on its own after 16 s; run reports after its 10 s watch and the command's exit
    proc = run_cli("run", "--duration", "10", "--format", "json", "--", sys.executable,
                   str(HERE / "accelerate_loop.py"), "16", timeout_s=150)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    steps = report["steps"]
    # AcceleratedOptimizer.step calls the wrapped torch optimizer's step: the agent's hook sees it
    assert steps["step_source"] == "optimizer"
    assert steps["steps_total"] > 20
    assert steps["data_wait_pct"] is not None and steps["data_wait_pct"] > 20  # 16 ms of loading per step
    # found by the agent's live windows, the automatic profile window's trace, or both (under CI's
    # load the profile window and its analysis can take most of a 10 s watch: trace only, seen once)
    gd102 = [f for f in report["findings"] if f["code"] == "GD102"]
    assert gd102 and set(gd102[0]["sources"]) & {"live", "trace"}, report["findings"]
