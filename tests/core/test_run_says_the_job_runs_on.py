"""``run --duration`` says from the start that the command runs on after the report (the examples'
``--steps 0`` job then looked like a hang: "waiting for the command to finish" came only at the end)."""

from __future__ import annotations

import subprocess
import sys


def test_run_with_a_duration_says_first_that_the_command_runs_on() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", "run", "--duration", "5", "--no-dashboard", "--",
                           sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=120)
    first = next(line for line in proc.stderr.splitlines() if line.startswith("gpudoctor:"))
    assert "runs on after it" in first and "5 s" in first, proc.stderr
