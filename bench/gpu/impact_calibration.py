#!/usr/bin/env python3
"""Calibrate gpudoctor's impact model on the GPU: estimates from a trace vs measured fix speedups.

Why this exists: the precision estimates rest on kernel-time ratios (``catalog/throughput.py``) and on
the host floor, which divides the host's profiled time by ``HOST_PROFILER_INFLATION``
(``trace/bottleneck.py``). Both are measured here: a torchvision ResNet-50 (batch 128, synthetic data)
and a GPT-style transformer are run in each variant of the classic sequence — fp32 (PyTorch defaults:
TF32 for cuDNN, not for matmuls) → bf16 autocast → + channels_last → + torch.compile — each variant's
unprofiled step rate is measured, a 5-step torch.profiler trace of it is analysed with ``gpudoctor
analyze``, and every finding's estimate is printed beside the speedup that the next variant measured.
The host's profiled vs unprofiled time is printed too (launch-bound tiny MLP), which is what the
inflation constant is.

    PYTHONPATH=src python3 bench/gpu/impact_calibration.py --out $OUT   # about 4 minutes on an H200

Standard library + torch (+ torchvision for ResNet-50). One table at the end; results.json in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

VARIANTS = ("fp32", "bf16", "bf16_cl", "bf16_cl_compile")


def build(model_name: str, variant: str, torch: Any) -> tuple[Any, Any]:
    """(step function, description) for one model and variant."""
    dev = "cuda"
    cl = variant.endswith("_cl") or "_cl_" in variant
    if model_name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50().to(dev)
        batch = 128
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        if cl:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
    elif model_name == "gpt":
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.1, batch_first=True, norm_first=True)
        model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 12), torch.nn.Linear(768, 50304)).to(dev)
        x = torch.randn(8, 1024, 768, device=dev)
        y = torch.randint(0, 50304, (8 * 1024,), device=dev)
    else:  # tiny launch-bound MLP: the host's own time, profiled vs not
        model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(24)]).to(dev)
        x = torch.randn(32, 64, device=dev)
        y = torch.randn(32, 64, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    fwd = torch.compile(model) if variant.endswith("compile") else model
    lowp = variant.startswith("bf16")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=lowp):
            out = fwd(x)
            if model_name == "gpt":
                loss = torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]), y)
            elif model_name == "resnet50":
                loss = torch.nn.functional.cross_entropy(out, y)
            else:
                loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, f"{model_name} {variant}"


def measure(step: Any, torch: Any, seconds: float = 6.0) -> float:
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
        if n % 5 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def trace(step: Any, torch: Any, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=2, active=5, repeat=1)) as prof:
        for _ in range(8):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))


def analyze(path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", str(path), "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=300)
    if out.returncode not in (0, 1):
        return {"error": out.stderr[-500:]}
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gd_impact")))
    parser.add_argument("--models", default="resnet50,gpt,mlp")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    rows: list[dict[str, Any]] = []
    for model_name in args.models.split(","):
        variants = VARIANTS if model_name != "mlp" else ("fp32",)
        for variant in variants:
            torch.manual_seed(0)
            step, label = build(model_name, variant, torch)
            rate = measure(step, torch)
            path = args.out / f"{model_name}_{variant}.json"
            trace(step, torch, path)
            rep = analyze(path)
            ranks = rep.get("ranks") or [{}]
            r0 = ranks[0]
            row = {"model": model_name, "variant": variant, "steps_per_s": round(rate, 3),
                   "unprofiled_step_ms": round(1000.0 / rate, 2), "trace_step_ms": r0.get("step_time_ms"),
                   "gpu_busy_ms": r0.get("gpu_busy_ms_per_step"), "host_floor_ms": r0.get("host_floor_ms"),
                   "host_active_ms": r0.get("host_active_ms_per_step"),
                   "gemm_ms": {k: r0.get(k) for k in ("gemm_ms_per_step", "gemm_fp32_simt_ms_per_step",
                                                      "gemm_tf32_ms_per_step")},
                   "fusible_ms": r0.get("fusible_ms_per_step"),
                   "layout_ms": r0.get("layout_transform_ms_per_step"),
                   "bottleneck": (rep.get("bottleneck") or {}).get("line"),
                   "findings": [(f["code"], f["severity"], f["impact"] and (f["impact"]["est_speedup_low"],
                                                                           f["impact"]["est_speedup_high"]))
                                for f in rep.get("findings", [])]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            path.unlink(missing_ok=True)
            del step
            torch.cuda.empty_cache()
    (args.out / "impact_calibration.json").write_text(json.dumps(rows, indent=1))
    print("\nmodel     variant          steps/s  unprof ms  trace ms  gpu busy  host floor  host active")
    for r in rows:
        print(f"{r['model']:<9} {r['variant']:<16} {r['steps_per_s']:>7.2f}  {r['unprofiled_step_ms']:>9.2f}  "
              f"{r['trace_step_ms'] or 0:>8.2f}  {r['gpu_busy_ms'] or 0:>8.2f}  {r['host_floor_ms'] or 0:>10.2f}  "
              f"{r['host_active_ms'] or 0:>11.2f}")
    print("\nmeasured speedup of each next variant vs the estimates on the previous one:")
    for a, b in zip(rows, rows[1:]):
        if a["model"] == b["model"]:
            print(f"  {a['model']} {a['variant']} -> {b['variant']}: measured {b['steps_per_s'] / a['steps_per_s']:.2f}x;"
                  f" estimates on {a['variant']}: {a['findings']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
