"""Open the dashboard on a recorded session (for the tmux tests, the benchmark and by hand).

Usage: ``python tests/tui/replay.py [input_bound|fp32] [--refresh-s 1.0] [--parse-trace PATH]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recorded import FakeSession, session_snapshots

from gpudoctor.tui.app import run_dashboard


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", nargs="?", default="input_bound", choices=["input_bound", "fp32"])
    parser.add_argument("--refresh-s", type=float, default=1.0)
    parser.add_argument("--parse-trace", type=Path, default=None)
    parser.add_argument("--export-dir", type=Path, default=None)
    args = parser.parse_args()
    session = FakeSession(session_snapshots(args.workload), loop=True, history_len=6, workload=args.workload,
                          parse_trace=args.parse_trace)
    return run_dashboard(session, refresh_s=args.refresh_s, export_dir=args.export_dir)


if __name__ == "__main__":
    sys.exit(main())
