"""Open the dashboard on a recorded session (for the tmux tests, the benchmark and by hand).

Usage: ``python tests/tui/replay.py [input_bound|fp32] [--refresh-s 1.0] [--profiled]
[--parse-trace-loop PATH]``. ``--parse-trace-loop`` keeps the real trace analyzer busy on PATH in a
background thread (what the live session does after ``p``), to measure key latency under that load;
each finished parse appends a line to ``--parse-log``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recorded import FakeSession, profiled_session, session_snapshots

from gpudoctor.tui.app import run_dashboard


def parse_forever(path: Path, log: Path | None, stop: threading.Event) -> None:
    from gpudoctor.catalog import load_catalog
    from gpudoctor.live.session import analyze_trace

    catalog = load_catalog()
    while not stop.is_set():
        started = time.monotonic()
        findings, note = analyze_trace(str(path), catalog, {})
        if log is not None:
            with log.open("a") as out:
                out.write(f"{time.time():.3f} {time.monotonic() - started:.3f}s {len(findings)} findings {note or ''}\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", nargs="?", default="input_bound", choices=["input_bound", "fp32"])
    parser.add_argument("--refresh-s", type=float, default=1.0)
    parser.add_argument("--profiled", action="store_true", help="start with a finished profile's findings")
    parser.add_argument("--parse-trace-loop", type=Path, default=None)
    parser.add_argument("--parse-log", type=Path, default=None)
    parser.add_argument("--export-dir", type=Path, default=None)
    args = parser.parse_args()
    if args.profiled:
        session = profiled_session(args.workload)
    else:
        session = FakeSession(session_snapshots(args.workload), loop=True, history_len=6, workload=args.workload)
    stop = threading.Event()
    if args.parse_trace_loop is not None:
        threading.Thread(target=parse_forever, args=(args.parse_trace_loop, args.parse_log, stop),
                         daemon=True).start()
    try:
        return run_dashboard(session, refresh_s=args.refresh_s, export_dir=args.export_dir)
    finally:
        stop.set()


if __name__ == "__main__":
    sys.exit(main())
