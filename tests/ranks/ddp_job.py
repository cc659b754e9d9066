"""A tiny real DDP job (gloo, CPU) with one optionally slowed rank, for the many-ranks tests.

Why this exists: the straggler logic must be tested on numbers measured from real synchronous
``torch.distributed`` training, where every rank's step time is equal because the fast ranks wait in
the all-reduce. Each rank writes one JSON line per step to ``<out>/rank<r>.jsonl`` with what it
measured itself: step time, data wait (time in ``next(loader)``), H2D time, collective wait (from a
DDP communication hook: the span from launching each bucket's all-reduce to its completion, i.e. the
time this rank's gradients waited for its peers) and compute (the rest of the step), and the main thread's run-queue delay (runnable, waiting for a CPU).
With ``--comm-timer none`` the job registers no comm hook, so gpudoctor's agent can register its own
and measure the collective wait itself (the rows then carry ``collective_wait_ms: null``).

What it must not do: import gpudoctor (it plays the user's training process), or fake any number.

Usage::

    python ddp_job.py --mode {healthy,compute,input} --slow-rank 1 --steps 30 --out DIR [--profile]
    python ddp_job.py --launcher spawn ...   # torch.multiprocessing.spawn (default)
    python ddp_job.py --launcher spawn --init-method tcp ...   # … as pytorch/examples' ImageNet script
    torchrun --nproc-per-node 2 ddp_job.py --launcher env ...
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

FEATURES = 64
BATCH = 32


class SlowReadDataset(Dataset):
    """Random samples; ``read_delay_s`` per sample stands for a slow disk or a busy network filesystem."""

    def __init__(self, length: int, read_delay_s: float) -> None:
        self.length = length
        self.read_delay_s = read_delay_s
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(length, FEATURES, generator=gen)
        self.y = torch.randint(0, 10, (length,), generator=gen)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.read_delay_s:
            time.sleep(self.read_delay_s)
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self, extra_matmuls: int, matmul_dim: int = 256) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 10))
        self.extra_matmuls = extra_matmuls
        # A plain attribute, not a buffer: DDP would broadcast buffers at every forward, a second
        # collective in which the fast ranks wait, out of the comm hook's sight.
        self.scratch = torch.randn(matmul_dim, matmul_dim) / matmul_dim**0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        if self.extra_matmuls:  # stands for the model's own work (and a slow rank's extra work)
            s = self.scratch
            for _ in range(self.extra_matmuls):
                s = torch.tanh(s @ self.scratch)
            out = out + 0.0 * s.mean()
        return out


class CollectiveTimer:
    """DDP comm hook that records, per bucket, launch → completion of its all-reduce."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []

    def hook(self, state, bucket):  # type: ignore[no-untyped-def]  # DDP checks real annotations; none here
        start = time.perf_counter()
        world = dist.get_world_size()
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

        def done(f: torch.futures.Future) -> torch.Tensor:
            with self.lock:
                self.spans.append((start, time.perf_counter()))
            return f.value()[0].div_(world)

        return fut.then(done)

    def take_ms(self) -> float:
        """Union length of the spans recorded since the last call, in ms."""
        with self.lock:
            spans, self.spans = sorted(self.spans), []
        total, end = 0.0, float("-inf")
        for s, e in spans:
            if e > end:
                total += e - max(s, end)
                end = e
        return total * 1000.0


def schedstat_ms() -> tuple[float, float]:
    """(CPU time, time runnable but waiting for a CPU) of this thread (``/proc/thread-self/schedstat``)."""
    try:
        fields = Path("/proc/thread-self/schedstat").read_text().split()
        return int(fields[0]) / 1e6, int(fields[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def train(rank: int, world: int, args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    dev = torch.device("cpu")
    if args.device == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        if args.init_method == "tcp":  # pytorch/examples' ImageNet: --dist-url tcp://…, no environment
            dist.init_process_group(args.backend, init_method=args.dist_url, rank=rank, world_size=world)
        else:
            dist.init_process_group(args.backend, rank=rank, world_size=world)
    slow = rank == args.slow_rank
    extra = args.base_matmuls + (args.extra_matmuls if (slow and args.mode == "compute") else 0)
    delay = args.read_delay_ms / 1000.0 if (slow and args.mode == "input") else 0.0
    torch.manual_seed(0)
    net = Net(extra, args.matmul_dim).to(dev)
    net.scratch = net.scratch.to(dev)
    model = DDP(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    timer = CollectiveTimer() if args.comm_timer == "own" else None
    if timer is not None:  # DDP takes one comm hook: without this one, gpudoctor's agent registers its own
        model.register_comm_hook(None, timer.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowReadDataset(BATCH * (args.steps + 1), delay), batch_size=BATCH,
                        num_workers=args.workers)
    out = (Path(args.out) / f"rank{rank}.jsonl").open("w")
    prof = None
    if args.profile:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=2, warmup=1, active=4, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(Path(args.out) / f"rank{rank}.pt.trace.json")),
        )
        prof.start()
    it = iter(loader)
    parent = os.getppid()
    for step in range(args.steps):
        if os.getppid() != parent:  # launcher killed (a test's teardown): don't train on as an orphan
            break
        t0 = time.perf_counter()
        sched0 = schedstat_ms()
        x, y = next(it)
        t1 = time.perf_counter()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        t2 = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # step times of GPU work, not of kernel launches
        t3 = time.perf_counter()
        coll_ms = timer.take_ms() if timer is not None else None
        sched1 = schedstat_ms()
        step_ms = (t3 - t0) * 1000.0
        data_ms, h2d_ms = (t1 - t0) * 1000.0, (t2 - t1) * 1000.0
        row = {
            "rank": rank, "pid": os.getpid(), "step": step + 1, "t": time.time(),
            "step_ms": step_ms, "data_wait_ms": data_ms, "h2d_ms": h2d_ms,
            "collective_wait_ms": coll_ms,
            "cpu_ms": sched1[0] - sched0[0], "run_delay_ms": sched1[1] - sched0[1], "compute_ms": max(0.0, step_ms - data_ms - h2d_ms - (coll_ms or 0.0)),
        }
        out.write(json.dumps(row) + "\n")
        out.flush()
        if prof is not None:
            prof.step()
        if args.step_sleep_ms:
            time.sleep(args.step_sleep_ms / 1000.0)
    if prof is not None:
        prof.stop()
    out.close()
    dist.barrier()
    dist.destroy_process_group()
    _leave_before_teardown()


def _leave_before_teardown() -> None:
    """End this rank's process now that every row is written, without the C++ teardown.

    Why: torch 2.13's gloo ranks sometimes abort *after* ``destroy_process_group`` returns, while the
    interpreter tears down ("terminate called without an active exception", SIGABRT): 3 of 110 runs of
    this job on a 2-core machine, two at a time, every row already written (marker files showed
    barrier and destroy done); the spawn launcher then reports a failed job, and CI failed on it.
    With this exit, 0 of 160 runs. Python's exit handlers still run (a gpudoctor agent in the rank
    stops its profile and removes its socket there); only the finalization that crashes is skipped.
    """
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=["healthy", "compute", "input"], default="healthy")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--base-matmuls", type=int, default=20, help="work every rank does per step")
    p.add_argument("--extra-matmuls", type=int, default=100, help="more work on the slow rank (--mode compute)")
    p.add_argument("--read-delay-ms", type=float, default=2.5, help="per sample, on the slow rank")
    p.add_argument("--step-sleep-ms", type=float, default=0.0, help="pause after each step (long-running jobs)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: rank r uses GPU r %% device_count (the bench/validation harness)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    p.add_argument("--matmul-dim", type=int, default=256, help="size of the square matmuls of the work")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes per rank")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--comm-timer", choices=["own", "none"], default="own",
                   help="own: time collectives with this job's comm hook (rows get collective_wait_ms); "
                        "none: leave DDP's comm hook free for gpudoctor's agent (rows get null)")
    p.add_argument("--launcher", choices=["spawn", "env"], default="spawn")
    p.add_argument("--init-method", choices=["env", "tcp"], default="env",
                   help="spawn only: env (MASTER_ADDR/PORT set before spawning) or tcp (an init_method URL, as "
                        "pytorch/examples' ImageNet --multiprocessing-distributed does: the ranks get no environment)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.launcher == "env":  # torchrun set RANK/WORLD_SIZE/MASTER_* for us
        dist.init_process_group(args.backend)
        train(dist.get_rank(), dist.get_world_size(), args)
        return
    if args.init_method == "tcp":
        args.dist_url = f"tcp://127.0.0.1:{_free_port()}"
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    mp.spawn(train, args=(args.world, args), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
