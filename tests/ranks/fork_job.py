"""Ranks started by a plain parent, for the launcher-discovery tests: the two shapes torchrun does not cover.

``--shape fork``: the parent forks its 2 ranks with ``multiprocessing`` (start method ``fork``) and sets
``RANK`` in each child's ``os.environ`` after the fork — which ``/proc/<pid>/environ`` never shows — and
the ranks rendezvous over ``tcp://``; only the process tree and the ranks' process groups tell them.
``--shape single``: no distribution at all, one training process with two ``spawn``-context DataLoader
workers, whose command lines look like ``mp.spawn`` ranks (``spawn_main … --multiprocessing-fork``).

Each rank (or the single process) writes its PID to ``<out>/rank<r>.pid`` once it trains.
What it must not do: import gpudoctor (it plays the user's training process).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def _loader(workers: int, context: str | None = None) -> DataLoader:
    data = TensorDataset(torch.randn(1024, 16), torch.randint(0, 2, (1024,)))
    return DataLoader(data, batch_size=8, num_workers=workers, multiprocessing_context=context,
                      persistent_workers=workers > 0)


def _train(rank: int, world: int, url: str, out: str, seconds: float) -> None:
    torch.set_num_threads(1)
    if world > 1:
        os.environ["RANK"] = str(rank)  # set after the fork: invisible in /proc/<pid>/environ
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
    model = torch.nn.Linear(16, 2)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    Path(out, f"rank{rank}.pid").write_text(str(os.getpid()))
    deadline = time.time() + seconds
    while time.time() < deadline:
        for x, y in _loader(0) if world > 1 else LOADER:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.02)
            if time.time() > deadline:
                break


LOADER: DataLoader | None = None


def main() -> None:
    global LOADER
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shape", choices=["fork", "single"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=120.0)
    args = p.parse_args()
    if args.shape == "single":
        LOADER = _loader(2, "spawn")
        _train(0, 1, "", args.out, args.seconds)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_train, args=(r, 2, url, args.out, args.seconds)) for r in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()


if __name__ == "__main__":
    main()
