"""How far a machine's cores scale for pure-Python work: the ceiling a rank-parallel analyze can reach.

Why this exists: issue 14 asks that N rank traces analysed on N cores run ≥ 0.8 × N times faster than
one after another. On the 16-core H200 host the parallel run reached 7.2× while one rank analysed
alone took twice as long as its share of the serial run — a machine effect (shared caches, memory
bandwidth, SMT siblings, clocks that drop when every core is busy) or the tool's? This script answers
that without the tool: it runs the same fixed CPU work in 1 process and in N processes at once
(fork, no shared data, no pipes during the work) and prints the speedup the machine itself gives, for
two kinds of work — an arithmetic loop that stays in registers and L1, and an allocation-heavy loop
shaped like trace analysis (lists of floats, dict lookups, sorting: caches and memory). It also
prints what the machine says about its cores (sockets, cores, threads per core, affinity, cgroup).

    python3 bench/cpu_ceiling.py --procs 16 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def arithmetic(n: int = 6_000_000) -> float:
    """A loop of float arithmetic: registers and L1 only."""
    x = 0.0
    for i in range(n):
        x += (i % 7) * 0.5
    return x


def allocating(n: int = 600_000) -> float:
    """Columns of floats, a dict of names, a sort and sums: the memory shape of a trace's metrics."""
    ts = [float(i * 37 % 100_003) for i in range(n)]
    dur = [float(i % 113) for i in range(n)]
    names: dict[str, int] = {}
    ids = [names.setdefault(f"kernel_{i % 5000}", len(names)) for i in range(n)]
    order = sorted(range(n), key=ts.__getitem__)
    end = [ts[i] + dur[i] for i in order]
    return sum(end) + sum(ids)


WORKLOADS = {"arithmetic": arithmetic, "allocating": allocating}


def _run_parallel(fn_name: str, procs: int) -> float:
    """Wall seconds for ``procs`` forked processes each running the workload once, started together."""
    fn = WORKLOADS[fn_name]
    read_fd, write_fd = os.pipe()
    pids = []
    for _ in range(procs):
        pid = os.fork()
        if pid == 0:  # child: wait for the start byte, work, exit
            os.close(write_fd)
            os.read(read_fd, 1)
            fn()
            os._exit(0)
        pids.append(pid)
    os.close(read_fd)
    time.sleep(0.2)  # every child is forked and blocked on the pipe
    start = time.perf_counter()
    os.write(write_fd, b"g" * procs)
    for pid in pids:
        os.waitpid(pid, 0)
    wall = time.perf_counter() - start
    os.close(write_fd)
    return wall


def _machine() -> dict[str, object]:
    """What the machine says about its cores."""
    facts: dict[str, object] = {"cpu_count": os.cpu_count(), "python": platform.python_version()}
    if hasattr(os, "sched_getaffinity"):
        facts["affinity"] = len(os.sched_getaffinity(0))
    try:
        from gpudoctor.forkpool import usable_cores
        facts["usable_cores (gpudoctor --jobs default)"] = usable_cores()
    except Exception as exc:  # the tool's own helper is optional here
        facts["usable_cores (gpudoctor --jobs default)"] = f"n/a ({type(exc).__name__})"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Model name", "Socket(s)", "Core(s) per socket", "Thread(s) per core", "CPU(s)",
                "NUMA node(s)", "L3 cache", "CPU max MHz")
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in keep:
                facts[key.strip()] = value.strip()
    except (OSError, subprocess.TimeoutExpired):
        facts["lscpu"] = "not available"
    cpu_max = Path("/sys/fs/cgroup/cpu.max")
    if cpu_max.exists():
        facts["cgroup cpu.max"] = cpu_max.read_text().strip()
    return facts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="processes at once (default: all cores)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per setting")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    machine = _machine()
    for key, value in machine.items():
        print(f"{key}: {value}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"| work | 1 process | {args.procs} processes at once | machine speedup | per core |")
    print("|---|---|---|---|---|")
    rows = []
    for name in WORKLOADS:
        one = min(_run_parallel(name, 1) for _ in range(args.repeat))
        many = min(_run_parallel(name, args.procs) for _ in range(args.repeat))
        speedup = args.procs * one / many
        rows.append({"work": name, "one_s": one, "many_s": many, "procs": args.procs, "speedup": speedup})
        print(f"| {name} | {one:.2f} s | {many:.2f} s | {speedup:.2f}× | {speedup / args.procs:.2f} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
