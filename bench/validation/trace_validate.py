#!/usr/bin/env python3
"""Record fresh torch.profiler traces of planted problems on the GPU and check ``gpudoctor analyze``.

Why this exists: the trace rules were tuned on the H200 traces in /work/shared/traces (torch 2.11).
This re-records the same pathologies with whatever torch/CUDA the GPU machine has, so that kernel
names (precision classes), DataLoader ops, pageable copies and compile regions are checked on traces
nobody tuned against. One command, on the GPU machine (python3.12, torch with CUDA, gpudoctor
installed or importable from ./src with msgspec present)::

    python3.12 bench/validation/trace_validate.py --out /tmp/gd_traces      # ~2 minutes

Each scenario trains a small conv net (no torchvision needed) for 8 steps under
``torch.profiler.schedule(wait=1, warmup=1, active=4)``, writes ``<scenario>.json.gz``, runs
``python -m gpudoctor analyze --format json`` on it and prints expected vs found rule codes. Exit
status 0 when every scenario matches. Standard library + torch only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# scenario → (codes that must be found, codes that must not be found)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "fp32": ({"GD201", "GD202"}, {"GD102"}),
    "tf32": ({"GD201"}, {"GD202"}),
    "bf16": (set(), {"GD201", "GD202"}),
    "loader_bound": ({"GD102"}, set()),
    "sync_pageable": ({"GD301", "GD302"}, set()),
    "compile_break": ({"GD401"}, set()),
    "foreach_off": ({"GD204"}, set()),
}


def _record(scenario: str, out_dir: Path, device: str) -> Path:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    torch.backends.cuda.matmul.allow_tf32 = scenario == "tf32"
    torch.backends.cudnn.allow_tf32 = scenario == "tf32"
    dev = torch.device(device)
    on_gpu = device == "cuda"

    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    layers = [block(3, 64), block(64, 64), nn.MaxPool2d(2), block(64, 128), block(128, 128), nn.MaxPool2d(2),
              block(128, 256), block(256, 256), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100)]
    if scenario == "foreach_off":  # many parameter tensors, for-loop optimizer
        layers[-1:] = [nn.Sequential(*[nn.Linear(256, 256) for _ in range(60)]), nn.Linear(256, 100)]
    model: nn.Module = nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=scenario != "foreach_off")
    loss_fn = nn.CrossEntropyLoss()

    class Heavy(Dataset):  # CPU-heavy items: the DataLoader-bound case
        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            x = torch.randn(3, side, side)
            for _ in range(12):
                x = torch.nn.functional.avg_pool2d(x[None], 3, 1, 1)[0]
            return x, i % 100

    batch, side = (64, 96) if on_gpu else (4, 32)  # the CPU dry run only exercises the code paths
    if scenario == "loader_bound":
        batches = iter(DataLoader(Heavy(), batch_size=batch, num_workers=0))
    else:
        fixed = torch.randn(batch, 3, side, side)
        pinned = fixed.pin_memory() if on_gpu else fixed

    forward = model
    if scenario == "compile_break":
        def forward_fn(x: torch.Tensor) -> torch.Tensor:
            h = model[:4](x)
            if h.mean().item() > -1e9:  # a host sync and a graph break
                print("", end="")
            return model[4:](h)
        forward = torch.compile(forward_fn)  # type: ignore[assignment]

    def step() -> None:
        if scenario == "loader_bound":
            x, y = next(batches)
            x, y = x.to(dev), y.to(dev)
        elif scenario == "sync_pageable":
            x = fixed.clone().to(dev)  # pageable source
            y = torch.randint(0, 100, (batch,)).to(dev)
        else:
            x = pinned.to(dev, non_blocking=True)
            y = torch.randint(0, 100, (batch,), device=dev)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=scenario == "bf16"):
            loss = loss_fn(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if scenario == "sync_pageable":
            loss.item()

    for _ in range(3):  # warm-up (and compilation) outside the profile
        step()
    if on_gpu:
        torch.cuda.synchronize()
    path = out_dir / f"{scenario}.json"
    sched = torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if on_gpu:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts, schedule=sched,
                                on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(7):
            step()
            prof.step()
    gz = path.with_suffix(".json.gz")
    with path.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return gz


def _analyze(trace: Path) -> tuple[set[str], float, int]:
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{repo / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", "--format", "json", str(trace)],
                          capture_output=True, text=True, timeout=300, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        print(f"  analyze failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
        return set(), elapsed, proc.returncode
    data = json.loads(proc.stdout)
    return {f["code"] for f in data["findings"]}, elapsed, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/gd_traces"))
    parser.add_argument("--only", nargs="*", default=None, help="scenarios to run (default: all)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a dry run of the recording code (no GPU, expectations not checked)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ok = True
    print(f"{'scenario':<15} {'analyze_s':>9}  result  found codes")
    for scenario in args.only or list(EXPECTED):
        try:
            trace = _record(scenario, args.out, args.device)
        except Exception as exc:  # one scenario failing must not hide the others
            print(f"{scenario:<15} {'-':>9}  ERROR   recording failed: {type(exc).__name__}: {exc}")
            ok = False
            continue
        found, elapsed, _ = _analyze(trace)
        must, must_not = EXPECTED[scenario] if args.device == "cuda" else (set(), set())
        good = must <= found and not (must_not & found)
        ok &= good
        print(f"{scenario:<15} {elapsed:9.2f}  {'ok' if good else 'MISS':6}  {' '.join(sorted(found)) or '-'}"
              + ("" if good else f"  (need {sorted(must)}, must not {sorted(must_not)})"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
