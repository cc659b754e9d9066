"""Dashboard cost and responsiveness, measured in a real terminal (tmux).

1. CPU and RSS of the dashboard process over ``--seconds`` (default 60) at a 1 s refresh, fed by a
   recorded H200 session that changes every second (tests/tui/replay.py). Targets: ≤ 5 % of one
   core, ≤ 200 MB RSS.
2. Key-press latency (send-keys → the detail pane shows the newly selected finding, read back with
   capture-pane every ~5 ms) while the real trace analyzer parses a large trace in a background
   thread of the same process, as the live session does after ``p``; and without it, for reference.
   Target: < 100 ms.

Usage: ``.venv/bin/python bench/perf/tui_dashboard.py [--seconds 60] [--presses 30] [--trace PATH]``
(needs tmux). Prints a short table; numbers include tmux's own rendering, so they are an upper bound.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "tests" / "tui" / "replay.py"
#: A real profile of a few training steps (H200 resnet18, 4 steps): what ``p`` produces.
DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "h200" / "resnet_fp32.json.gz"
SOCKET = "gd-bench"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=True, capture_output=True, text=True).stdout


def start(name: str, command: str) -> psutil.Process:
    tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48", command)
    pane_pid = int(tmux("display", "-p", "-t", name, "#{pane_pid}").strip())
    proc = psutil.Process(pane_pid)
    for _ in range(50):  # the pane's shell may exec python directly or run it as a child
        if "replay.py" in " ".join(proc.cmdline()):
            return proc
        kids = [c for c in proc.children(recursive=True) if "replay.py" in " ".join(c.cmdline())]
        if kids:
            return kids[0]
        time.sleep(0.1)
    raise RuntimeError("the dashboard process did not start")


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def wait_for(name: str, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in screen(name):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{text!r} never appeared:\n{screen(name)}")


def measure_load(seconds: float) -> tuple[float, float]:
    proc = start("load", f"{sys.executable} {REPLAY} input_bound --refresh-s 1.0")
    wait_for("load", "GD101")
    time.sleep(5)  # imports and first layout done
    cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    rss = []
    while time.monotonic() - t0 < seconds:
        rss.append(proc.memory_info().rss / 2**20)
        time.sleep(1)
    cpu_pct = 100 * (sum(proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
    tmux("send-keys", "-t", "load", "q")
    return cpu_pct, max(rss)


def detail_head(text: str) -> str:
    """The first line of the detail pane: severity, code and name of the shown finding."""
    for line in text.splitlines():
        parts = line.split("││")
        if len(parts) == 2 and parts[1].strip().startswith(("CRIT", "WARN", "INFO")):
            return parts[1].strip()
    return ""


def measure_keys(presses: int, trace: Path | None, parse_log: Path) -> tuple[list[float], float]:
    """Latencies (ms) and the dashboard's CPU time per key press (ms; load-independent, idle run only)."""
    name = "keys" if trace else "idle"
    extra = f" --parse-trace-loop {trace} --parse-log {parse_log}" if trace else ""
    proc = start(name, f"{sys.executable} {REPLAY} input_bound --profiled --refresh-s 1.0{extra}")
    wait_for(name, "GD102")
    time.sleep(3)
    cpu0, t0_all = sum(proc.cpu_times()[:2]), time.monotonic()
    time.sleep(5)  # what the same session costs with no keys (the recorded session repeats itself)
    quiet_cpu_s_per_s = (sum(proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0_all)
    cpu0, t0_all = sum(proc.cpu_times()[:2]), time.monotonic()
    latencies = []
    for i in range(presses):
        before = detail_head(screen(name))
        t0 = time.perf_counter()
        tmux("send-keys", "-t", name, "Down" if i % 2 == 0 else "Up")
        while True:
            head = detail_head(screen(name))
            if head and head != before:
                break
            if time.perf_counter() - t0 > 10:
                break  # counted as 10 s: a key that never showed is a result, not a crash
            time.sleep(0.005)
        latencies.append(1000 * (time.perf_counter() - t0))
        time.sleep(0.3)
    spent_s = sum(proc.cpu_times()[:2]) - cpu0 - quiet_cpu_s_per_s * (time.monotonic() - t0_all)
    tmux("send-keys", "-t", name, "q")
    return latencies, 1000 * spent_s / presses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--load-only", action="store_true", help="only the CPU/RSS part")
    args = parser.parse_args()
    try:
        cpu_pct, rss_mib = measure_load(args.seconds)
        if args.load_only:
            print(f"dashboard CPU {cpu_pct:.1f}% of one core, RSS max {rss_mib:.0f} MiB over {args.seconds:.0f} s; "
                  f"load average {psutil.getloadavg()[0]:.1f}")
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            parse_log = Path(tmp) / "parses.log"
            idle, cpu_ms_per_key = measure_keys(args.presses, None, parse_log)
            busy, _ = measure_keys(args.presses, args.trace, parse_log)
            parses = parse_log.read_text().splitlines() if parse_log.exists() else []
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
    load = psutil.getloadavg()
    print(f"machine: {psutil.cpu_count()} cores, load average {load[0]:.1f} (1 min)")
    print(f"{'metric':<44}{'value':>12}  target")
    print(f"{'dashboard CPU, 1 s refresh, ' + str(int(args.seconds)) + ' s (% of one core)':<44}{cpu_pct:>12.1f}  <= 5")
    print(f"{'dashboard RSS max (MiB)':<44}{rss_mib:>12.0f}  <= 200")
    for label, values in (("key latency, idle", idle), ("key latency, trace parsing", busy)):
        q = statistics.quantiles(values, n=10)
        print(f"{label + ' p50 / p90 / max (ms)':<44}{statistics.median(values):>5.0f} / {q[-1]:.0f} / {max(values):.0f}  < 100")
    print(f"{'dashboard CPU time per key press (ms)':<44}{cpu_ms_per_key:>12.1f}  (load-independent floor)")
    parse_times = [line.split()[1] for line in parses]
    print(f"trace parses during the busy run: {len(parses)} of {args.trace.name} ({', '.join(parse_times[:3])} each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
