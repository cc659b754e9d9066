"""Short epochs over a DataLoader with two workers, optionally persistent: for
tests/live/test_worker_restarts.py. Each sample costs 1 ms in a worker; an epoch is 8 batches of 4."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Small(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.randn(16), torch.randn(1)


def main():
    seconds, persistent = float(sys.argv[1]), sys.argv[2] == "persistent"
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(Small(), batch_size=4, num_workers=2, persistent_workers=persistent)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.005)  # the rest of a step


if __name__ == "__main__":
    main()
