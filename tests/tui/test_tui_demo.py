"""``gpudoctor demo`` without a terminal: starts the bundled input-bound job on the CPU, prints the
one-shot report with the planted problem, and stops its own job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

GPUDOCTOR = Path(sys.executable).parent / "gpudoctor"


@pytest.mark.slow
def test_demo_without_a_terminal_reports_the_planted_problem_and_stops_its_job() -> None:
    pytest.importorskip("torch")
    before = {p.pid for p in psutil.process_iter()}
    done = subprocess.run([str(GPUDOCTOR), "demo", "--device", "cpu", "--duration", "12", "--format", "json",
                           "--fail-on", "info"], capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr   # --fail-on info with a finding: 1, as help and README say
    report = json.loads(done.stdout)
    assert report["command"] == "demo"
    assert "GD102" in {f["code"] for f in report["findings"]}, report["findings"]
    assert "starting input_bound.py" in done.stderr
    leftovers = [p for p in psutil.process_iter(["pid", "cmdline"])
                 if p.pid not in before and any("input_bound.py" in part for part in (p.info["cmdline"] or []))]
    assert not leftovers, f"the demo left its job running: {leftovers}"
