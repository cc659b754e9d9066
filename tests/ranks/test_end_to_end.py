"""End to end with the real agent: torchrun starts 2 gloo ranks with the agent inside (the
environment ``gpudoctor run`` gives a command); gpudoctor finds both ranks from the launcher's PID,
polls each rank's agent (``RankMonitor``, what the session holds) and names the input-slowed rank through the rules engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.rankwatch import RankMonitor
from gpudoctor.model import Source

from .conftest import DDP_JOB

pytestmark = pytest.mark.slow
TORCHRUN = Path(sys.executable).parent / "torchrun"


def test_attach_to_launcher_names_the_input_straggler(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    from gpudoctor.commands.run import agent_env

    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(DDP_JOB), "--launcher", "env",
           "--mode", "input", "--steps", "5000", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, env=agent_env(dict(os.environ)), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    monitor = None
    try:
        deadline = time.time() + 90
        while not all((tmp_path / f"rank{r}.jsonl").exists() for r in (0, 1)) and time.time() < deadline:
            time.sleep(0.3)
        monitor = RankMonitor.for_target(proc.pid, window_s=2.0)  # what the live session holds
        assert monitor is not None and [r.rank for r in monitor.group.ranks] == [0, 1]
        assert monitor.group.launcher_pid == proc.pid
        findings = []
        while time.time() < deadline:
            factsets = monitor.evaluate(time.time())
            findings = evaluate(load_catalog().select(["GD601"], []), factsets, [Source.LIVE]).findings
            if findings:
                break
            time.sleep(1.0)
        assert [(f.code, f.location.rank) for f in findings] == [("GD601", 1)], monitor.table
        assert "(input)" in findings[0].message
        rows = {row["rank"]: row for row in monitor.table}
        assert rows[1]["data_wait_pct"] > 30 > rows[0]["data_wait_pct"]
        assert rows[0]["steps_total"] > 0 and rows[1]["steps_total"] > 0
    finally:
        if monitor is not None:
            monitor.close()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_gpudoctor_attach_to_torchrun_reports_the_straggler(tmp_path: Path) -> None:
    """The whole path a user takes: ``gpudoctor attach <torchrun pid> --duration … --format json``."""
    pytest.importorskip("torch")
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    from gpudoctor.commands.run import agent_env

    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(DDP_JOB), "--launcher", "env",
           "--mode", "input", "--steps", "5000", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, env=agent_env(dict(os.environ)), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while not all((tmp_path / f"rank{r}.jsonl").exists() for r in (0, 1)) and time.time() < deadline:
            time.sleep(0.3)
        gpudoctor = Path(sys.executable).parent / "gpudoctor"
        out = subprocess.run([str(gpudoctor), "attach", str(proc.pid), "--duration", "16", "--window", "2",
                              "--no-agent", "--no-stacks", "--format", "json", "--select", "GD601,GD610"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, out.stderr  # findings at warning or above
        report = json.loads(out.stdout)
        found = [(f["code"], f["location"].get("rank")) for f in report["findings"]]
        assert found == [("GD601", 1)], report["findings"]
        assert "(input)" in report["findings"][0]["message"]
        assert proc.poll() is None, "attaching must leave the job running"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
