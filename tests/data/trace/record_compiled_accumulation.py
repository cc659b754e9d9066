"""Records the CPU torch.profiler traces of tests/trace/test_compile_per_call.py (torch 2.x CPU).

A small MLP under ``torch.compile``, called 4 times per optimizer step (gradient accumulation over
4 micro-batches), once without and once with a graph break (``.item()`` + ``print`` in forward).
The traces are committed gzipped beside this script; run it again to refresh them:

    .venv/bin/python tests/data/trace/record_compiled_accumulation.py tests/data/trace
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

MICRO_BATCHES = 4


class Net(nn.Module):
    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        if self.graph_break and h.mean().item() > 1e9:  # .item(): Dynamo breaks the graph here
            print("never")
        return self.head(h)


def record(graph_break: bool, out: Path) -> None:
    torch.manual_seed(0)
    model = torch.compile(Net(graph_break))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(MICRO_BATCHES)]

    def step() -> None:
        for x, y in data:
            loss = nn.functional.cross_entropy(model(x), y) / MICRO_BATCHES
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):  # compile and warm up outside the profiled steps
        step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=4, repeat=1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(5):
                step()
                prof.step()
        with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)

if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    record(False, target / "compiled_accumulation_cpu.json.gz")
    record(True, target / "compiled_accumulation_break_cpu.json.gz")
