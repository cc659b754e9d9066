"""``gpudoctor run`` on a loop written with Hugging Face accelerate: step times from the wrapped
optimizer, the DataLoader wait, and the finding — never an "ok" without data."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time

import pytest
from live_helpers import HERE, REPO, run_cli

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


#: ``accelerate launch`` with one process: the launcher imports torch, then runs ``python script`` as its
#: child (no rank in the child's environment) and waits for it
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no", "--cpu"]


def test_run_under_a_one_process_accelerate_launch_watches_the_script_not_the_launcher() -> None:
    # before: the launcher's agent (torch imported, no step) was watched, and the report said
    # "No problems found." over 0 steps
    proc = run_cli("run", "--duration", "10", "--no-stacks", "--format", "json", "--", *LAUNCH,
                   str(HERE / "accelerate_loop.py"), "16", timeout_s=150)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    watched = report["process"]
    assert "accelerate.commands.launch" not in " ".join(watched["cmdline"]), watched["cmdline"]
    assert "accelerate_loop.py" in " ".join(watched["cmdline"]), watched["cmdline"]
    assert report["steps"]["steps_total"] > 20
    assert any(f["code"] == "GD102" for f in report["findings"]), report["findings"]


def test_attach_to_a_one_process_accelerate_launcher_follows_it_to_the_script() -> None:
    launcher = subprocess.Popen([*LAUNCH, str(HERE / "accelerate_loop.py"), "40"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        import psutil

        deadline = time.monotonic() + 60
        child = None
        while time.monotonic() < deadline and child is None:   # the script steps: it has printed a tick
            kids = psutil.Process(launcher.pid).children()
            if kids and kids[0].cpu_times().user > 3.0:
                child = kids[0]
            time.sleep(0.5)
        assert child is not None, "the launched script never got going"
        proc = run_cli("attach", str(launcher.pid), "--duration", "8", "--no-stacks", "--no-auto-profile",
                       "--format", "json", timeout_s=120)
    finally:
        for p in [*psutil.Process(launcher.pid).children(recursive=True), launcher]:
            with contextlib.suppress(Exception):
                p.kill()
        launcher.wait(timeout=10)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["target_pid"] == child.pid
    assert any(f"PID {launcher.pid} only launches" in n for n in report["notes"]), report["notes"]
    assert report["steps"]["steps_total"] > 10


def test_a_watch_without_a_step_does_not_read_as_a_clean_bill() -> None:
    # a Python wrapper that runs a program of its own and waits: no step anywhere it is watched
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time; [time.sleep(0.01) for _ in range(1500)]'])")
    wrapper = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        time.sleep(1.0)
        proc = run_cli("attach", str(wrapper.pid), "--duration", "6", "--no-stacks", "--no-auto-profile",
                       "--format", "json", timeout_s=120)
    finally:
        wrapper.kill()
        wrapper.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["findings"] == []
    assert report["summary"]["headline"].startswith("Nothing judged from training steps"), report["summary"]
