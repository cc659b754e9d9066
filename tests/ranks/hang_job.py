"""A tiny real distributed job (gloo, CPU) that hangs in a collective on request, for GD613's test.

Why this exists: a hang where every rank sits at the same step cannot be faked convincingly — the
point is that the step counters agree. Each rank trains a small model (``optimizer.step()`` marks the
step for the agent) and all-reduces its loss after every step. Once the file ``<out>/hang`` exists,
rank ``--stuck-rank`` blocks on a read from a pipe nobody writes to (a rank stuck in I/O) before
the all-reduce, and every other rank waits inside the all-reduce for it, forever (gloo's timeout is
set to an hour). Each rank appends ``{"rank", "pid", "step"}`` to ``<out>/rank<r>.jsonl`` per step.

What it must not do: import gpudoctor (it plays the user's training process) or exit on its own
while hung — the test kills it.

Usage::

    torchrun --standalone --nproc-per-node 2 hang_job.py --out DIR [--stuck-rank 1]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


def block_on_io() -> None:
    """Wait for bytes that never come: a read on a pipe whose write end nobody uses."""
    read_end, _write_end = os.pipe()
    os.read(read_end, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--stuck-rank", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=100_000)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank = dist.get_rank()
    out = Path(args.out)
    hang_flag = out / "hang"
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    parent = os.getppid()
    with (out / f"rank{rank}.jsonl").open("w") as log:
        for step in range(1, args.max_steps + 1):
            if os.getppid() != parent:  # launcher gone: do not live on as an orphan
                return
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            log.write(json.dumps({"rank": rank, "pid": os.getpid(), "step": step}) + "\n")
            log.flush()
            if rank == args.stuck_rank and hang_flag.exists():
                block_on_io()
            dist.all_reduce(loss.detach())
            time.sleep(0.02)


if __name__ == "__main__":
    main()
