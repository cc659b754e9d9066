"""A tiny Lightning training job on 2 CPU ranks (gloo), for the launcher-discovery tests.

Why this exists: Lightning starts its ranks its own ways — ``strategy="ddp"`` re-launches this script
as a subprocess for ranks 1…N-1 (with ``LOCAL_RANK``/``NODE_RANK``/``WORLD_SIZE``, no ``RANK``) while the
original process trains as rank 0; ``strategy="ddp_spawn"`` uses ``torch.multiprocessing`` spawn —
and gpudoctor must find the ranks from the launcher's PID either way. Each rank writes its global
rank and PID to ``<out>/rank<r>.pid`` once training starts, so the test knows the truth.

What it must not do: import gpudoctor (it plays the user's training process).

Usage::

    python lightning_job.py --strategy {ddp,ddp_spawn} --out DIR [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self, out: str, step_sleep_s: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
        self.out = out
        self.step_sleep_s = step_sleep_s

    def on_train_start(self) -> None:
        Path(self.out, f"rank{self.global_rank}.pid").write_text(str(os.getpid()))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        time.sleep(self.step_sleep_s)
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--strategy", choices=["ddp", "ddp_spawn"], default="ddp")
    p.add_argument("--out", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--step-sleep-ms", type=float, default=20.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(4096, 32, generator=gen), torch.randint(0, 2, (4096,), generator=gen))
    loader = DataLoader(data, batch_size=16, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=args.strategy, max_steps=args.steps,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Tiny(args.out, args.step_sleep_ms / 1000.0), loader)


if __name__ == "__main__":
    main()
