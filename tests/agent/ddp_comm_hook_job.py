"""Two gloo ranks (torch.multiprocessing.spawn) check the agent's timed DDP comm hook, for test_collectives.

Each rank trains a small DDP model for a few steps with the hook registered by
:class:`gpudoctor.agent.collectives.CollectiveTimer` and compares every gradient with the average of
the ranks' local gradients computed without DDP (all-reduce by hand): the hook must not change what
DDP computes. Rank 1 sleeps before its backward so rank 0 waits. A second model with a user comm hook
must be left alone. Rank 0 prints one JSON line with what it saw.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from gpudoctor.agent.collectives import CollectiveTimer

STEPS = 6
#: Long beside a loaded 2-core machine's scheduling delays (tens of ms), so rank 0's wait stands out.
RANK1_DELAY_S = 0.2


def user_hook(state, bucket):  # type: ignore[no-untyped-def]
    return dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future().then(
        lambda f: f.value()[0])


def train(rank: int, world: int, port: int, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    reference = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    reference.load_state_dict(net.state_dict())
    model = DDP(net)
    timer = CollectiveTimer()
    timer.consider(model)
    max_diff = 0.0
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(100 * step + rank)
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        loss = nn.functional.mse_loss(model(x), y)
        if rank == 1:
            time.sleep(RANK1_DELAY_S)
        loss.backward()
        ref_loss = nn.functional.mse_loss(reference(x), y)
        ref_loss.backward()
        for p, r in zip(net.parameters(), reference.parameters(), strict=True):
            avg = r.grad.clone()
            dist.all_reduce(avg)
            avg /= world
            max_diff = max(max_diff, float((p.grad - avg).abs().max()))
            p.grad = None
            r.grad = None
        timer.on_step()
    waits = timer.waits_since(0.0)
    other = DDP(nn.Linear(4, 4))
    other.register_comm_hook(None, user_hook)
    second = CollectiveTimer()
    second.consider(other)
    timer.detach()
    queue.put({"rank": rank, "status": timer.status, "waits_ms": waits, "max_grad_diff": max_diff,
               "user_hook_status": second.status})
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=train, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted((queue.get(timeout=120) for _ in procs), key=lambda r: r["rank"])
    for p in procs:
        p.join(timeout=60)
    print(json.dumps(results))
    sys.exit(max(p.exitcode or 0 for p in procs))


if __name__ == "__main__":
    main()
