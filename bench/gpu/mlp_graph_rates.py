"""Tool-free steps/s of impact_calibration.py's launch-bound MLP: eager, compiled, and under CUDA graphs.

Why this exists: GD303 removes 0.15–0.35 of the profiled launch gaps, a factor set from a launch-bound
MLP's measured 1.32×; examples/launch_bound.py's ``reduce-overhead`` measured 8.14× where that factor
said 1.25–1.87× (tests/data/gpu_runs/h200-launch-bound-rates). This re-measures the MLP itself (24 ×
Linear(64, 64), batch 32, SGD with momentum, as in ``bench/gpu/impact_calibration.py``) eager, with
``torch.compile`` and with ``torch.compile(mode="reduce-overhead")``, and prints GD303's estimate
from a 5-step profile of the eager loop beside them.

    PYTHONPATH=src python3 bench/gpu/mlp_graph_rates.py [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from impact_calibration import analyze, measure, trace


def build(torch, mode: str | None):  # type: ignore[no-untyped-def]
    dev = "cuda"
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(24)]).to(dev)
    x = torch.randn(32, 64, device=dev)
    y = torch.randn(32, 64, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    fwd = model if mode is None else torch.compile(model, mode=mode)
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

    def step() -> None:
        if mode == "reduce-overhead" and mark is not None:
            mark()
        loss = torch.nn.functional.mse_loss(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0)
    args = p.parse_args()
    rows = ["| variant | steps/s | × eager |", "|---|---|---|"]
    eager = None
    for label, mode in (("eager", None), ("torch.compile", "default"), ("reduce-overhead", "reduce-overhead")):
        step = build(torch, mode)
        for _ in range(30):  # compile and record before timing
            step()
        r = measure(step, torch, args.seconds)
        eager = eager or r
        rows.append(f"| {label} | {r:.1f} | {r / eager:.2f}× |")
        print(rows[-1], flush=True)
        if mode is None:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "mlp_eager.json"
                trace(step, torch, path)
                report = analyze(path)
            for f in report.get("findings", []):
                if f["code"] in ("GD303", "GD403"):
                    i = f.get("impact") or {}
                    print(f"  {f['code']} {f['severity']} est {i.get('est_speedup_low')}–{i.get('est_speedup_high')}:"
                          f" {json.dumps(i.get('basis'))[:240]}", flush=True)
            rank = (report.get("ranks") or [{}])[0]
            print(f"  step_time_ms {rank.get('step_time_ms')} launch_gap_ms_per_step {rank.get('launch_gap_ms_per_step')}"
                  f" kernels_per_step {rank.get('kernels_per_step')} gpu_busy_ms_per_step {rank.get('gpu_busy_ms_per_step')}",
                  flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
