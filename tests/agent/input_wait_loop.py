"""A CPU loop whose data wait has one known cause, for tests/agent/test_wait_split.py.

``restarted``: two workers forked again every epoch of 8 batches (each sample 1 ms);
``persistent``: the same with persistent workers; ``main``: num_workers=0, each batch 8 ms in the loop;
``slow_workers``: two persistent workers, 24 ms a batch each, a 2 ms step: the workers cannot keep up.
Prints the agent's stats over the last ``seconds`` as one JSON line.
"""
import dataclasses
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

from gpudoctor.agent import runtime


class Timed(Dataset):
    def __init__(self, n, sample_s):
        self.n, self.sample_s = n, sample_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sample_s)
        return torch.randn(16), torch.randn(1)


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    runtime.install()
    if mode == "main":
        loader = DataLoader(Timed(10_000, 0.002), batch_size=4, num_workers=0)
    elif mode == "slow_workers":
        loader = DataLoader(Timed(10_000, 0.006), batch_size=4, num_workers=2, persistent_workers=True)
    else:
        loader = DataLoader(Timed(32, 0.001), batch_size=4, num_workers=2, persistent_workers=mode == "persistent")
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.002)
            if time.monotonic() >= end:
                break
    agent = runtime.current()
    print(json.dumps(dataclasses.asdict(agent.stats(seconds - 1.0).stats), default=str), flush=True)
    runtime.detach()


if __name__ == "__main__":
    main()
