"""Planted problem: one DDP rank is slower than the others (expected finding: GD601 straggler-rank).

Data-parallel training moves at the pace of its slowest rank: every backward pass ends in an
all-reduce that waits for everyone. Here the data is sharded unevenly — the last rank gets twice
the samples per step of the others (a common result of splitting a dataset by files of different
sizes) — so every other rank idles in the all-reduce each step.

Fix (``--fix``): balance the shards (``DistributedSampler`` over one dataset, or equal-sized
shards), so every rank does the same work per step::

    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=world, rank=rank, drop_last=True)

Runs ``--world-size`` ranks (default 2) as child processes: NCCL on CUDA when there is a GPU per
rank, gloo otherwise (gloo on CPU tensors). Write per-rank traces with ``--profile-dir`` and run
``gpudoctor analyze`` on them to see the straggler.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import queue
import signal
import socket
import sys
from typing import Any

import torch
import torch.distributed as dist
from _common import (
    MLP,
    RunResult,
    bf16_autocast,
    healthy_cuda_defaults,
    pick_device,
    report,
    run_steps,
    setup,
)
from _common import make_parser as common_parser
from torch import nn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, args: argparse.Namespace, port: int, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = setup(args, "ddp_straggler")
    on_cuda = device.type == "cuda"
    gpus = torch.cuda.device_count() if on_cuda else 0
    backend = "nccl" if on_cuda and gpus >= args.world_size else "gloo"
    if on_cuda:
        device = torch.device("cuda", rank % gpus)
        torch.cuda.set_device(device)
        healthy_cuda_defaults(device)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=args.world_size)
    features, hidden, base_batch = (1024, 4096, 512) if on_cuda else (128, 256, 64)
    straggler = rank == args.world_size - 1 and not args.fix
    batch = base_batch * 2 if straggler else base_batch
    model = MLP(features, hidden, 4).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if backend == "nccl" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(rank)
    pool = [(torch.randn(batch, features, generator=gen).to(device),
             torch.randint(0, 10, (batch,), generator=gen).to(device)) for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step, rank=rank)
    results.put((rank, result.steps, result.timed_steps, result.seconds, backend, batch))
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def main() -> None:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    if args.world_size < 2:
        sys.exit("gpudoctor-example: --world-size must be at least 2 for a straggler.")
    device = pick_device(args.device)
    args.device = device.type  # children must agree
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, args, port, results), name=f"rank{r}")
             for r in range(args.world_size)]
    for p in procs:
        p.start()
    stop = {"requested": False}

    def forward_signal(signum: int, frame: object) -> None:
        stop["requested"] = True
        for p in procs:
            if p.pid is not None and p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward_signal)
    signal.signal(signal.SIGINT, forward_signal)
    by_rank: dict[int, tuple[Any, ...]] = {}
    while len(by_rank) < args.world_size and any(p.is_alive() for p in procs):
        try:
            item = results.get(timeout=0.5)
            by_rank[item[0]] = item
        except queue.Empty:
            continue
        if stop["requested"] and 0 in by_rank:
            break  # other ranks may sit in an all-reduce that will never complete
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    if 0 not in by_rank:
        sys.exit("gpudoctor-example: rank 0 did not finish (see the errors above).")
    _, steps, timed, seconds, backend, _ = by_rank[0]
    batches = {r: item[5] for r, item in sorted(by_rank.items())}
    report("ddp_straggler", args, device, RunResult(steps, timed, seconds), world_size=args.world_size,
           backend=backend, batch_per_rank=",".join(str(b) for b in batches.values()),
           rank_pids=",".join(str(p.pid) for p in procs))


if __name__ == "__main__":
    main()
