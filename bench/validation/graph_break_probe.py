#!/usr/bin/env python3
"""What a torch.compile graph break costs the training step: K planted breaks, measured (H200).

Why this exists: GD401 (graph breaks) warned with no estimate whenever a compiled function ran more
than one graph per call — including on a healthy Hugging Face GPT-2 ``Trainer`` run (5 graphs per
call). Its estimate now comes from the GPU idle inside the windows between consecutive compiled
regions of one call (``gpudoctor.trace.graphbreaks``); this script measures what removing the breaks
really gains, so that band can be checked and calibrated.

For two model sizes — ``launch`` (small batch and width: the GPU waits on the host, breaks should
cost) and ``gpu`` (large GEMMs: the GPU queue hides the host work of a break, they should cost ~0) —
it trains a residual MLP of ``DEPTH`` blocks under ``torch.compile`` (default mode) and bf16 autocast
with K = 0, 2, 8 planted ``torch._dynamo.graph_break()`` between blocks (K + 1 graphs per call),
compiles every K of a size, then times ``--steps`` steps per repeat after a warm-up outside the timed
loop (``torch.cuda.synchronize`` around it), the repeats taking turns between the K (drift-proof),
records one 5-step torch.profiler trace per variant and prints one table: variant, compile seconds,
graphs per call, steps/s and the speedup of K = 0 over K (what removing the breaks gains). One
command on the GPU machine (Python 3.12, torch with CUDA, no package index; ~3 minutes on an H200)::

    python3 bench/validation/graph_break_probe.py --out $OUT/h200-graph-breaks

Writes ``probe.json`` and ``<variant>.json.gz`` traces into --out; then, here,
``.venv/bin/python -m gpudoctor analyze <trace> --format json`` gives GD401's predicted speedup to put
next to the measured one — ``.venv/bin/python bench/validation/graph_break_probe.py --check DIR`` prints both for
every trace of a run. ``--cpu --tiny`` dry-runs the whole thing on a CPU in about a minute;
``--budget-s`` stops it cleanly (variants not started are listed as skipped). Standard library + torch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: blocks of the residual MLP; the breaks sit between blocks, so K ≤ DEPTH - 1
DEPTH = 12
BREAK_COUNTS = (0, 2, 8)
#: size → (batch, width) on the GPU; the MLP's hidden layer is 4 × width
SIZES: dict[str, tuple[int, int]] = {"launch": (32, 256), "gpu": (4096, 2048)}
TINY_SIZES: dict[str, tuple[int, int]] = {"launch": (4, 16), "gpu": (64, 128)}
#: size → timed steps per repeat on the GPU (the launch-bound step is ~1-3 ms, the GPU-bound ~20 ms)
STEPS: dict[str, int] = {"launch": 300, "gpu": 100}
REPEATS = 5
WARMUP_STEPS = 10
PROFILE_STEPS = 5


def _segmented_forward(segments: int) -> Callable[..., Any]:
    """A ``forward`` that runs ``self.segments[0..n-1]`` with a graph break between each pair.

    Written out without a loop on purpose: Dynamo gives up on the whole frame when a graph break
    sits inside a ``for`` loop, so a loop would run eagerly instead of in K + 1 graphs.
    """
    lines = ["def forward(self, x):"]
    for j in range(segments):
        if j:
            lines.append("    torch._dynamo.graph_break()")
        lines.append(f"    x = self.segments[{j}](x)")
    lines.append("    return self.head(x).float().square().mean()")
    import torch

    namespace: dict[str, Any] = {"torch": torch}
    exec(compile("\n".join(lines), f"<graph_break_probe forward k={segments - 1}>", "exec"), namespace)
    return namespace["forward"]  # type: ignore[no-any-return]


def _model(torch: Any, breaks: int, width: int) -> Any:
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x: Any) -> Any:
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            bounds = [0] + [round((i + 1) * DEPTH / (breaks + 1)) for i in range(breaks)] + [DEPTH]
            self.segments = nn.ModuleList(nn.Sequential(*[Block() for _ in range(bounds[j + 1] - bounds[j])])
                                          for j in range(breaks + 1))
            self.head = nn.Linear(width, width)

    # the class's own forward (not a wrapper that calls it), so each call is one compiled frame
    Net.forward = _segmented_forward(breaks + 1)  # type: ignore[method-assign]
    return Net()


class _Variant:
    """One (size, K) variant: its compiled training step, compile time and timed rates."""

    def __init__(self, size: str, breaks: int, args: argparse.Namespace) -> None:
        import torch
        from torch._dynamo.utils import counters

        self.size, self.breaks, self.name = size, breaks, f"{size}_k{breaks}"
        self.device = "cpu" if args.cpu else "cuda"
        self.batch, self.width = (TINY_SIZES if args.tiny else SIZES)[size]
        self.rates: list[float] = []
        torch.manual_seed(0)
        model = _model(torch, breaks, self.width).to(self.device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
        compiled = torch.compile(model)  # its own Net class and forward: its own Dynamo cache entry
        x = torch.randn(self.batch, self.width, device=self.device)

        def step() -> None:
            with torch.autocast(self.device, dtype=torch.bfloat16):
                loss = compiled(x)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        self.step = step
        before = int(counters["stats"].get("unique_graphs", 0))
        t0 = time.perf_counter()
        step()  # compiles the forward graphs and, on backward, the backward graphs
        self.sync()
        self.compile_s = time.perf_counter() - t0
        self.graphs = int(counters["stats"].get("unique_graphs", 0)) - before
        for _ in range(2 if args.tiny else WARMUP_STEPS):
            step()
        self.sync()
        print(f"  {self.name}: compile {self.compile_s:.1f} s, {self.graphs} graph(s)", flush=True)

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def time(self, steps: int) -> None:
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.sync()
        self.rates.append(steps / (time.perf_counter() - t0))

    def profile(self, out: Path) -> Path:
        """One trace of ``PROFILE_STEPS`` steps (after one profiler warm-up step), gzipped."""
        import torch

        trace, plain = out / f"{self.name}.json.gz", out / f"{self.name}.json"
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities, record_shapes=False,
                                    schedule=torch.profiler.schedule(wait=0, warmup=1, active=PROFILE_STEPS),
                                    on_trace_ready=lambda p: p.export_chrome_trace(str(plain))) as prof:
            for i in range(1 + PROFILE_STEPS):
                self.step()
                if i == PROFILE_STEPS:
                    self.sync()  # only before the trace ends: a sync per step would empty the GPU queue
                prof.step()
        with plain.open("rb") as src, gzip.open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
        plain.unlink()
        return trace

    def row(self, steps: int, trace: Path) -> dict[str, Any]:
        rate = statistics.median(self.rates)
        return {"variant": self.name, "size": self.size, "breaks": self.breaks, "batch": self.batch,
                "width": self.width, "depth": DEPTH, "graphs_compiled": self.graphs,
                "compile_s": round(self.compile_s, 2), "steps_timed": steps,
                "steps_per_s_repeats": [round(r, 3) for r in self.rates], "steps_per_s": round(rate, 3),
                "ms_per_step": round(1000.0 / rate, 4), "trace": trace.name}


def _size(size: str, break_counts: list[int], args: argparse.Namespace, started: float,
          skipped: list[str]) -> list[dict[str, Any]]:
    """Every K of one size: compiled one after the other, then timed in turns, then profiled.

    K = 0 and the largest K first, so a budget that runs out leaves out an intermediate K, not the
    baseline. The repeats alternate between the variants (K=0, K=8, K=2, K=0, …), so a drift of the
    machine (clocks, another process) moves every variant alike instead of biasing one of them.
    """
    import torch

    torch._dynamo.reset()
    order = list(dict.fromkeys([break_counts[0], break_counts[-1], *break_counts[1:-1]]))
    built: list[_Variant] = []
    for breaks in order:
        if time.perf_counter() - started > args.budget_s:
            skipped.append(f"{size}_k{breaks}")
            continue
        built.append(_Variant(size, breaks, args))
    steps = 3 if args.tiny else (args.steps or STEPS[size])
    for _ in range(1 if args.tiny else REPEATS):
        for variant in built:
            variant.time(steps)
    rows = []
    for variant in built:
        rows.append(variant.row(steps, variant.profile(args.out)))
        print(f"  {variant.name}: {rows[-1]['steps_per_s']:.1f} steps/s "
              f"(repeats {', '.join(f'{r:.1f}' for r in variant.rates)})", flush=True)
    return rows


def _results(results: Path) -> dict[str, Any]:
    """``probe.json`` of a run, or its table read back from the saved stdout (``probe.txt``)."""
    if (results / "probe.json").exists():
        return json.loads((results / "probe.json").read_text())  # type: ignore[no-any-return]
    rows = []
    row_re = re.compile(r"^(\w+)_k(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$")
    for line in (results / "probe.txt").read_text().splitlines():
        m = row_re.match(line.strip())
        if m:
            size, breaks, graphs, compile_s, rate, ms, speedup = m.groups()
            rows.append({"variant": f"{size}_k{breaks}", "size": size, "breaks": int(breaks),
                         "graphs_compiled": int(graphs), "compile_s": float(compile_s), "steps_per_s": float(rate),
                         "ms_per_step": float(ms), "speedup_k0_over_k": float(speedup),
                         "trace": f"{size}_k{breaks}.json.gz"})
    return {"variants": rows}


def check(results: Path) -> int:
    """GD401's predicted speedup on each K > 0 trace of a probe run next to the measured K=0 / K one.

    Runs here, not on the GPU machine: ``gpudoctor analyze --format json`` (what a user sees) per
    trace, plus the trace's own facts for the share of the window idle that the measured gain
    implies: ``(step − step / measured) / graph_break_gpu_idle_ms_per_step`` — what
    ``break_saving_low/high`` should bracket.
    """
    import subprocess

    from gpudoctor.trace.metrics import compute_rank_metrics
    from gpudoctor.trace.reader import load_trace

    meta = _results(results)
    print(f"{'variant':<10} {'measured':>8} {'GD401':>8} {'predicted':>13} {'idle ms':>8} {'host ms':>8} "
          f"{'step ms':>8} {'busy ms':>8} {'implied':>8}")
    rows = []
    for row in meta["variants"]:
        if not row["breaks"] or not row.get("speedup_k0_over_k"):
            continue
        trace = results / row["trace"]
        done = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", "--format", "json", str(trace)],
                              capture_output=True, text=True, check=False)
        findings = json.loads(done.stdout).get("findings", []) if done.stdout.strip() else []
        gd401 = next((f for f in findings if f["code"] == "GD401"), None)
        impact = (gd401 or {}).get("impact") or {}
        values = compute_rank_metrics(load_trace(trace)).values
        idle = float(values.get("graph_break_gpu_idle_ms_per_step") or 0.0)
        step = float(values.get("step_time_ms") or 0.0)
        measured = float(row["speedup_k0_over_k"])
        implied = (step - step / measured) / idle if idle > 0 and step > 0 else None
        predicted = (f"{impact['est_speedup_low']:.2f}-{impact['est_speedup_high']:.2f}x" if impact else "none")
        print(f"{row['variant']:<10} {measured:>7.3f}x {(gd401 or {}).get('severity', '-'):>8} {predicted:>13} "
              f"{idle:>8.3f} {float(values.get('graph_break_host_ms_per_step') or 0):>8.3f} {step:>8.3f} "
              f"{float(values.get('gpu_busy_ms_per_step') or 0):>8.3f} "
              f"{(f'{implied:.2f}' if implied is not None else '-'):>8}")
        rows.append({"variant": row["variant"], "measured": measured, "severity": (gd401 or {}).get("severity"),
                     "impact": impact, "implied_saving_share": implied,
                     **{k: values.get(k) for k in values if k.startswith("graph_break_")},
                     **{k: values.get(k) for k in ("step_time_ms", "profiled_step_ms", "gpu_busy_ms_per_step",
                                                   "host_floor_ms", "launch_gap_ms_per_step")}})
    if os.access(results, os.W_OK):
        (results / "check.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", type=Path, metavar="DIR",
                        help="here (no GPU, no torch): GD401's prediction on a probe run's traces vs its measurements")
    parser.add_argument("--out", type=Path, help="directory for probe.json and the traces")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (dry run of the plumbing)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes and 3 timed steps (dry run)")
    parser.add_argument("--steps", type=int, default=0, help="timed steps per repeat (default: per size)")
    parser.add_argument("--sizes", default="launch,gpu", help="comma-separated subset of: launch, gpu")
    parser.add_argument("--breaks", default=",".join(map(str, BREAK_COUNTS)),
                        help=f"comma-separated planted break counts K (0 ≤ K < {DEPTH}); K=0 is the baseline")
    parser.add_argument("--budget-s", type=float, default=240.0,
                        help="stop before starting a variant once this many seconds have passed")
    args = parser.parse_args(argv)
    if args.check is not None:
        return check(args.check)
    if args.out is None:
        parser.error("--out DIR is required (or --check DIR)")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("graph_break_probe: no CUDA device; use --cpu --tiny for a dry run", file=sys.stderr)
        return 2
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        print(f"graph_break_probe: unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}",
              file=sys.stderr)
        return 2
    try:
        break_counts = sorted({int(k) for k in args.breaks.split(",") if k})
    except ValueError:
        break_counts = [-1]
    if not break_counts or not all(0 <= k < DEPTH for k in break_counts):
        print(f"graph_break_probe: --breaks wants integers from 0 to {DEPTH - 1}, got {args.breaks!r}",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    device = "cpu" if args.cpu else torch.cuda.get_device_name(0)
    print(f"graph_break_probe: torch {torch.__version__} on {device}; depth {DEPTH}, K in {break_counts}, "
          f"budget {args.budget_s:.0f} s", flush=True)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for size in sizes:
        rows += _size(size, break_counts, args, started, skipped)
    rows.sort(key=lambda r: (sizes.index(r["size"]), r["breaks"]))
    base = {r["size"]: r["steps_per_s"] for r in rows if r["breaks"] == 0}
    for row in rows:
        row["speedup_k0_over_k"] = round(base[row["size"]] / row["steps_per_s"], 4) if row["size"] in base else None
    total_s = time.perf_counter() - started
    print(f"\n{'variant':<10} {'graphs':>6} {'compile s':>9} {'steps/s':>9} {'ms/step':>9} {'K=0 / K':>8}")
    for row in rows:
        speedup = row["speedup_k0_over_k"]
        print(f"{row['variant']:<10} {row['graphs_compiled']:>6} {row['compile_s']:>9.1f} {row['steps_per_s']:>9.1f} "
              f"{row['ms_per_step']:>9.3f} {(f'{speedup:.3f}x' if speedup else '-'):>8}")
    if skipped:
        print(f"skipped (budget {args.budget_s:.0f} s reached): {', '.join(skipped)}")
    print(f"total {total_s:.0f} s")
    meta = {"torch": torch.__version__, "device": device, "cpu": args.cpu, "tiny": args.tiny,
            "pid": os.getpid(), "total_s": round(total_s, 1), "skipped": skipped, "variants": rows}
    (args.out / "probe.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
