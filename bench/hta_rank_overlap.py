"""Per-rank comm/compute overlap and communication share: gpudoctor vs HTA 0.5.0 on the same traces.

Why this exists: the multi-GPU validation brings back a torch.profiler window of every rank (DDP and
FSDP over NCCL, ``$OUT/traces/<strategy>/rank<r>.pt.trace.json.gz``). gpudoctor claims to compute
comm/compute overlap with HTA's definition and reports the communication share of GPU kernel time
(``comm_kernel_share_pct``, :mod:`gpudoctor.trace.comm`); this script checks both against HTA's own
``get_comm_comp_overlap()`` and ``get_gpu_kernel_breakdown()`` (kernel-type table) on each rank's
trace, and prints them side by side with the difference in percentage points. HTA pools its kernel
type table over all ranks of a directory, so every rank is given to HTA alone (a directory holding
a link to that one file).

It runs here, not on the GPU machine: HTA lives in its own venv (``--hta-venv``, default
/tmp/htavenv; see bench/trace_bench.py for how it is made). gpudoctor's numbers come from this
checkout, in this process.

Usage::

    .venv/bin/python bench/hta_rank_overlap.py bench/results/h200x2-multigpu/traces/ddp \\
        bench/results/h200x2-multigpu/traces/fsdp [--json out.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpudoctor.trace.comm import comm_share_metrics
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import find_trace_files, load_trace

HTA_TIMEOUT_S = 900
#: Run in the HTA venv: argv = trace directories (one rank each); prints one JSON list.
HTA_SNIPPET = """
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
out = []
for d in sys.argv[1:]:
    analysis = TraceAnalysis(trace_dir=d)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    types, _ = analysis.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    sums = {str(k): float(v) for k, v in zip(types["kernel_type"], types["sum"])}
    busy = sum(sums.values())
    comm = sum(v for k, v in sums.items() if "COMMUNICATION" in k)
    out.append({"dir": d, "overlap_pct": float(overlap["comp_comm_overlap_pctg"].iloc[0]),
                "comm_kernel_share_pct": 100.0 * comm / busy if busy else None,
                "comm_only_kernel_share_pct": 100.0 * sums.get("COMMUNICATION", 0.0) / busy if busy else None,
                "kernel_types_us": sums})
print(json.dumps(out))
"""

METRICS = (("overlap_pct", "comm/compute overlap %"), ("comm_kernel_share_pct", "comm share of kernel time %"),
           ("comm_only_kernel_share_pct", "comm alone share %"))


def gpudoctor_numbers(path: Path) -> dict[str, Any]:
    """gpudoctor's figures for one rank's trace."""
    trace = load_trace(path)
    values = compute_rank_metrics(trace).values
    share = comm_share_metrics(trace.events)
    return {"rank": trace.rank, "overlap_pct": values.get("overlap_pct"), "comm_pct": values.get("comm_pct"),
            **share}


def hta_numbers(files: list[Path], hta_python: Path) -> list[dict[str, Any]]:
    """HTA's figures, one rank (one file, alone in a directory) at a time, in one HTA process."""
    with tempfile.TemporaryDirectory(prefix="hta-ranks-") as tmp:
        dirs = []
        for i, f in enumerate(files):
            d = Path(tmp) / f"t{i}"
            d.mkdir()
            (d / f.name).symlink_to(f.resolve())
            dirs.append(str(d))
        proc = subprocess.run([str(hta_python), "-c", HTA_SNIPPET, *dirs], capture_output=True, text=True,
                              timeout=HTA_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"HTA failed: {proc.stderr.strip()[-800:]}")
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def compare(paths: list[str], hta_python: Path) -> list[dict[str, Any]]:
    """One row per rank trace under ``paths``: gpudoctor's and HTA's numbers and their differences."""
    files = [Path(f) for f in find_trace_files(paths)]
    if not files:
        raise SystemExit(f"no trace files under {', '.join(paths)}")
    hta = hta_numbers(files, hta_python)
    rows = []
    for f, theirs in zip(files, hta):
        ours = gpudoctor_numbers(f)
        row: dict[str, Any] = {"trace": f"{f.parent.name}/{f.name}", "rank": ours["rank"],
                               "comm_pct_of_timeline": ours.get("comm_pct"), "hta_kernel_types_us": theirs["kernel_types_us"]}
        for key, _ in METRICS:
            a, b = ours.get(key), theirs.get(key)
            row[key] = {"gpudoctor": a, "hta": b,
                        "diff_pts": round(a - b, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float))
                        else None}
        rows.append(row)
    return rows


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table (gpudoctor / HTA / difference in points per metric)."""
    head = "| trace | rank | " + " | ".join(f"{label}: gpudoctor / HTA (Δ pts)" for _, label in METRICS) + " |"
    lines = [head, "|---|---|" + "---|" * len(METRICS)]
    for r in rows:
        cells = [f"{_num(r[k]['gpudoctor'])} / {_num(r[k]['hta'])} ({_num(r[k]['diff_pts'])})" for k, _ in METRICS]
        lines.append(f"| {r['trace']} | {r['rank']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="trace files or directories of per-rank traces")
    parser.add_argument("--hta-venv", type=Path, default=Path("/tmp/htavenv"))
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from trace_bench import ensure_hta_venv

    rows = compare(args.paths, ensure_hta_venv(args.hta_venv))
    print(markdown_table(rows))
    worst = max((abs(r[k]["diff_pts"]) for r in rows for k, _ in METRICS if r[k]["diff_pts"] is not None),
                default=None)
    print(f"\nlargest difference: {_num(worst)} points over {len(rows)} rank traces")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
