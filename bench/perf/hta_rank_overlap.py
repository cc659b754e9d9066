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

    .venv/bin/python bench/perf/hta_rank_overlap.py TRACE_DIR_OR_FILE ... [--json out.json]
    # after the GPU run: the validation's results folder (its $OUT), and refresh docs/validation.md's
    # "Multi-GPU (NCCL)" section (between <!-- multigpu:start --> and <!-- multigpu:end -->):
    .venv/bin/python bench/perf/hta_rank_overlap.py --results tests/data/gpu_runs/h200x2-multigpu --update-docs
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
DOCS = Path(__file__).resolve().parents[2] / "docs" / "validation.md"
START, END = "<!-- multigpu:start -->", "<!-- multigpu:end -->"
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
        row: dict[str, Any] = {"trace": f"{f.parent.name}/{f.name.split('.')[0]}", "rank": ours["rank"],
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


def docs_section(results_dir: Path, rows: list[dict[str, Any]], worst: float | None) -> str:
    """The "Multi-GPU (NCCL)" section: the validation's own fragment, then this cross-check."""
    fragment = (results_dir / "multigpu.md").read_text().strip() if (results_dir / "multigpu.md").exists() else \
        "(no multigpu.md in the results folder)"
    return "\n".join([
        START, "## Multi-GPU (NCCL)", "",
        "Generated by `bench/perf/hta_rank_overlap.py --results " + str(results_dir) + " --update-docs` from the output of "
        "`python3 bench/validation/multigpu_validation.py` (2×H200, NCCL, `NCCL_NVLS_ENABLE=0`; "
        "`bench/validation/dist_job.py`: GPT 8×1024, seq 1024, bf16 autocast, fused AdamW, 2 pinned loader workers per "
        "rank; rank 1 slowed by extra matmuls (+50% of the healthy step) or by a slow dataset (its loader delivers "
        "a batch per 2× the healthy step)). DDP: a plain `torchrun` (no gpudoctor in it) and `gpudoctor attach "
        "<torchrun pid> --duration 18|26 --profile 5 --format json`, which injects an agent into each rank (its DDP "
        "comm hook measures the collective wait), profiles every rank at once and detaches at the end; FSDP "
        "(`fully_shard`): "
        "`gpudoctor run --duration … --format json -- torchrun …`. *job step ms* = mean of the ranks' own CUDA-event "
        "step times while watched; *Ranks table* = the report's per-rank rows.", "",
        fragment, "",
        "Profile window of every rank (steps 20–25 of the healthy runs) — gpudoctor vs HTA 0.5.0 on the same "
        "traces, each rank alone (`get_comm_comp_overlap`; `get_gpu_kernel_breakdown` kernel-type table: "
        "communication running / any kernel running, and communication alone):", "",
        markdown_table(rows) if rows else "(no traces)", "",
        f"Largest difference: {_num(worst)} points over {len(rows)} rank traces.", END])


def update_docs(section: str, docs: Path = DOCS) -> None:
    """Replace the section between the markers, or append it at the end of the file."""
    text = docs.read_text() if docs.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    docs.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="trace files or directories of per-rank traces")
    parser.add_argument("--results", type=Path, default=None,
                        help="the validation's output folder: its traces/<strategy>/ are compared")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/validation.md's multigpu section")
    parser.add_argument("--hta-venv", type=Path, default=Path("/tmp/htavenv"))
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    paths = list(args.paths)
    if args.results is not None:
        paths += [str(d) for d in sorted((args.results / "traces").glob("*")) if d.is_dir() and any(d.iterdir())]
    if not paths:
        parser.error("give trace paths or --results DIR (with traces/<strategy>/ inside)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: trace_bench
    from trace_bench import ensure_hta_venv

    rows = compare(paths, ensure_hta_venv(args.hta_venv))
    print(markdown_table(rows))
    worst = max((abs(r[k]["diff_pts"]) for r in rows for k, _ in METRICS if r[k]["diff_pts"] is not None),
                default=None)
    print(f"\nlargest difference: {_num(worst)} points over {len(rows)} rank traces")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.update_docs:
        if args.results is None:
            parser.error("--update-docs needs --results DIR")
        update_docs(docs_section(args.results, rows, worst))
        print(f"updated {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
