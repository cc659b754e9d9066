"""What a CUDA-graph replay leaves of a launch-bound step: rates and profiles, eager against compiled.

Why this exists: GD303 estimates the gain of ``torch.compile(mode="reduce-overhead")`` from the
eager step's launch gaps. Its factor (0.15–0.35 of the gaps) held on a 24-layer MLP (1.78×
measured) and missed examples/launch_bound.py by 4× (8.14× measured; bench/results/
h200-launch-bound-rates). To set a model on more than two rates, this measures, for each workload,
the tool-free steps/s eager, under plain ``torch.compile`` and under ``reduce-overhead``, and
records a 5-step profile of each variant, so that what the replayed step still spends (host work
outside the graphs, GPU time after fusion) can be read off the traces, and GD303's and GD403's
estimates on the eager trace set beside the measured rates.

Workloads (all on CUDA, static shapes):

- ``mlp``: bench/gpu/impact_calibration.py's MLP (24 × Linear(64, 64), batch 32, SGD momentum).
- ``handrolled``: examples/launch_bound.py's model (48 hand-rolled LayerNorm/GELU blocks, width 128,
  batch 32, fused AdamW, bf16 autocast).
- ``gpt2``: Hugging Face transformers' GPT2LMHeadModel, a small config (6 layers, 256 wide, batch 8 ×
  128 tokens, AdamW) — model code this project did not write.

    PYTHONPATH=src python3 bench/gpu/graph_replay_probe.py --out $OUT/graph_replay [--seconds 6]

Not run yet: written on 4 Dec 2026, late, when no device time was left (149 s); its first run
will tell whether it works as written. Prints one table; writes ``<workload>_<variant>.json`` traces, ``<workload>_<variant>.report.json``
(gpudoctor analyze) and ``rates.json`` under --out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "examples"))
from impact_calibration import analyze, measure, trace  # noqa: E402

VARIANTS = (("eager", None), ("compile", "default"), ("reduce_overhead", "reduce-overhead"))


def _mlp(torch: Any) -> tuple[Any, Any, Any]:
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(24)]).cuda()
    x, y = torch.randn(32, 64, device="cuda"), torch.randn(32, 64, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def loss_of(fwd: Any) -> Any:
        return torch.nn.functional.mse_loss(fwd(x), y)
    return model, opt, loss_of


def _handrolled(torch: Any) -> tuple[Any, Any, Any]:
    from launch_bound import HandRolledBlock

    model = torch.nn.Sequential(*(HandRolledBlock(128, False) for _ in range(48)), torch.nn.Linear(128, 10)).cuda()
    x, y = torch.randn(32, 128, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ce = torch.nn.CrossEntropyLoss()

    def loss_of(fwd: Any) -> Any:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return ce(fwd(x), y)
    return model, opt, loss_of


def _gpt2(torch: Any) -> tuple[Any, Any, Any]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=6, n_embd=256, n_head=4, vocab_size=8192, n_positions=128)
    model = GPT2LMHeadModel(cfg).cuda()
    ids = torch.randint(0, cfg.vocab_size, (8, 128), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_of(fwd: Any) -> Any:
        return fwd(input_ids=ids, labels=ids).loss
    return model, opt, loss_of


WORKLOADS = {"mlp": _mlp, "handrolled": _handrolled, "gpt2": _gpt2}


def build(torch: Any, workload: str, mode: str | None) -> Any:
    torch.manual_seed(0)
    model, opt, loss_of = WORKLOADS[workload](torch)
    fwd = model if mode is None else torch.compile(model, mode=mode)
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

    def step() -> None:
        if mode == "reduce-overhead" and mark is not None:
            mark()
        opt.zero_grad(set_to_none=True)
        loss_of(fwd).backward()
        opt.step()
    return step


def _rank_fields(report: dict[str, Any]) -> dict[str, Any]:
    r0 = (report.get("ranks") or [{}])[0]
    keys = ("step_time_ms", "gpu_busy_ms_per_step", "host_floor_ms", "kernels_per_step", "launch_gap_ms_per_step",
            "fusible_ms_per_step", "fusible_kernels_per_step", "idle_pct")
    out = {k: r0.get(k) for k in keys}
    out["findings"] = [
        [f["code"], f["severity"], (f.get("impact") or {}).get("est_speedup_low"),
         (f.get("impact") or {}).get("est_speedup_high")]
        for f in report.get("findings", []) if f["code"] in ("GD303", "GD403", "GD101", "GD301")]
    return out


def main() -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--workloads", default="mlp,handrolled,gpt2")
    p.add_argument("--budget-s", type=float, default=500.0, help="skip what would start after this many seconds")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    t_start = time.monotonic()
    rows: list[dict[str, Any]] = []
    print("| workload | variant | steps/s | × eager | trace step ms | kernels/step | launch gaps ms | GD303 / GD403 est |",
          flush=True)
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for workload in args.workloads.split(","):
        eager_rate = math.nan
        for label, mode in VARIANTS:
            if time.monotonic() - t_start > args.budget_s:
                print(f"| {workload} | {label} | skipped: budget | | | | | |", flush=True)
                continue
            row: dict[str, Any] = {"workload": workload, "variant": label}
            try:
                step = build(torch, workload, mode)
                t0 = time.monotonic()
                for _ in range(30):  # compile and record before timing
                    step()
                torch.cuda.synchronize()
                row["warmup_s"] = round(time.monotonic() - t0, 1)
                rate = measure(step, torch, args.seconds)
                if mode is None:
                    eager_rate = rate
                row["steps_per_s"] = round(rate, 2)
                row["x_eager"] = round(rate / eager_rate, 3)
                path = args.out / f"{workload}_{label}.json"
                trace(step, torch, path)
                report = analyze(path)
                (args.out / f"{workload}_{label}.report.json").write_text(json.dumps(report, indent=1))
                row.update(_rank_fields(report))
            except Exception as exc:  # one workload's failure must not cost the others
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                traceback.print_exc()
            rows.append(row)
            est = "; ".join(f"{c} {s} {lo}–{hi}" for c, s, lo, hi in row.get("findings", []) if c in ("GD303", "GD403"))
            print(f"| {workload} | {label} | {row.get('steps_per_s', row.get('error', ''))} | {row.get('x_eager', '')} |"
                  f" {row.get('step_time_ms', '')} | {row.get('kernels_per_step', '')} |"
                  f" {row.get('launch_gap_ms_per_step', '')} | {est} |", flush=True)
            torch._dynamo.reset()
    (args.out / "rates.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
