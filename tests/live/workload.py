"""A tiny CPU torch training loop used as a real attach target by the live tests.

Modes:
- ``input``: ``num_workers=0`` and a heavy per-sample transform: the main thread mostly fetches data.
- ``compute``: cheap samples, a heavier model step: the main thread mostly runs forward/backward.
- ``workers``: like ``compute`` but with 2 DataLoader workers (shared-memory segments).
- ``exit``: like ``compute`` but exits after ``--seconds``.

Prints "ready" once the first step ran, so a test can attach at a known point.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class SlowSet(Dataset):
    def __init__(self, heavy_s: float) -> None:
        self.heavy_s = heavy_s

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        x = torch.randn(3, 32, 32)
        deadline = time.perf_counter() + self.heavy_s
        while time.perf_counter() < deadline:  # a heavy per-sample transform
            x = x * 1.0001 + 0.0001
        return x, index % 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["input", "compute", "workers", "exit"])
    parser.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    heavy_s = 0.01 if args.mode == "input" else 0.0
    workers = 2 if args.mode == "workers" else 0
    loader = DataLoader(SlowSet(heavy_s), batch_size=8, num_workers=workers)
    model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 28 * 28, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + args.seconds
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        if args.mode != "input":
            for _ in range(3):  # more compute per step
                loss = loss + nn.functional.cross_entropy(model(x), y) * 0
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 0:
            print("ready", flush=True)
        if time.monotonic() > end:
            break


if __name__ == "__main__":
    main()
