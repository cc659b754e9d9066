"""Speed of `gpudoctor check` against TorchFix 0.7 on the same Python tree, side by side.

Both tools run as subprocesses on the same files, one after the other, each `--repeat` times; the
table shows the best wall time and the CPU time (user + sys of the process and its workers) of each
tool, plus the file and finding counts. CPU time is reported because shared machines are noisy:
it is much less sensitive to other load than wall time.

Usage (TorchFix in its own venv: python -m venv /tmp/torchfixvenv && /tmp/torchfixvenv/bin/pip install 'torchfix==0.7.*'):

    .venv/bin/python bench/check_vs_torchfix.py [TREE] [--torchfix /tmp/torchfixvenv/bin/torchfix] [--repeat 1]

TREE defaults to the installed torch package. Not a unit test: it takes minutes (TorchFix is slow).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def _installed_torch() -> str:
    spec = importlib.util.find_spec("torch")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed here; pass a TREE")
    return next(iter(spec.submodule_search_locations))


def _timed(argv: list[str]) -> tuple[float, float, str, int]:
    """Wall seconds, CPU seconds of the child and its children, stdout, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        sys.exit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return wall, cpu, proc.stdout, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", nargs="?", default=None)
    parser.add_argument("--torchfix", default="/tmp/torchfixvenv/bin/torchfix")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    tree = args.tree or _installed_torch()
    files = sum(1 for _ in Path(tree).rglob("*.py"))
    gpudoctor = [sys.executable, "-m", "gpudoctor", "check", tree, "--format", "json", "-o", os.devnull]
    runs = {
        f"gpudoctor check (--jobs {os.cpu_count()})": gpudoctor,
        "gpudoctor check (--jobs 1)": [*gpudoctor, "--jobs", "1"],
        f"torchfix --select ALL (-j {os.cpu_count()})": [args.torchfix, "--select", "ALL", tree],
    }
    results: dict[str, tuple[float, float, int]] = {}
    for name, argv in runs.items():
        best: tuple[float, float, int] | None = None
        for _ in range(args.repeat):
            wall, cpu, out, _ = _timed(argv)
            findings = out.count("\n") if "torchfix" in name else -1
            if best is None or wall < best[0]:
                best = (wall, cpu, findings)
        assert best is not None
        results[name] = best
        print(f"  done: {name}: {best[0]:.1f} s", file=sys.stderr, flush=True)
    tf_wall, tf_cpu, _ = results[next(n for n in results if n.startswith("torchfix"))]
    print(f"tree: {tree} ({files} .py files), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'tool':<36} {'wall s':>8} {'cpu s':>8} {'files/s':>8} {'wall ×':>7} {'cpu ×':>7}")
    for name, (wall, cpu, _) in results.items():
        print(f"{name:<36} {wall:8.1f} {cpu:8.1f} {files / wall:8.0f} {tf_wall / wall:7.1f} {tf_cpu / cpu:7.1f}")


if __name__ == "__main__":
    main()
