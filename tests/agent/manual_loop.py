"""Training loops the agent must find steps in without a ``torch.optim`` optimizer (run as a subprocess).

``--mode manual``: parameters updated by hand after ``loss.backward()``, as pytorch/examples'
word_language_model does (``p.data.add_(p.grad, alpha=-lr)``). ``--mode custom``: an optimizer
class of its own that does not subclass ``torch.optim.Optimizer``. ``--mode accum``: a
``torch.optim.SGD`` stepped every ``--accum`` backward passes (gradient accumulation). ``--mode
never``: torch work with no backward and no optimizer — no step boundary at all. ``--syncs N``:
N ``.item()`` calls per step. ``--vocab V``: a ``V``-way output head in the model (a language
model's vocabulary; its 2-D weight is in the optimizer's parameters). Prints ``ready``, then ``tick <unix_s> <steps>`` every 0.25 s.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


class HandRolledSGD:
    """An optimizer that is not a ``torch.optim.Optimizer`` (no global step hook sees it)."""

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.params, self.lr = params, lr

    def step(self) -> None:
        with torch.no_grad():
            for p in self.params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["manual", "custom", "accum", "never"], default="manual")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--syncs", type=int, default=0)
    p.add_argument("--load-ms", type=float, default=2.0, help="per-batch sleep in the loader's collate")
    p.add_argument("--compute-ms", type=float, default=3.0)
    p.add_argument("--vocab", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    head = [torch.nn.Linear(1, args.vocab), torch.nn.Linear(args.vocab, 1)] if args.vocab else []
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1), *head)
    data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))

    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(args.load_ms / 1e3)
        return torch.stack([i[0] for i in items]), torch.stack([i[1] for i in items])

    loader = DataLoader(data, batch_size=16, collate_fn=collate)
    custom = HandRolledSGD(list(model.parameters()), 0.01)
    sgd = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, backwards, next_tick, end = 0, 0, 0.0, time.time() + args.seconds
    print("ready", flush=True)
    while time.time() < end:
        for x, y in loader:
            if args.mode == "never":
                with torch.no_grad():
                    (x @ x.T).sum()
                time.sleep(args.compute_ms / 1e3)
                steps += 1
            else:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                backwards += 1
                for _ in range(args.syncs):
                    loss.item()
                time.sleep(args.compute_ms / 1e3)
                if args.mode == "manual":
                    for param in model.parameters():
                        param.data.add_(param.grad, alpha=-0.01)
                        param.grad = None
                    steps += 1
                elif args.mode == "custom":
                    custom.step()
                    custom.zero_grad()
                    steps += 1
                elif backwards % args.accum == 0:
                    sgd.step()
                    sgd.zero_grad()
                    steps += 1
            now = time.time()
            if now >= next_tick:
                print(f"tick {now:.3f} {steps}", flush=True)
                next_tick = now + 0.25
            if now >= end:
                break
    print("finished", flush=True)


if __name__ == "__main__":
    main()
