"""A tiny CPU training loop for the agent tests (run as a subprocess, never imported by pytest).

Prints ``ready`` once training runs, then ``tick <unix_s> <steps>`` every 0.25 s so a test can
measure the step rate from outside (before, during and after the agent is attached).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n: int, load_ms: float) -> None:
        self.n, self.load_s = n, load_ms / 1e3
        self.x, self.y = torch.randn(n, 32), torch.randn(n, 1)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.load_s:
            time.sleep(self.load_s)
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 1)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        if self.graph_break:
            print("", end="")  # GRAPH-BREAK-LINE: dynamo cannot trace print()
        return self.b(h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--load-ms", type=float, default=0.0, help="per-sample sleep in the Dataset")
    p.add_argument("--compute-ms", type=float, default=2.0, help="extra sleep per step (simulated GPU work)")
    p.add_argument("--compile", action="store_true", help="torch.compile(backend='eager') with a graph break")
    p.add_argument("--explicit", action="store_true", help="import gpudoctor; install_agent(); step()")
    p.add_argument("--pause-file", default="", help="no steps while this file exists")
    p.add_argument("--autocast", action="store_true", help="bf16 CPU autocast around the forward")
    p.add_argument("--samples", type=int, default=256, help="dataset size (an epoch is samples / batch steps)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--fresh-workers", action="store_true",
                   help="no persistent_workers: the workers (and the loader's threads) are started again every epoch")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.explicit:
        import gpudoctor
        gpudoctor.install_agent()
    model = Net(graph_break=args.compile)
    forward = torch.compile(model, backend="eager") if args.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDataset(args.samples, args.load_ms), batch_size=args.batch, num_workers=args.workers,
                        persistent_workers=args.workers > 0 and not args.fresh_workers)
    steps, next_tick, end = 0, 0.0, time.time() + args.seconds
    print("ready", flush=True)
    while time.time() < end:
        for x, y in loader:
            while args.pause_file and os.path.exists(args.pause_file):
                time.sleep(0.02)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
                out = forward(x)
            loss = torch.nn.functional.mse_loss(out.float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.compute_ms:
                time.sleep(args.compute_ms / 1e3)
            steps += 1
            if args.explicit:
                import gpudoctor
                gpudoctor.step()
            now = time.time()
            if now >= next_tick:
                print(f"tick {now:.3f} {steps}", flush=True)
                next_tick = now + 0.25
            if now >= end:
                break
    print("finished", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
