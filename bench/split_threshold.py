"""Where one trace starts to gain from a second decoder: ``analyze`` with and without the split decode.

Why this exists: ``gpudoctor analyze`` of one trace on ≥ 2 cores may decode the second half of the
events in a forked child (:mod:`gpudoctor.trace.split`); below
:data:`gpudoctor.trace.reader.PARALLEL_MIN_BYTES` it does not. The fork, the merge of the child's
columns and (for ``.json.gz``) the child's own inflate of the file are fixed costs, and the parent
sets up the rules on the second core meanwhile, so the split gains only past some size. This runs
``gpudoctor analyze <trace> --format json`` as a fresh process per run, alternating "split" (the
threshold forced to 0) and "one decoder" (forced above any file) ``--repeat`` times each, and prints
wall (min, median) and CPU (median, all processes) per trace — the measurement the threshold is set by.

Usage: .venv/bin/python bench/split_threshold.py [--repeat 12] TRACE...
       (default: the HTA-table traces of ../shared/traces/public/hta from 9.8 to 54 MB of JSON)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HTA = REPO.parent / "shared" / "traces" / "public" / "hta"
DEFAULT_TRACES = [
    HTA / "nccl_parser_config" / "nccl_data.json.gz",
    HTA / "negative_queue_length_values_check" / "rank0.json.gz",
    HTA / "trace_diff" / "test",
    HTA / "trace_diff" / "control",
    HTA / "df_index_resolver",
]
#: Runs ``gpudoctor analyze`` with the split threshold of argv[1] bytes (the rest: the CLI's arguments).
RUN_SCRIPT = """
import sys
import gpudoctor.trace.reader as reader
reader.PARALLEL_MIN_BYTES = int(sys.argv[1])
from gpudoctor.cli import main
sys.exit(main(sys.argv[2:]))
"""
MODES = {"split": 0, "one decoder": 1 << 50}


def _trace_file(path: Path) -> Path:
    """A trace file itself, or the first ``.json``/``.json.gz`` in a directory."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))[0]
    return path


def _json_mb(path: Path) -> float:
    if path.name.endswith(".gz"):
        import gzip

        with gzip.open(path, "rb") as fh:
            return sum(len(block) for block in iter(lambda: fh.read(1 << 22), b"")) / 1e6
    return path.stat().st_size / 1e6


def run_once(trace: Path, threshold: int) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process and its reaped children) of one run."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(threshold), "analyze", str(trace),
                             "--format", "json", "-o", os.devnull], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: findings at or above --fail-on
        raise SystemExit(f"gpudoctor analyze {trace} failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--repeat", type=int, default=12, help="runs per mode and trace (alternating)")
    args = parser.parse_args()
    print(f"load average at start: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    print("| trace | JSON | split: wall min / median, CPU median | one decoder: wall min / median, CPU median | faster by median wall |")
    print("|---|---|---|---|---|")
    for raw in args.traces:
        trace = _trace_file(raw)
        runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        for rep in range(args.repeat):
            order = list(MODES) if rep % 2 == 0 else list(reversed(MODES))
            for mode in order:
                runs[mode].append(run_once(trace, MODES[mode]))
        cells = []
        medians = {}
        for mode in MODES:
            walls = [w for w, _ in runs[mode]]
            medians[mode] = statistics.median(walls)
            cells.append(f"{min(walls):.3f} / {medians[mode]:.3f} s, {statistics.median(c for _, c in runs[mode]):.3f} s")
        winner = min(medians, key=medians.__getitem__)
        print(f"| {trace.parent.name}/{trace.name} | {_json_mb(trace):.1f} MB | {cells[0]} | {cells[1]} | {winner} |")
    print(f"load average at end: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
