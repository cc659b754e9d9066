"""Why one rank analysed alone takes longer than its share of a serial run: first rank vs later ones.

Why this exists: on the 16-core H200 host a 67 MB rank analysed alone took 1.47 s while 16 of them
one after another took 0.74 s each, and the parallel run (one rank per worker) can be no faster
than a rank alone (docs/bench-history.md, "Many ranks"). Process start-up is ~0.15 s of that; the rest is
unexplained. This script reads a rank set in one process, rank after rank, through the workers' own
function (:func:`gpudoctor.trace.analysis.analyze_rank_file`), and prints each rank's wall and CPU
time, then profiles the first rank and a later one (cProfile, top functions by own time) so the
difference has names. ``--fork-each`` instead analyses every rank in a freshly forked child of a
process that has imported everything — what a ``--jobs N`` worker does.

    python3 bench/perf/rank_alone_cost.py --ranks 4 --rank-mb 67           # writes the set under /tmp
    python3 bench/perf/rank_alone_cost.py --dir /tmp/ranks --fork-each
    python3 bench/perf/rank_alone_cost.py --dir /tmp/ranks --concurrent 16 --top 0
    python3 bench/perf/rank_alone_cost.py --dir /tmp/ranks --fork-each --bare-parent --top 0
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE.parent))  # bench/: trace_synth

from trace_synth import DEFAULT_SOURCE, write_rank_set  # noqa: E402


def _analyzer():  # imported late: --bare-parent forks before gpudoctor is imported
    from gpudoctor.trace.analysis import analyze_rank_file

    return analyze_rank_file


def _timed(path: Path, position: int) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and minor page faults of analysing one rank here."""
    analyze_rank_file = _analyzer()  # (a child of a bare parent imports here, before the clock starts)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = time.perf_counter(), time.process_time()
    result = analyze_rank_file(str(path), position)
    if isinstance(result, Exception):
        raise SystemExit(f"{path}: {result}")
    return (time.perf_counter() - wall, time.process_time() - cpu,
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)


def _in_children(jobs: list[tuple[Path, int]]) -> list[tuple[float, float, int]]:
    """Analyse each (path, position) in its own forked child, all started together; their times."""
    go_r, go_w = os.pipe()
    children = []
    for path, position in jobs:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(go_w)
            os.read(go_r, 1)
            wall, cpu, faults = _timed(path, position)
            os.write(w, f"{wall} {cpu} {faults}".encode())
            os._exit(0)
        os.close(w)
        children.append((pid, r))
    os.close(go_r)
    time.sleep(0.2)  # every child forked and waiting
    os.write(go_w, b"g" * len(jobs))
    os.close(go_w)
    times = []
    for pid, r in children:
        data = os.read(r, 200).decode().split()
        os.close(r)
        os.waitpid(pid, 0)
        times.append((float(data[0]), float(data[1]), int(data[2])))
    return times


def _profile(path: Path, position: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    _analyzer()(str(path), position)
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
    ap.add_argument("--fork-each", action="store_true", help="each rank in a fresh forked child, one at a time")
    ap.add_argument("--concurrent", type=int, default=0,
                    help="instead: this many forked children at once, child i analysing rank i mod the set")
    ap.add_argument("--bare-parent", action="store_true",
                    help="with --fork-each/--concurrent: fork before importing gpudoctor, so a child writes "
                         "to no page it shares with the parent's imports (each child imports it, untimed)")
    ap.add_argument("--top", type=int, default=18, help="profile lines per rank (0: no profile)")
    args = ap.parse_args()
    folder = args.dir
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="gd-ranks-"))
        write_rank_set(args.source, folder, args.ranks, rank_mb=args.rank_mb, processes=os.cpu_count() or 1)
    if args.bare_parent:
        files = sorted(p for p in folder.iterdir() if ".json" in p.name)
    else:
        from gpudoctor.trace.reader import find_trace_files

        files = find_trace_files([folder])
    size = sum(f.stat().st_size for f in files) / len(files) / 1e6
    mode = (f"{args.concurrent} forked children at once" if args.concurrent else
            "each in a fresh forked child" if args.fork_each else "one process, rank after rank")
    if args.bare_parent:
        mode += " of a parent that has not imported gpudoctor"
    print(f"{len(files)} rank traces in {folder} ({size:.1f} MB each); load {os.getloadavg()[0]:.2f}; {mode}")
    print("| rank | wall | CPU | minor page faults |\n|---|---|---|---|")
    if args.concurrent:
        jobs = [(files[i % len(files)], i % len(files)) for i in range(args.concurrent)]
        rows = list(zip(jobs, _in_children(jobs)))
    else:
        rows = [((path, i), _in_children([(path, i)])[0] if args.fork_each else _timed(path, i))
                for i, path in enumerate(files)]
    for (path, i), (wall, cpu, faults) in rows:
        print(f"| {i} ({path.name}) | {wall:.3f} s | {cpu:.3f} s | {faults} |")
    if args.top and not args.fork_each and not args.concurrent and len(files) > 1:
        print(f"\nprofile of a later rank, this process ({files[-1].name}):")
        print(_profile(files[-1], len(files) - 1, args.top))
    if args.top and args.fork_each and not args.concurrent:
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
