"""A real data-parallel training job (small GPT, DDP or FSDP) with one optionally slowed rank.

Why this exists: the multi-GPU validation (``bench/validation/multigpu_validation.py``) must judge
gpudoctor on the kind of job users run — a transformer trained with bf16 autocast, fused AdamW and a
DataLoader with pinned-memory workers, under ``torchrun`` with NCCL — healthy, and with one rank made
slow on purpose:

- ``--mode compute``: the slow rank does extra bf16 matmuls every step, sized at start-up so that
  they add ``--compute-factor`` (default 0.5, i.e. ~+50%) of the measured healthy step time;
- ``--mode input``: the slow rank's dataset sleeps per sample, sized so that its 2 loader workers
  deliver one batch per ``--input-factor`` × the healthy step time (they cannot keep up).

The slowdown starts after ``--calib-steps`` healthy steps (their median step time sizes it). Each
rank writes one JSON line per step to ``<out>/rank<r>.jsonl`` — step, wall time ``t``, ``step_ms``
(GPU time between the ends of consecutive steps, from CUDA events read one step late, so the host
never waits for the whole queue; wall clock on the CPU), ``wall_ms``, ``data_wait_ms`` (time in
``next(loader)``) and ``slow`` (slowdown active) — and ``<out>/rank<r>.meta.json`` with the set-up
and the calibration. ``--profile-dir D --profile-steps 20:25`` records torch.profiler (CPU+CUDA) on
every rank for those steps into ``D/rank<r>.pt.trace.json.gz``.

What it must not do: import gpudoctor (it plays the user's process), register a DDP communication
hook (gpudoctor's agent registers its own), or fake any number. It stops by itself after
``--max-seconds`` (all ranks agree on it every 50 steps) or when its launcher goes away.

Usage::

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 2 bench/validation/dist_job.py \\
        --strategy ddp --mode compute --out /tmp/run
    torchrun --standalone --nproc-per-node 2 bench/validation/dist_job.py --device cpu --backend gloo \\
        --steps 10 --out /tmp/run          # tiny model, CPU (the plumbing test)
    python3 bench/validation/dist_job.py --launcher spawn --backend gloo --mode compute --out /tmp/run
                                       # mp.spawn, 2 ranks (on one GPU: gloo; NCCL refuses a shared GPU)
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

#: (layers, d_model, heads, seq, vocab, batch per rank): the GPU model and the CPU test model.
CUDA_CONFIG = (8, 1024, 16, 1024, 32768, 8)
CPU_CONFIG = (2, 64, 4, 32, 512, 4)
STOP_CHECK_EVERY = 50
WORKERS = 2


class TokenDataset(Dataset):
    """Synthetic token sequences; ``delay_ms`` (shared with the workers) per sample stands for slow reads."""

    def __init__(self, seq: int, vocab: int, seed: int) -> None:
        self.seq, self.vocab, self.seed = seq, vocab, seed
        self.delay_ms = mp.get_context("fork").Value("d", 0.0, lock=False)

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        delay = self.delay_ms.value
        if delay > 0:
            time.sleep(delay / 1000.0)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        tokens = torch.randint(0, self.vocab, (self.seq + 1,), generator=gen)
        return tokens[:-1], tokens[1:]


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (SDPA) and a 4× GELU MLP."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc, self.out = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(att)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers: int, d_model: int, heads: int, seq: int, vocab: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def wrap(model: GPT, strategy: str, dev: torch.device) -> tuple[nn.Module, str]:
    """DDP, or FSDP2 (``fully_shard`` per block, then the root) with FSDP1 as the fallback."""
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None), "DistributedDataParallel"
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        fully_shard = None
    if fully_shard is not None:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(dev.type, (dist.get_world_size(),))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model, "fully_shard (FSDP2)"
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    return FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}),
                device_id=dev if dev.type == "cuda" else None), "FullyShardedDataParallel (FSDP1)"


def make_optimizer(model: nn.Module) -> tuple[torch.optim.Optimizer, str]:
    try:
        return torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True), "AdamW fused"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True), "AdamW foreach"


class StepClock:
    """Step times: GPU time between step ends (CUDA events, read one step late) or host wall time."""

    def __init__(self, dev: torch.device) -> None:
        self.cuda = dev.type == "cuda"
        self.prev_event: Any = None
        self.pending: Any = None  # (previous end event, this end event, row) waiting to be read
        self.prev_wall = time.perf_counter()

    def end_step(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """Mark the end of a step; return the row of the step whose time is now known."""
        now = time.perf_counter()
        row["wall_ms"] = round((now - self.prev_wall) * 1000.0, 3)
        self.prev_wall = now
        if not self.cuda:
            row["step_ms"] = row["wall_ms"]
            return row
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        ready, self.pending = self.pending, (self.prev_event, event, row)
        self.prev_event = event
        if ready is None or ready[0] is None:
            return None
        start, end, done = ready
        end.synchronize()  # the previous step only: this step stays queued
        done["step_ms"] = round(start.elapsed_time(end), 3)
        return done


def calibrate_matmul_ms(scratch: torch.Tensor, dev: torch.device) -> float:
    """Time of one ``scratch @ scratch`` on this device, ms (median of 10)."""
    times = []
    for _ in range(12):
        t0 = time.perf_counter()
        if dev.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            scratch @ scratch
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            scratch @ scratch
            times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times[2:])


def should_stop(started: float, args: argparse.Namespace, dev: torch.device) -> bool:
    """All ranks agree (MAX all-reduce of a flag) on stopping after ``--max-seconds``."""
    flag = torch.tensor([1.0 if time.time() - started > args.max_seconds else 0.0], device=dev)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def make_profiler(args: argparse.Namespace, rank: int, dev: torch.device) -> Any:
    if not args.profile_dir:
        return None
    first, last = (int(v) for v in args.profile_steps.split(":"))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    out = Path(args.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    prof = torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(skip_first=max(0, first - 1), wait=0, warmup=1, active=last - first,
                                         repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(out / f"rank{rank}.pt.trace.json.gz")))
    prof.start()
    return prof


def spawned_rank(index: int, args: argparse.Namespace, url: str) -> None:
    """One rank under ``torch.multiprocessing.spawn``, as pytorch/examples' ImageNet script starts
    them: ``init_method=tcp://…``, so the rank carries no ``RANK``/``MASTER_*`` environment."""
    dist.init_process_group(args.backend, init_method=url, rank=index, world_size=args.nprocs)
    train(args)


def train(args: argparse.Namespace) -> None:
    if not dist.is_initialized():
        dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cpu")
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(1)
    layers, d_model, heads, seq, vocab, batch = CUDA_CONFIG if args.device == "cuda" else CPU_CONFIG
    torch.manual_seed(0)
    gpt = GPT(layers, d_model, heads, seq, vocab).to(dev)
    params_m = round(sum(p.numel() for p in gpt.parameters()) / 1e6, 1)
    model, wrapper = wrap(gpt, args.strategy, dev)
    opt, opt_impl = make_optimizer(model)
    dataset = TokenDataset(seq, vocab, seed=rank)
    loader = DataLoader(dataset, batch_size=batch, num_workers=WORKERS, pin_memory=dev.type == "cuda",
                        persistent_workers=True, prefetch_factor=2, multiprocessing_context="fork")
    slow_rank = rank == args.slow_rank and args.mode != "healthy"
    scratch = torch.randn(4096 if dev.type == "cuda" else 128, 4096 if dev.type == "cuda" else 128, device=dev,
                          dtype=torch.bfloat16 if dev.type == "cuda" else torch.float32)
    meta: dict[str, Any] = {"rank": rank, "world": world, "pid": os.getpid(), "strategy": args.strategy,
                            "wrapper": wrapper, "optimizer": opt_impl, "mode": args.mode, "slow_rank": args.slow_rank,
                            "device": str(dev), "backend": args.backend, "torch": torch.__version__,
                            "params_m": params_m,
                            "config": {"layers": layers, "d_model": d_model, "heads": heads, "seq": seq,
                                       "vocab": vocab, "batch_per_rank": batch}}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_file = (out_dir / f"rank{rank}.jsonl").open("w")
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu", enabled=False)
    clock, prof, extra_matmuls = StepClock(dev), make_profiler(args, rank, dev), 0
    started, parent, healthy_ms = time.time(), os.getppid(), []
    it = iter(loader)
    step = 0
    while args.steps <= 0 or step < args.steps:
        if os.getppid() != parent:  # launcher gone: do not train on as an orphan
            break
        if step and step % STOP_CHECK_EVERY == 0 and should_stop(started, args, dev):
            break
        step += 1
        t0 = time.perf_counter()
        x, y = next(it)
        data_wait_ms = (time.perf_counter() - t0) * 1000.0
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        if extra_matmuls:
            s = scratch
            for _ in range(extra_matmuls):
                s = scratch @ s  # same stream: the step's forward waits for it
        with amp:
            loss = F.cross_entropy(model(x).float().view(-1, vocab), y.view(-1))
        loss.backward()
        try:
            opt.step()
        except RuntimeError as exc:  # fused AdamW refused these parameters (e.g. DTensor): say so, go on
            if step > 1 or "fused" not in opt_impl:
                raise
            opt = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True)
            opt_impl = meta["optimizer"] = f"AdamW foreach (fused failed: {str(exc)[:120]})"
            opt.step()
        opt.zero_grad(set_to_none=True)
        done = clock.end_step({"rank": rank, "pid": os.getpid(), "step": step, "t": time.time(),
                               "data_wait_ms": round(data_wait_ms, 3), "slow": bool(extra_matmuls)
                               or dataset.delay_ms.value > 0})
        if done is not None:
            rows_file.write(json.dumps(done) + "\n")
            rows_file.flush()
            if done["step"] <= args.calib_steps and done["step"] > args.calib_steps // 2:
                healthy_ms.append(done["step_ms"])
        if prof is not None:
            prof.step()
            if step >= int(args.profile_steps.split(":")[1]) + 1:
                prof.stop()
                prof = None
        if slow_rank and step == args.calib_steps + 1 and healthy_ms:
            base = statistics.median(healthy_ms)
            meta["healthy_step_ms"] = round(base, 3)
            if args.mode == "compute":
                matmul_ms = calibrate_matmul_ms(scratch, dev)
                extra_matmuls = max(1, math.ceil(args.compute_factor * base / matmul_ms))
                meta.update(matmul_ms=round(matmul_ms, 4), extra_matmuls=extra_matmuls)
            else:  # WORKERS workers, one batch each per (batch × delay): one batch per factor × base
                dataset.delay_ms.value = args.input_factor * base * WORKERS / batch
                meta["sample_delay_ms"] = round(dataset.delay_ms.value, 3)
            meta["slow_from_step"] = step + 1
        if step == args.calib_steps + 2 or (args.steps > 0 and step == args.steps):
            (out_dir / f"rank{rank}.meta.json").write_text(json.dumps(meta, indent=1))
    if prof is not None:
        prof.stop()
    rows_file.close()
    (out_dir / f"rank{rank}.meta.json").write_text(json.dumps({**meta, "steps_done": step}, indent=1))
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--mode", choices=["healthy", "compute", "input"], default="healthy")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--compute-factor", type=float, default=0.5, help="extra compute, as a share of the healthy step")
    p.add_argument("--input-factor", type=float, default=2.0,
                   help="slow rank's loader delivers one batch per FACTOR × healthy step time")
    p.add_argument("--calib-steps", type=int, default=20, help="healthy steps that size the slowdown")
    p.add_argument("--steps", type=int, default=0, help="stop after N steps (0: run until --max-seconds)")
    p.add_argument("--max-seconds", type=float, default=600.0, help="stop after this long (a safety net)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--profile-dir", default=None, help="torch.profiler traces of every rank go here")
    p.add_argument("--profile-steps", default="20:25", help="FIRST:LAST steps to profile (LAST excluded)")
    p.add_argument("--out", required=True, help="directory for rank<r>.jsonl and rank<r>.meta.json")
    p.add_argument("--launcher", choices=["env", "spawn"], default="env",
                   help="env: torchrun started this process; spawn: start --nprocs ranks with "
                        "torch.multiprocessing.spawn and a tcp:// rendezvous (no rank environment)")
    p.add_argument("--nprocs", type=int, default=2, help="ranks to spawn (--launcher spawn)")
    args = p.parse_args()
    first, last = (int(v) for v in args.profile_steps.split(":"))
    if not 1 <= first < last:
        p.error("--profile-steps must be FIRST:LAST with 1 <= FIRST < LAST")
    if args.launcher == "spawn":
        import socket

        import torch.multiprocessing as mp

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            url = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        mp.spawn(spawned_rank, args=(args, url), nprocs=args.nprocs, join=True)
        return
    train(args)


if __name__ == "__main__":
    main()
