"""Why one rank analysed alone takes longer than its share of a serial run: first rank vs later ones.

Why this exists: on the 16-core H200 host a 67 MB rank analysed alone took 1.47 s while 16 of them
one after another took 0.74 s each, and the parallel run (one rank per worker) can be no faster
than a rank alone (bench/README.md, "Many ranks"). Process start-up is ~0.15 s of that; the rest is
unexplained. This script reads a rank set in one process, rank after rank, through the workers' own
function (:func:`gpudoctor.trace.analysis.analyze_rank_file`), and prints each rank's wall and CPU
time, then profiles the first rank and a later one (cProfile, top functions by own time) so the
difference has names. ``--fork-each`` instead analyses every rank in a freshly forked child of a
process that has imported everything — what a ``--jobs N`` worker does.

    python3 bench/rank_alone_cost.py --ranks 4 --rank-mb 67           # writes the set under /tmp
    python3 bench/rank_alone_cost.py --dir /tmp/ranks --fork-each
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from trace_synth import DEFAULT_SOURCE, write_rank_set  # noqa: E402

from gpudoctor.trace.analysis import analyze_rank_file  # noqa: E402
from gpudoctor.trace.reader import find_trace_files  # noqa: E402


def _timed(path: Path, position: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = analyze_rank_file(str(path), position)
    if isinstance(result, Exception):
        raise SystemExit(f"{path}: {result}")
    return time.perf_counter() - wall, time.process_time() - cpu


def _in_child(path: Path, position: int) -> tuple[float, float]:
    """Analyse one rank in a forked child; its wall and CPU time come back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        wall, cpu = _timed(path, position)
        os.write(w, f"{wall} {cpu}".encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 100).decode().split()
    os.close(r)
    os.waitpid(pid, 0)
    return float(data[0]), float(data[1])


def _profile(path: Path, position: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    analyze_rank_file(str(path), position)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[start:start + top + 1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, help="an existing folder of rank traces (else one is written)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--rank-mb", type=float, default=67.0)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--fork-each", action="store_true", help="each rank in a fresh forked child")
    ap.add_argument("--top", type=int, default=18, help="profile lines per rank (0: no profile)")
    args = ap.parse_args()
    folder = args.dir
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="gd-ranks-"))
        write_rank_set(args.source, folder, args.ranks, rank_mb=args.rank_mb, processes=os.cpu_count() or 1)
    files = find_trace_files([folder])
    size = sum(f.stat().st_size for f in files) / len(files) / 1e6
    print(f"{len(files)} rank traces in {folder} ({size:.1f} MB each); load {os.getloadavg()[0]:.2f}; "
          f"{'each in a fresh forked child' if args.fork_each else 'one process, rank after rank'}")
    print("| rank | wall | CPU |\n|---|---|---|")
    for i, path in enumerate(files):
        wall, cpu = _in_child(path, i) if args.fork_each else _timed(path, i)
        print(f"| {i} ({path.name}) | {wall:.3f} s | {cpu:.3f} s |")
    if args.top and not args.fork_each and len(files) > 1:
        print(f"\nprofile of a later rank, this process ({files[-1].name}):")
        print(_profile(files[-1], len(files) - 1, args.top))
    if args.top and args.fork_each:
        print(f"\nprofile of a rank in a fresh forked child ({files[0].name}):")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, _profile(files[0], 0, args.top).encode())
            os._exit(0)
        os.close(w)
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        os.waitpid(pid, 0)
        print(b"".join(chunks).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
