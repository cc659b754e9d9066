#!/usr/bin/env python3
"""Predicted vs measured gains of the PyTorch 2.x fixes: torch.compile, CUDA graphs, bf16 frozen weights.

Why this exists: GD403 (eager model, fusible kernels → ``torch.compile``), GD303 (launch-bound static
step → CUDA graphs) and GD210 (autocast re-casting fp32 weights) estimate their gain from kernel
classes of a trace (``gpudoctor.trace.fusion``) with saving fractions that are options of the rule
files (``fusion_saving_low/high``, ``graph_saving_low/high``, ``cast_saving_low/high``). This script
checks those fractions on the GPU: for each scenario it measures the eager step rate, records a
profile of the eager step, applies the rule's fix, measures again, runs ``gpudoctor analyze`` on the
eager trace and prints the rule's estimate next to the measured speedup. One command, on the GPU
machine (Python 3.12, torch with CUDA; no torchvision needed, no package index)::

    PYTHONPATH=src python3.12 bench/gpu/fusion_calibration.py --out /tmp/gd_fusion   # ~5 minutes

Prints one table and writes ``results.json`` (per scenario: fusible share, estimate, measured).
When a measured gain falls outside the estimate, retune the options (see each rule's ``## Impact``).
Standard library + torch only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: scenario → (rule whose estimate is checked, batch size)
SCENARIOS: dict[str, tuple[str, int]] = {
    "resnet50_bf16_cl": ("GD403", 256),
    "gpt2s_bf16": ("GD403", 8),
    "frozen_fp32_backbone": ("GD210", 64),
    "tiny_mlp_launch_bound": ("GD303", 32),
}
#: "cuda" on the GPU machine; "cpu" only to dry-run the plumbing (``--device cpu --only tiny_mlp_launch_bound``)
DEVICE = "cuda"


def _resnet50(torch: Any) -> Any:
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            return self.relu(self.body(x) + self.down(x))

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def _gpt(torch: Any, layers: int = 12, dim: int = 768, heads: int = 12, vocab: int = 50304) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.drop = nn.Dropout(0.1)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(1024, dim)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            return self.head(self.ln(self.blocks(x)))

    return GPT()


def _scenario(name: str, fixed: bool, batch: int) -> tuple[Callable[[], None], Any]:
    """A training-step closure for one scenario, before (``fixed=False``) or after its fix."""
    import torch
    import torch.nn.functional as F

    dev = torch.device(DEVICE)
    bf16 = torch.bfloat16
    if name == "resnet50_bf16_cl":
        model = _resnet50(torch).to(dev, memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        fwd = torch.compile(model) if fixed else model

        def step() -> None:
            with torch.autocast(DEVICE, dtype=bf16):
                loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    elif name == "gpt2s_bf16":
        model = _gpt(torch).to(dev)
        idx = torch.randint(0, 50304, (batch, 1024), device=dev)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        fwd = torch.compile(model) if fixed else model

        def step() -> None:
            with torch.autocast(DEVICE, dtype=bf16):
                logits = fwd(idx)
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), idx.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    elif name == "frozen_fp32_backbone":
        backbone = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU())
                                         for _ in range(8)]).to(dev)
        backbone.requires_grad_(False)
        if fixed:
            backbone.to(bf16)
        head = torch.nn.Linear(4096, 10).to(dev)
        x = torch.randn(batch, 4096, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)

        def step() -> None:
            with torch.autocast(DEVICE, dtype=bf16):
                loss = F.cross_entropy(head(backbone(x)), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:  # tiny_mlp_launch_bound
        model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
                                      for _ in range(12)], torch.nn.Linear(256, 10)).to(dev)
        x = torch.randn(batch, 256, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        fwd = torch.compile(model, mode="reduce-overhead") if fixed else model

        def step() -> None:
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            for p in model.parameters():  # plain SGD outside the graph, same in both variants
                p.data.add_(p.grad, alpha=-0.01)
                p.grad = None
    return step, torch


def _sync(torch: Any) -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _rate(step: Callable[[], None], torch: Any, warmup: int, steps: int) -> float:
    for _ in range(warmup):
        step()
    _sync(torch)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(torch)
    return steps / (time.perf_counter() - start)


def _profile(step: Callable[[], None], torch: Any, path: Path) -> None:
    prof_sched = torch.profiler.schedule(wait=1, warmup=1, active=4)
    raw = path.with_suffix("")
    acts = [torch.profiler.ProfilerActivity.CPU]
    if DEVICE == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts, schedule=prof_sched,
                                on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for _ in range(6):
            step()
            prof.step()
    with raw.open("rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def _measure(name: str, out: Path, steps: int) -> dict[str, Any]:
    """Child process: eager rate + eager trace, then the fixed variant's rate."""
    rule, batch = SCENARIOS[name]
    step, torch = _scenario(name, False, batch)
    eager = _rate(step, torch, warmup=5, steps=steps)
    trace = out / f"{name}.json.gz"
    _profile(step, torch, trace)
    del step
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    fixed_step, _ = _scenario(name, True, batch)
    fixed = _rate(fixed_step, torch, warmup=8, steps=steps)  # the warm-up compiles: not timed
    return {"scenario": name, "rule": rule, "eager_steps_per_s": eager, "fixed_steps_per_s": fixed,
            "measured_speedup": fixed / eager, "trace": str(trace)}


def _estimate(trace: str, rule: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", "--format", "json", trace],
                          capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stderr or done.stdout)[-400:]}
    found = [f for f in report.get("findings", []) if f.get("code") == rule]
    ranks = report.get("ranks") or [{}]
    keep = ("fusible_pct_of_gpu", "fusible_ms_per_step", "autocast_cast_ms_per_step", "launch_gap_ms_per_step",
            "step_time_ms", "host_floor_ms", "gpu_busy_ms_per_step", "gpu_kernel_ms_per_step")
    facts = {k: ranks[0].get(k) for k in keep}
    if not found:
        return {"fired": False, "facts": facts}
    impact = found[0].get("impact") or {}
    return {"fired": True, "severity": found[0].get("severity"), "low": impact.get("est_speedup_low"),
            "high": impact.get("est_speedup_high"), "basis": impact.get("basis"), "facts": facts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="/tmp/gd_fusion")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.child:  # one scenario per process: compile caches and CUDA memory do not leak across
        print(json.dumps(_measure(args.child, out, args.steps)))
        return 0
    rows = []
    for name in args.only:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        done = subprocess.run([sys.executable, __file__, "--out", str(out), "--steps", str(args.steps),
                               "--device", args.device, "--child", name], capture_output=True, text=True, timeout=900, env=env, check=False)
        try:
            row = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            rows.append({"scenario": name, "error": done.stderr[-800:]})
            print(f"{name}: failed\n{done.stderr[-800:]}", file=sys.stderr)
            continue
        row["estimate"] = _estimate(row["trace"], row["rule"])
        rows.append(row)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    print("| scenario | rule | eager → fixed steps/s | measured | estimate low–high (gm) | in band | facts |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['scenario']} | – | failed | | | | |")
            continue
        est = r["estimate"]
        band = "–"
        gm = ""
        if est.get("fired") and est.get("low") and est.get("high"):
            gm_value = math.sqrt(est["low"] * est["high"])
            gm = f"{est['low']:.2f}–{est['high']:.2f} ({gm_value:.2f})"
            gain, predicted = r["measured_speedup"] - 1, gm_value - 1
            band = "yes" if gain > 0 and abs(predicted - gain) <= 0.25 * gain else "no"
        elif not est.get("fired"):
            gm = "did not fire"
        facts = ", ".join(f"{k}={v}" for k, v in (est.get("facts") or {}).items() if v is not None)
        print(f"| {r['scenario']} | {r['rule']} | {r['eager_steps_per_s']:.2f} → {r['fixed_steps_per_s']:.2f} | "
              f"{r['measured_speedup']:.2f}× | {gm} | {band} | {facts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
