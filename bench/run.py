#!/usr/bin/env python3
"""Run the rerunnable CPU benchmarks, write bench/results/latest.json and print one table.

    .venv/bin/python bench/run.py              # every benchmark, full size (~20 min on 2 cores, HTA included)
    .venv/bin/python bench/run.py --quick      # small sizes, no HTA (~4 min): does each still run, roughly how fast
    .venv/bin/python bench/run.py --only agent,trace [--quick] [--out FILE] [--readme]
    .venv/bin/python bench/run.py --readme-only     # the table of latest.json into bench/README.md, nothing run

Each benchmark runs as its own process from the repository root (PYTHONPATH=src), one after the
other, with a time limit. latest.json holds, per benchmark: the command, exit status, wall time,
its own JSON result where it writes one (agent_overhead, watcher_overhead, hta_rank_overlap), the
Markdown tables it printed (parsed into rows) and the last lines of its output. ``--readme``
also rewrites the table between the ``<!-- latest:start -->`` and ``<!-- latest:end -->`` marks of
bench/README.md. A benchmark whose tool is missing (tmux, the HTA venv in --quick) is "skipped",
never failed. The exit status is 1 when any benchmark failed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
README = REPO / "bench" / "README.md"
HTA_VENV = Path("/work/htavenv")
MULTIGPU_RUN = "tests/data/gpu_runs/h200x2-multigpu-run1"     # relative: every benchmark runs from REPO


@dataclass(frozen=True)
class Bench:
    name: str
    script: str                                  # relative to the repository
    measures: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    json_out: str = ""                           # "arg": the JSON is written to a file given after this flag;
    #                                              "line": the last line of stdout is JSON
    needs: Callable[[bool], str] = field(default=lambda quick: "")   # why it cannot run here, or ""
    timeout_s: tuple[int, int] = (1800, 300)     # full, quick


def _needs_tmux(quick: bool) -> str:
    return "" if shutil.which("tmux") else "needs tmux"


def _needs_hta(quick: bool) -> str:
    # The full run makes the venv (PyPI: holistictraceanalysis==0.5.0); --quick never installs anything.
    return "needs the HTA venv (/work/htavenv; a full run makes it)" if quick and not HTA_VENV.exists() else ""


BENCHES: tuple[Bench, ...] = (
    Bench("trace", "bench/trace_bench.py",
          "`analyze` vs Holistic Trace Analysis 0.5.0 per trace of the shared HTA table (wall, CPU, peak RSS, idle %), "
          "import cost, a rank set at --jobs 1 vs all cores, the 1.1 GB synthetic trace (MB per CPU-second)",
          ("--repeat", "3", "--hta-venv", str(HTA_VENV)),
          ("--skip-hta", "--skip-big", "--ranks", "4", "--rank-mb", "0")),
    Bench("agent", "bench/perf/agent_overhead.py",
          "the in-process agent's cost to a training loop: steps/s detached vs attached (ABBA windows), "
          "attach time, per-hook microseconds, a 3-step profile window",
          ("--json",),
          ("--json", "--windows", "5", "--window-s", "1.5", "--micro-steps", "500", "--micro-rounds", "5",
           "--no-profile"),
          json_out="line"),
    Bench("watcher", "bench/watcher_overhead.py",
          "the whole `attach` (agent, py-spy stack windows, readings) on a Python-bound job: attached/detached "
          "step-rate ratio per mode, gpudoctor's own CPU",
          (), ("--modes", "full", "--pairs", "1", "--window-s", "3", "--settle-s", "3", "--warmup-s", "4"),
          json_out="arg"),
    Bench("tui", "bench/perf/tui_dashboard.py",
          "the dashboard in tmux: CPU and RSS at a 1 s refresh, key-press latency with and without a trace "
          "analysed beside it",
          (), ("--seconds", "8", "--presses", "8"), needs=_needs_tmux),
    Bench("rank_alone", "bench/perf/rank_alone_cost.py",
          "one rank analysed alone vs its share of a serial run: each rank's wall and CPU time, "
          "profiled first vs later rank",
          ("--top", "0"), ("--ranks", "2", "--rank-mb", "8", "--top", "0")),
    Bench("hta_overlap", "bench/perf/hta_rank_overlap.py",
          "per-rank comm/compute overlap and communication share, gpudoctor vs HTA 0.5.0, "
          "on the recorded 2×H200 DDP/FSDP traces",
          ("--results", MULTIGPU_RUN, "--hta-venv", str(HTA_VENV)),
          ("--results", MULTIGPU_RUN, "--hta-venv", str(HTA_VENV)),
          json_out="arg", needs=_needs_hta),
)


def markdown_tables(text: str) -> list[dict[str, Any]]:
    """The Markdown tables in a benchmark's output: header, rows (lists of cells) and the line above each."""
    tables: list[dict[str, Any]] = []
    lines = text.splitlines()
    i = 0
    while i + 1 < len(lines):
        head, rule = lines[i].strip(), lines[i + 1].strip()
        if head.startswith("|") and rule.startswith("|") and set(rule) <= set("|-: "):
            cells = [c.strip() for c in head.strip("|").split("|")]
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                rows.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            title = lines[i - 1].strip() if i > 0 else ""
            tables.append({"title": title, "header": cells, "rows": rows})
            i = j
        else:
            i += 1
    return tables


def _mean(xs: Any) -> float | None:
    xs = [x for x in xs or [] if isinstance(x, (int, float))]
    return sum(xs) / len(xs) if xs else None


def headline(name: str, entry: dict[str, Any]) -> str:
    """One line for the printed table: the number a reader of this benchmark looks at first."""
    result, tables = entry.get("json"), entry.get("tables") or []
    if name == "agent" and isinstance(result, dict):
        off, on = _mean(result.get("off_steps_per_s")), _mean(result.get("on_steps_per_s"))
        if off and on:
            return f"attached/detached steps/s {on / off:.3f} ({on:.1f} / {off:.1f})"
    if name == "watcher" and isinstance(result, dict):
        parts = [f"{mode} ratio {m['ratio']:.3f}" for mode, m in result.get("modes", {}).items()
                 if m.get("ratio") is not None]
        if parts:
            return ", ".join(parts)
    if name == "hta_overlap" and isinstance(result, list):
        diffs = [abs(r[k]["diff_pts"]) for r in result for k in r
                 if isinstance(r.get(k), dict) and r[k].get("diff_pts") is not None]
        if diffs:
            return f"largest difference from HTA {max(diffs):.2f} points over {len(result)} rank traces"
    if name == "trace":
        parts = []
        for t in tables:
            h = t["header"]
            if h and h[0] == "trace" and "×" in h:            # the HTA table: gpudoctor's wall-time lead per trace
                x = h.index("×")
                leads = [r[x] for r in t["rows"] if len(r) > x]
                if leads:
                    parts.append(f"vs HTA wall {min(leads)}–{max(leads)} over {len(leads)} traces")
            elif h and h[0] == "ranks" and "speedup" in h:     # a rank set: --jobs N against --jobs 1
                x = h.index("speedup")
                for r in t["rows"]:
                    if len(r) > x and r[1] != "1" and r[x]:
                        parts.append(f"{r[0]} ranks --jobs {r[1]} {r[x]}")
            elif h and h[0] == "tool" and "MB/s per CPU-second" in h:   # the big synthetic trace
                x = h.index("MB/s per CPU-second")
                parts += [f"{r[0]} {r[x]} MB/CPU-s" for r in t["rows"][:1] if len(r) > x]
        if parts:
            return "; ".join(parts)
    if name == "tui":
        keep = []
        for line in entry.get("tail", []):
            cols = re.split(r"\s{2,}", line.strip())
            if line.startswith(("dashboard CPU,", "key latency")) and len(cols) >= 2:
                keep.append(f"{cols[0].replace(' (% of one core)', ' %')} {cols[1]}")
        if keep:
            return "; ".join(keep)
    if name == "rank_alone" and tables and len(tables[0]["rows"]) >= 2:
        rows = tables[0]["rows"]
        return f"first rank {rows[0][1]} wall / {rows[0][2]} CPU, later ranks {rows[-1][1]} / {rows[-1][2]}"
    for t in tables:
        if t["rows"]:
            row = t["rows"][0]
            return "; ".join(f"{h} {c}" for h, c in zip(t["header"], row) if c)[:110]
    tail = [line for line in entry.get("tail", []) if line.strip()]
    return tail[-1][:110] if tail else ""


def run_one(bench: Bench, quick: bool, tmp: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"script": bench.script, "measures": bench.measures}
    why = bench.needs(quick)
    if why:
        return {**entry, "status": "skipped", "why": why}
    argv = [sys.executable, bench.script, *(bench.quick if quick else bench.full)]
    out_json = tmp / f"{bench.name}.json"
    if bench.json_out == "arg":
        argv += ["--json", str(out_json)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    limit = bench.timeout_s[1 if quick else 0]
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=limit,
                              stdin=subprocess.DEVNULL)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    entry.update(command=" ".join(["python", *(a.replace(f"{tmp}/", "$TMP/") for a in argv[1:])]), wall_s=round(time.monotonic() - start, 1), rc=rc,
                 status="ok" if rc == 0 else ("timeout" if rc is None else "failed"))
    result: Any = None
    if bench.json_out == "arg" and out_json.exists():
        result = json.loads(out_json.read_text())
    elif bench.json_out == "line":
        for line in reversed(stdout.strip().splitlines()):
            if line.startswith("{"):
                result = json.loads(line)
                break
    entry["json"] = result
    entry["tables"] = markdown_tables(stdout)
    entry["tail"] = (stdout + ("\n" + stderr if rc != 0 else "")).strip().splitlines()[-40:]
    return entry


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def summary_table(doc: dict[str, Any]) -> str:
    lines = ["| benchmark | status | wall | headline |", "|---|---|---:|---|"]
    for name, e in doc["benchmarks"].items():
        wall = f"{e['wall_s']:.0f} s" if "wall_s" in e else ""
        text = e.get("why") or headline(name, e)
        lines.append(f"| {name} | {e['status']} | {wall} | {text.replace('|', '/')} |")
    return "\n".join(lines)


def update_readme(doc: dict[str, Any], table: str) -> None:
    text = README.read_text()
    start, end = "<!-- latest:start -->", "<!-- latest:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"{README} has no {start} … {end} marks")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    m = doc["machine"]
    note = (f"{doc['date']}, commit {doc['commit']}{' (uncommitted changes)' if doc['dirty'] else ''}, "
            f"{'--quick' if doc['quick'] else 'full run'}, {m['cpus']} CPUs ({m['cpu']}), "
            f"load {m['load_start']} at start")
    README.write_text(f"{head}{start}\n{note}:\n\n{table}\n{end}{tail}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, no HTA: minutes, for a smoke check")
    p.add_argument("--only", default="", help="comma-separated benchmark names: " + ",".join(b.name for b in BENCHES))
    p.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    p.add_argument("--readme", action="store_true", help="also rewrite the latest table in bench/README.md")
    p.add_argument("--list", action="store_true", help="print the benchmarks and what each measures")
    p.add_argument("--readme-only", action="store_true",
                   help="run nothing: print the table of --out and rewrite bench/README.md's from it")
    args = p.parse_args(argv)
    if args.readme_only:
        doc = json.loads(args.out.read_text())
        print(summary_table(doc))
        update_readme(doc, summary_table(doc))
        return 0
    if args.list:
        for b in BENCHES:
            print(f"{b.name:<12} {b.script:<32} {b.measures}")
        return 0
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {b.name for b in BENCHES})
    if unknown:
        p.error(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(b.name for b in BENCHES)})")
    chosen = [b for b in BENCHES if not names or b.name in names]
    doc: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", "src", "rules", "bench")),
        "quick": args.quick,
        "machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(), "python": platform.python_version(),
                    "load_start": " ".join(f"{x:.1f}" for x in os.getloadavg())},
        "benchmarks": {}}
    with tempfile.TemporaryDirectory(prefix="gd_bench_") as tmp:
        for bench in chosen:
            print(f"{bench.name}: {bench.script} …", file=sys.stderr, flush=True)
            doc["benchmarks"][bench.name] = entry = run_one(bench, args.quick, Path(tmp))
            print(f"{bench.name}: {entry['status']} {entry.get('wall_s', '')}", file=sys.stderr, flush=True)
    doc["machine"]["load_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    table = summary_table(doc)
    print(table)
    print(f"\n{args.out} ({'quick' if args.quick else 'full'}; per benchmark: command, status, JSON, tables)")
    if args.readme:
        update_readme(doc, table)
    return 1 if any(e["status"] in ("failed", "timeout") for e in doc["benchmarks"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
