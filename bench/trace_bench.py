"""gpudoctor ``analyze`` against Holistic Trace Analysis 0.5.0, whole process, side by side in one run.

Why this exists: issue 14's goals are measured here, on this machine, in one run, with the load
average printed beside every table (the development machine is shared: a loaded machine slows both
tools, and the ratios are what to read):

1. every trace of ../shared/traces/README.md's HTA table (df_index_resolver, the largest, among them):
   ``gpudoctor analyze <trace> --format json`` vs a script running HTA's ``TraceAnalysis`` plus its
   temporal, idle-time and kernel breakdowns — each a fresh process, timed from spawn to exit: wall
   time, CPU time and peak RSS of the child (``os.wait4``), and idle % of both as a sanity check;
2. what importing the CLI costs (``python -X importtime``), and that rich / textual / torch stay out;
3. a directory of 16 rank traces (a real trace's steps, shifted per rank): ``--jobs 1`` vs
   ``--jobs <cores>``, results compared for identity;
4. the ≥ 1 GB synthetic trace (bench/trace_synth.py, in /tmp, never committed): MB of JSON per
   CPU-second of all processes and threads, and peak RSS ÷ JSON size;
5. with ``--against REV``: that git revision's gpudoctor against the working tree, run for run, on
   df_index_resolver, the rank set and the big trace — what changed, whatever the load.

HTA lives in its own venv (``--hta-venv``, default /work/htavenv), made when missing:
``python3 -m venv V && V/bin/pip install --no-deps holistictraceanalysis==0.5.0 && V/bin/pip install
'pandas<3' numpy plotly networkx psutil pyyaml``.

Usage: .venv/bin/python bench/trace_bench.py [--repeat 3] [--skip-big] [--skip-ranks] [--big-mb 1100] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_synth import DEFAULT_SOURCE  # noqa: E402

# The traces of traces/README.md's HTA table.
CASES = [
    ("df_index_resolver", "public/hta/df_index_resolver/df_index_resolver.json.gz"),
    ("ns_resolution", "public/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"),
    ("negative_queue_length", "public/hta/negative_queue_length_values_check/rank0.json.gz"),
    ("nccl_parser_config", "public/hta/nccl_parser_config/nccl_data.json.gz"),
    ("trace_filter (2 ranks)", "public/hta/trace_filter"),
    ("trace_diff control", "public/hta/trace_diff/control/control.json.gz"),
    ("trace_diff test", "public/hta/trace_diff/test/test.json.gz"),
    ("tb_plugin nw=0", "public/tb_plugin_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"),
    ("tb_plugin nw=4", "public/tb_plugin_resnet50/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"),
]

HTA_SCRIPT = """
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(analysis.t.traces)
temporal = analysis.get_temporal_breakdown(visualize=False)
analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
print(json.dumps({"idle": [float(v) for v in temporal.sort_values("rank")["idle_time_pctg"]]}))
"""



def _pythonpath(src: Path) -> str:
    """``src`` first, then whatever PYTHONPATH already holds (where msgspec & co. live on the GPU host)."""
    return os.pathsep.join([str(src), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])

def ensure_hta_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import hta, pandas"], capture_output=True).returncode == 0:
        return python
    print(f"creating the HTA venv in {venv} …", file=sys.stderr)
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q"]
    subprocess.run([*pip, "--no-deps", "holistictraceanalysis==0.5.0"], check=True)
    subprocess.run([*pip, "pandas<3", "numpy", "plotly", "networkx", "psutil", "pyyaml"], check=True)
    return python


def run_child(argv: list[str], cwd: Path | None = None, src: Path = REPO / "src") -> dict[str, Any]:
    """Spawn, wait, and measure one process: wall s, CPU s (user+sys, all threads), peak RSS bytes, stdout.

    Peak RSS is ``ru_maxrss`` from ``os.wait4``: the child's (or its largest reaped child's). Linux keeps
    ``ru_maxrss`` across exec, so it is at least this process's RSS at the fork — which is why this
    process never loads a trace itself (sizes are counted in blocks, traces generated in children).
    """
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd,
                                env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": _pythonpath(src)})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{argv[:4]} exited {code}: {stderr.strip()[-600:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024,
            "stdout": stdout}


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The least disturbed of the repeats: the fastest wall and CPU times; the largest peak RSS."""
    out = dict(runs[0])
    out["wall_s"] = min(r["wall_s"] for r in runs)
    out["cpu_s"] = min(r["cpu_s"] for r in runs)
    out["rss"] = max(r["rss"] for r in runs)
    return out


def json_size(target: Path) -> int:
    """Bytes of JSON (inflated), counted in blocks: this process must stay small (see :func:`run_child`)."""
    import gzip

    files = sorted(target.iterdir()) if target.is_dir() else [target]
    total = 0
    for f in files:
        if f.suffix != ".gz":
            total += f.stat().st_size
            continue
        with gzip.open(f, "rb") as fh:
            while block := fh.read(1 << 20):
                total += len(block)
    return total


def in_child(code: str) -> None:
    """Run trace generation in a child, so that this process's RSS stays small."""
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); {code}"],
                   check=True, env={**os.environ, "PYTHONPATH": _pythonpath(REPO / "src")})


def hta_dir(target: Path, tmp: Path) -> Path:
    """HTA reads a directory: a single file gets a directory of its own (a symlink)."""
    if target.is_dir():
        return target
    d = tmp / target.name.replace(".", "_")
    d.mkdir(exist_ok=True)
    (d / target.name).symlink_to(target)
    return d


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def compare_with_hta(hta_python: Path, repeat: int, only: str = "") -> list[str]:
    rows = [f"load average (1/5/15 min) at start: {load()}, cores: {os.cpu_count()}", "",
            "| trace | JSON | wall gpudoctor / HTA | × | CPU gpudoctor / HTA | × | peak RSS gpudoctor / HTA | ratio "
            "| idle % gpudoctor vs HTA |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    with tempfile.TemporaryDirectory(prefix="gd_bench_") as tmp_name:
        tmp = Path(tmp_name)
        for label, rel in CASES:
            if only and only not in label:
                continue
            target = TRACES / rel
            if not target.exists():
                rows.append(f"| {label} | missing | | | | | | | |")
                continue
            gd_argv = [sys.executable, "-m", "gpudoctor", "analyze", str(target), "--format", "json", "--jobs", "1"]
            hta_argv = [str(hta_python), "-c", HTA_SCRIPT, str(hta_dir(target, tmp))]
            gd_runs, hta_runs = [], []
            for _ in range(repeat):  # interleaved, so that both see the same load
                gd_runs.append(run_child(gd_argv))
                hta_runs.append(run_child(hta_argv))
            gd, hta = best(gd_runs), best(hta_runs)
            gd_idle = [r.get("idle_pct") for r in sorted(json.loads(gd["stdout"])["ranks"], key=lambda r: r["rank"])]
            hta_idle = json.loads(hta["stdout"].strip().splitlines()[-1])["idle"]
            idle = " / ".join(f"{a:.2f}" for a in gd_idle) + " vs " + " / ".join(f"{b:.2f}" for b in hta_idle)
            rows.append(f"| {label} | {json_size(target) / 1e6:.1f} MB "
                        f"| {gd['wall_s']:.2f} / {hta['wall_s']:.2f} s | {hta['wall_s'] / gd['wall_s']:.1f}× "
                        f"| {gd['cpu_s']:.2f} / {hta['cpu_s']:.2f} s | {hta['cpu_s'] / gd['cpu_s']:.1f}× "
                        f"| {gd['rss'] / 1e6:.0f} / {hta['rss'] / 1e6:.0f} MB | {gd['rss'] / hta['rss']:.2f} | {idle} |")
            print(rows[-1], flush=True)
    rows.append(f"\nload average at end: {load()}")
    print(rows[-1], flush=True)
    return rows


def import_cost() -> list[str]:
    """``python -X importtime -m gpudoctor analyze --help``: the CLI's import bill, and what stays out."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import sys; sys.argv = ['gpudoctor', 'analyze', '--help']\n"
                           "from gpudoctor.cli import main\n"
                           "import contextlib, io\n"
                           "with contextlib.redirect_stdout(io.StringIO()):\n"
                           "    try: main(['analyze', '--help'])\n"
                           "    except SystemExit: pass\n"
                           "print(sorted(m for m in ('rich', 'textual', 'torch', 'pandas', 'numpy', 'gpudoctor.live.session')"
                           " if m in sys.modules))"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": _pythonpath(REPO / "src")})
    modules = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            modules.append((int(m.group(1)), int(m.group(2)), len(m.group(3)), m.group(4)))
    total_ms = sum(self_us for self_us, _, _, _ in modules) / 1000.0
    top = sorted((m for m in modules if m[2] == 1), key=lambda m: -m[1])[:5]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", "--help"], capture_output=True,
                   env={**os.environ, "PYTHONPATH": _pythonpath(REPO / "src")})
    rows = [f"CLI imports for `analyze`: {total_ms:.0f} ms of import time ({len(modules)} modules); "
            f"`gpudoctor analyze --help` whole process {1000 * (time.perf_counter() - started):.0f} ms; "
            f"heavy modules loaded: {proc.stdout.strip() or '?'}",
            "largest top-level imports: " + ", ".join(f"{name} {cum / 1000:.0f} ms" for _, cum, _, name in top)]
    print("\n".join(rows), flush=True)
    return rows


def parallel_ranks(ranks: int, jobs: int, source: Path = DEFAULT_SOURCE, repeat: int = 1) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="gd_ranks_") as tmp:
        folder = Path(tmp) / "ranks"
        in_child(f"from pathlib import Path; from trace_synth import write_rank_set; "
                 f"write_rank_set(Path({str(source)!r}), Path({str(folder)!r}), {ranks}, gzip_level=1)")
        size = sum(json_size(p) for p in folder.iterdir())
        print(f"\n{ranks} rank traces of {source.name}, {size / 1e6:.0f} MB of JSON; load average {load()}",
              flush=True)
        argv = [sys.executable, "-m", "gpudoctor", "analyze", str(folder), "--format", "json"]
        serial_runs, parallel_runs = [], []
        for _ in range(repeat):  # interleaved, so that both see the same load
            serial_runs.append(run_child([*argv, "--jobs", "1"]))
            parallel_runs.append(run_child([*argv, "--jobs", str(jobs)]))
        serial, parallel = best(serial_runs), best(parallel_runs)
        same = _without_time(serial["stdout"]) == _without_time(parallel["stdout"])
    speedup = serial["wall_s"] / parallel["wall_s"]
    rows = ["| ranks | --jobs | wall | CPU (all processes) | peak RSS (largest process) | speedup | goal 0.8 × cores |",
            "|---|---|---|---|---|---|---|",
            f"| {ranks} | 1 | {serial['wall_s']:.2f} s | {serial['cpu_s']:.2f} s | {serial['rss'] / 1e6:.0f} MB | | |",
            f"| {ranks} | {jobs} | {parallel['wall_s']:.2f} s | {parallel['cpu_s']:.2f} s | {parallel['rss'] / 1e6:.0f} MB "
            f"| {speedup:.2f}× | {0.8 * jobs:.1f}× |",
            f"reports identical: {same}; load average after: {load()}"]
    print("\n".join(rows), flush=True)
    return rows


def _without_time(text: str) -> Any:
    doc = json.loads(text)
    doc.pop("elapsed_s", None)
    for f in doc.get("findings", []):
        f.pop("timestamp", None)
    return doc


def big_trace(size_mb: float, hta_python: Path | None) -> list[str]:
    path = Path("/tmp/gpudoctor_synth.json")
    if not path.exists() or path.stat().st_size < size_mb * 1e6 * 0.95:
        in_child(f"from trace_synth import DEFAULT_SOURCE, write_synthetic; "
                 f"write_synthetic(DEFAULT_SOURCE, __import__('pathlib').Path({str(path)!r}), {size_mb})")
    size = path.stat().st_size
    print(f"\nsynthetic trace {size / 1e6:.0f} MB; load average {load()}", flush=True)
    rows = ["| tool | wall | CPU (all threads) | MB/s per CPU-second | goal | peak RSS | RSS / JSON | goal |",
            "|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    gd = run_child([sys.executable, "-m", "gpudoctor", "analyze", str(path), "--format", "json", "--jobs", "1"])
    rows.append(f"| gpudoctor | {gd['wall_s']:.1f} s | {gd['cpu_s']:.1f} s | {size / 1e6 / gd['cpu_s']:.0f} | ≥ 200 "
                f"| {gd['rss'] / 1e6:.0f} MB | {gd['rss'] / size:.2f}× | ≤ 1.5× |")
    print(rows[-1], flush=True)
    if hta_python is not None:
        with tempfile.TemporaryDirectory(prefix="gd_bench_") as tmp:
            hta = run_child([str(hta_python), "-c", HTA_SCRIPT, str(hta_dir(path, Path(tmp)))])
        rows.append(f"| HTA 0.5.0 | {hta['wall_s']:.1f} s | {hta['cpu_s']:.1f} s | {size / 1e6 / hta['cpu_s']:.0f} | "
                    f"| {hta['rss'] / 1e6:.0f} MB | {hta['rss'] / size:.2f}× | |")
        print(rows[-1], flush=True)
    rows.append(f"load average after: {load()}")
    print(rows[-1], flush=True)
    return rows


def against_revision(rev: str, repeat: int, jobs: int) -> list[str]:
    """gpudoctor of git revision ``rev`` (its ``src`` and ``rules``, byte-compiled) against the working tree,
    interleaved run by run, on df_index_resolver, the 16-rank set (``--jobs`` = the usable cores) and the
    big synthetic trace when present: the same load for both, so the ratio is what changed."""
    targets = [("df_index_resolver", TRACES / CASES[0][1], "1")]
    with tempfile.TemporaryDirectory(prefix="gd_rev_") as tmp_name:
        tmp = Path(tmp_name)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src", "rules"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tmp / "src" / "gpudoctor")], check=True,
                       stdout=subprocess.DEVNULL)
        ranks = tmp / "ranks"
        in_child(f"from pathlib import Path; from trace_synth import write_rank_set; "
                 f"write_rank_set(Path({str(DEFAULT_SOURCE)!r}), Path({str(ranks)!r}), 16, gzip_level=1)")
        targets.append(("16 ranks", ranks, str(jobs)))
        big = Path("/tmp/gpudoctor_synth.json")
        if big.exists():
            targets.append((f"synthetic {big.stat().st_size / 1e6:.0f} MB", big, "1"))
        rows = [f"\n{rev} against the working tree, interleaved; load average {load()}",
                "| input | --jobs | wall then / now | CPU then / now | CPU saved | peak RSS then / now |",
                "|---|---|---|---|---|---|"]
        print("\n".join(rows), flush=True)
        for label, target, jobs_arg in targets:
            argv = ["-m", "gpudoctor", "analyze", str(target), "--format", "json", "--jobs", jobs_arg]
            then_runs, now_runs = [], []
            for _ in range(1 if target == big else repeat):
                then_runs.append(run_child([sys.executable, *argv], src=tmp / "src"))
                now_runs.append(run_child([sys.executable, *argv]))
            then, now = best(then_runs), best(now_runs)
            rows.append(f"| {label} | {jobs_arg} | {then['wall_s']:.2f} / {now['wall_s']:.2f} s "
                        f"| {then['cpu_s']:.2f} / {now['cpu_s']:.2f} s | {100 * (1 - now['cpu_s'] / then['cpu_s']):.0f}% "
                        f"| {then['rss'] / 1e6:.0f} / {now['rss'] / 1e6:.0f} MB |")
            print(rows[-1], flush=True)
    rows.append(f"load average after: {load()}")
    print(rows[-1], flush=True)
    return rows


def prepare() -> list[str]:
    """What a user's installed gpudoctor has: byte-compiled modules and, after its first run, the rule cache.

    A wheel install byte-compiles its modules (pip does, as it did HTA's); this checkout runs from
    ``src/`` and, with ``PYTHONDONTWRITEBYTECODE`` set (it is on the development machine), would
    recompile every gpudoctor module on every run (~0.1 s). The parsed rule catalog is cached after
    the first run (:mod:`gpudoctor.catalog.rulecache`); one warm-up run fills it.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "gpudoctor")], check=True,
                   stdout=subprocess.DEVNULL)
    warm = TRACES / "public" / "hta" / "cpu_only"
    if warm.exists():
        run_child([sys.executable, "-m", "gpudoctor", "analyze", str(warm), "--format", "json", "--jobs", "1"])
    rows = [f"prepared: src/gpudoctor byte-compiled (compileall), rule cache warm; "
            f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}"]
    print(rows[0], flush=True)
    return rows


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hta-venv", type=Path, default=Path("/work/htavenv"))
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (interleaved; best kept)")
    parser.add_argument("--big-mb", type=float, default=1100.0)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--skip-ranks", action="store_true")
    parser.add_argument("--big-hta", action="store_true", help="also run HTA on the big synthetic trace (slow)")
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--only", default="", help="only the HTA-table traces whose label contains this")
    parser.add_argument("--rank-source", type=Path, default=DEFAULT_SOURCE,
                        help="the real trace the rank set is made of (default: the H200 fp32 resnet18 trace)")
    parser.add_argument("--jobs", type=int, default=0, help="workers for the rank set (default: the usable cores)")
    parser.add_argument("--against", default="", metavar="REV",
                        help="also run git revision REV's gpudoctor interleaved with the working tree")
    args = parser.parse_args()
    hta_python = ensure_hta_venv(args.hta_venv) if not args.skip_hta or args.big_hta else None
    prepare()
    if hta_python is not None and not args.skip_hta:
        compare_with_hta(hta_python, args.repeat, args.only)
    import_cost()
    if not args.skip_ranks:
        parallel_ranks(args.ranks, args.jobs or _cores(), args.rank_source, args.repeat)
    if not args.skip_big:
        big_trace(args.big_mb, hta_python if args.big_hta else None)
    if args.against:
        against_revision(args.against, args.repeat, args.jobs or _cores())


if __name__ == "__main__":
    main()
