"""From how many events the metrics gain from numpy: ``analyze`` with the numpy path forced off and on.

Why this exists: the metrics run over numpy arrays from :data:`gpudoctor.trace.vectorized.NUMPY_MIN_EVENTS`
events on and in pure Python below (:mod:`gpudoctor.trace.vectorized`). numpy's import is a fixed
cost (~80 ms here) and its per-event gain grows with the table, so there is a size below which the
pure path's whole run is faster. This runs ``gpudoctor analyze <trace> --format json --jobs 1`` as a
fresh process per run, alternating ``GPUDOCTOR_NUMPY=never`` and ``=always`` ``--repeat`` times each,
and prints the complete events, wall (min, median) and CPU (median) per trace and mode — the
measurement the threshold is set by. ``--jobs 1``: one process, so CPU and wall tell the same story.

Usage: .venv/bin/python bench/numpy_threshold.py [--repeat 8] [TRACE...]
       (default: the HTA-table traces of ../shared/traces/public/hta, 9.8 to 54 MB of JSON, and the
       H200 resnet trace; add e.g. /tmp/gd_mid.json from bench/trace_synth.py --size-mb 200)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from split_threshold import DEFAULT_TRACES, REPO, _json_mb, _trace_file

MODES = ("never", "always")


def run_once(trace: Path, mode: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one ``analyze`` run with the numpy path ``mode``."""
    env = {**os.environ, "GPUDOCTOR_NUMPY": mode,
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", "analyze", str(trace), "--format", "json",
                             "--jobs", "1", "-o", os.devnull], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: findings at or above --fail-on
        raise SystemExit(f"gpudoctor analyze {trace} failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def complete_events(trace: Path) -> int:
    sys.path.insert(0, str(REPO / "src"))
    from gpudoctor.trace.reader import load_trace

    return len(load_trace(str(trace), 0).events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path,
                        default=[REPO.parent / "shared" / "traces" / "h200" / "resnet_fp32.json.gz", *DEFAULT_TRACES])
    parser.add_argument("--repeat", type=int, default=8, help="runs per mode and trace (alternating)")
    args = parser.parse_args()
    print(f"load average at start: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    print("| trace | JSON | events | pure: wall min / median, CPU median | numpy: wall min / median, CPU median | faster by median CPU |")
    print("|---|---|---|---|---|---|")
    for raw in args.traces:
        trace = _trace_file(raw)
        runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        for rep in range(args.repeat):
            for mode in (MODES if rep % 2 == 0 else MODES[::-1]):
                runs[mode].append(run_once(trace, mode))
        cells, cpu = [], {}
        for mode in MODES:
            walls = [w for w, _ in runs[mode]]
            cpu[mode] = statistics.median(c for _, c in runs[mode])
            cells.append(f"{min(walls):.3f} / {statistics.median(walls):.3f} s, {cpu[mode]:.3f} s")
        winner = "numpy" if cpu["always"] < cpu["never"] else "pure"
        print(f"| {trace.parent.name}/{trace.name} | {_json_mb(trace):.1f} MB | {complete_events(trace):,} | "
              f"{cells[0]} | {cells[1]} | {winner} |", flush=True)
    print(f"load average at end: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
