#!/usr/bin/env python3
"""What does watching cost a Python-bound job? Step rate with ``gpudoctor attach`` on vs off, one process.

bench/perf/agent_overhead.py times the in-process agent alone. This one times the whole passive watcher
as a user runs it — ``gpudoctor attach PID --duration N`` with its injected agent, py-spy's stack
windows, the process and NVML readings — on a job whose main process is busy in Python between steps
(bench/validation/decode_job.py: images decoded in ``__getitem__`` with ``num_workers=0``; issue 36
measured 0.84–0.98 there on H100s). Windows alternate detached / attached in ABBA order on ONE
training process; the rate comes from the job's own progress lines, never from gpudoctor. Each
attached window starts ``--settle`` seconds after ``attach`` (injection and the first readings are
outside it) and ends before the report. Modes split the cost by part: ``full`` (the automatic profile
window off), ``no-stacks`` (no py-spy), ``no-agent`` (no injection: py-spy and readings only).

Also measured per attached window: gpudoctor's own CPU (the attach process and its py-spy children,
from wait4's rusage) and the agent thread's CPU inside the target (/proc/PID/task/*/stat, thread
``gpudoctor-agent``), both as cores (CPU-seconds per second) and as a share of the machine's CPUs.

    .venv/bin/python bench/watcher_overhead.py                       # CPU stand-in, ~2 min on 2 cores
    python3 bench/watcher_overhead.py --device cuda --job-args ""    # GPU: ResNet-18 at 224 px
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "bench" / "validation" / "decode_job.py"
CLK = os.sysconf("SC_CLK_TCK")


class Job:
    """The training process; its progress lines are timed as they arrive."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.marks: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("["):
                self.marks.append(time.monotonic())

    def rate(self, start: float, end: float) -> float | None:
        inside = [t for t in self.marks if start <= t <= end]
        return (len(inside) - 1) / (inside[-1] - inside[0]) if len(inside) >= 3 else None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _thread_cpu_s(pid: int, name: str) -> float:
    """CPU seconds of the target's threads called ``name`` (0 when there is none)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            if (task / "comm").read_text().strip() != name[:15]:
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK
        except (OSError, IndexError, ValueError):
            continue
    return total


def _attached(job: Job, mode: str, window_s: float, settle_s: float, gd: list[str]) -> dict[str, Any]:
    flags = {"full": [], "no-stacks": ["--no-stacks"], "no-agent": ["--no-agent"]}[mode]
    with tempfile.TemporaryDirectory(prefix="gd_overhead_") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [*gd, "attach", str(job.proc.pid), "--duration", f"{settle_s + window_s + 1:g}", "--no-auto-profile",
               "--format", "json", "-o", str(report), "--fail-on", "critical", *flags]
        watcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(settle_s)
        start, agent0 = time.monotonic(), _thread_cpu_s(job.proc.pid, "gpudoctor-agent")
        time.sleep(window_s)
        end, agent1 = time.monotonic(), _thread_cpu_s(job.proc.pid, "gpudoctor-agent")
        _, status, usage = os.wait4(watcher.pid, 0)
        watcher.returncode = os.waitstatus_to_exitcode(status)
        total_s = time.monotonic() - start + settle_s
        found = json.loads(report.read_text()) if report.exists() else {}
    return {"rate": job.rate(start, end), "gd_cores": (usage.ru_utime + usage.ru_stime) / total_s,
            "agent_cores": (agent1 - agent0) / (end - start), "watch_rc": watcher.returncode,
            "agent": (found.get("agent") or {}).get("status") if isinstance(found.get("agent"), dict) else None,
            "self_cpu_note": found.get("watcher_cpu") if isinstance(found, dict) else None}


def alternate(job_argv: list[str], modes: list[str], pairs: int, window_s: float, settle_s: float,
              warmup_s: float, gd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """ABBA windows per mode on one job process; per mode the rates, ratio and CPU shares."""
    job = Job(job_argv, env)
    out: dict[str, Any] = {"modes": {}, "cpus": os.cpu_count()}
    try:
        deadline = time.monotonic() + warmup_s + 90.0       # torch's import on a loaded machine
        while len(job.marks) < 3 and time.monotonic() < deadline and job.proc.poll() is None:
            time.sleep(0.5)
        time.sleep(warmup_s)
        if len(job.marks) < 3:
            raise SystemExit("the job printed no progress: " + " ".join(job_argv))
        for mode in modes:
            off: list[float] = []
            on: list[dict[str, Any]] = []
            for state in (["off", "on", "on", "off"] * pairs)[: 2 * pairs]:
                if state == "off":
                    start = time.monotonic()
                    time.sleep(window_s)
                    rate = job.rate(start, time.monotonic())
                    if rate:
                        off.append(rate)
                    time.sleep(1.0)
                else:
                    on.append(_attached(job, mode, window_s, settle_s, gd))
                    time.sleep(1.5)      # detach settles outside the next window
            rates = [w["rate"] for w in on if w["rate"]]
            cpus = os.cpu_count() or 1
            out["modes"][mode] = {
                "detached_steps_per_s": off, "attached_steps_per_s": rates,
                "ratio": statistics.mean(rates) / statistics.mean(off) if rates and off else None,
                "gpudoctor_cores": statistics.mean(w["gd_cores"] for w in on),
                "agent_thread_cores": statistics.mean(w["agent_cores"] for w in on),
                "gpudoctor_cpu_share_pct": 100 * statistics.mean(w["gd_cores"] for w in on) / cpus,
                "windows": on}
    finally:
        job.stop()
    return out


def print_table(result: dict[str, Any]) -> None:
    print(f"watcher overhead on one Python-bound job, {result['cpus']} CPUs; rate from the job's own lines")
    print(f"{'mode':<11}{'detached it/s':>15}{'attached it/s':>15}{'ratio':>8}{'gpudoctor cores':>17}"
          f"{'agent thread':>14}")
    for mode, m in result["modes"].items():
        off = statistics.mean(m["detached_steps_per_s"]) if m["detached_steps_per_s"] else float("nan")
        on = statistics.mean(m["attached_steps_per_s"]) if m["attached_steps_per_s"] else float("nan")
        print(f"{mode:<11}{off:>15.2f}{on:>15.2f}{(m['ratio'] or float('nan')):>8.3f}"
              f"{m['gpudoctor_cores']:>17.3f}{m['agent_thread_cores']:>14.4f}")
    print("goal: ratio >= 0.995 (issue 36); cores = CPU-seconds per second (gpudoctor: attach + py-spy)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--job-args", default="--tiny --threads 1", help="extra decode_job.py arguments")
    p.add_argument("--modes", default="full,no-stacks,no-agent")
    p.add_argument("--pairs", type=int, default=2, help="ABBA pairs of windows per mode")
    p.add_argument("--window-s", type=float, default=6.0)
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--warmup-s", type=float, default=8.0)
    p.add_argument("--json", type=Path, help="also write the result here")
    args = p.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    job = [sys.executable, str(JOB), "--device", args.device, *shlex.split(args.job_args)]
    result = alternate(job, [m for m in args.modes.split(",") if m], args.pairs, args.window_s, args.settle_s,
                       args.warmup_s, [sys.executable, "-m", "gpudoctor"], env)
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
