"""A training loop written the accelerate way (Accelerator.prepare, accelerator.backward, the wrapped
optimizer), slowed by a Dataset that sleeps 2 ms per sample: for tests/live/test_accelerate_loop.py."""
import sys
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(32), torch.randn(1)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(Slow(), batch_size=8)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    end = time.monotonic() + seconds
    for step, (x, y) in enumerate(loader, start=1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        if step % 20 == 0:
            print("tick", step, flush=True)
        if time.monotonic() > end:
            break


if __name__ == "__main__":
    main()
