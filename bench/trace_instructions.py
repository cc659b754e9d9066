"""Instructions (not seconds) that reading one trace and computing its metrics take, per source tree.

Why this exists: on the shared 2-core development machine the CPU time of one process moves by ±30%
from run to run (other engineers' work, the VM), so a change of 5–10% in the per-event work cannot be
read from timings alone. cachegrind's instruction count (``--cache-sim=no``) is the same every run:
it measures what the code does, not what the machine did meanwhile (it misses cache and allocation
costs, so read it beside ``trace_bench.py --against``, never instead of it).

    .venv/bin/python bench/trace_instructions.py TRACE [--against REV ...]

prints, for the working tree and each REV (``git archive`` of its ``src``), the instructions of
``load_trace`` and of ``analyze_rank`` after it (the metrics), in millions. Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_RUN = """
import sys
sys.path.insert(0, sys.argv[1])
from gpudoctor.trace.analysis import analyze_rank
from gpudoctor.trace.reader import load_trace
trace = load_trace(sys.argv[2])
if sys.argv[3] == "metrics":
    analyze_rank(trace)
"""


def _instructions(src: Path, trace: str, what: str) -> int:
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", _RUN, str(src), trace, what],
                         capture_output=True, text=True, check=True).stderr
    m = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output: {out[-300:]}")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--against", action="append", default=[], metavar="REV")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind).", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("working tree", ROOT / "src")]
        for rev in args.against:
            dest = Path(tmp) / rev
            dest.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
            trees.append((rev, dest / "src"))
        for label, src in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)  # as installed
            read = _instructions(src, args.trace, "read")
            both = _instructions(src, args.trace, "metrics")
            print(f"{label}: read {read / 1e6:.0f} M instructions, metrics {(both - read) / 1e6:.0f} M")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
