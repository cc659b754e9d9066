"""Planted problem: GPU memory nearly full and fragmented (expected findings: GD501 memory-near-limit, GD502
memory-fragmentation).

A large buffer is parked on the GPU (a "cache" of embeddings, say) so that the training step's
working set just fits, and batches vary in size (variable-length sequences). The caching allocator
keeps blocks sized for earlier batches; a new size finds no block that fits, ``cudaMalloc`` fails,
and the allocator frees its whole cache and retries — a device-wide sync and a slow step — or the
job dies with "CUDA out of memory … reserved but unallocated".

Fix (``--fix``): leave headroom (here: the buffer is sized to leave 15% of the GPU free) and let the
allocator grow segments instead of fragmenting them (set before CUDA starts)::

    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py

On CPU there is no caching allocator to fill: the script runs the variable-size loop only.
"""

from __future__ import annotations

import os
import random

import torch
from _common import MLP, bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def _park_buffer(device: torch.device, leave_free_frac: float) -> torch.Tensor | None:
    """Allocate one big tensor so that only ``leave_free_frac`` of the GPU stays free (best effort)."""
    if device.type != "cuda":
        return None
    free_b, total_b = torch.cuda.mem_get_info(device)
    want_b = int(free_b - leave_free_frac * total_b)
    while want_b > 2**28:
        try:
            return torch.empty(want_b, dtype=torch.uint8, device=device)
        except torch.cuda.OutOfMemoryError:
            want_b = int(want_b * 0.95)
    return None


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--leave-free-pct", type=float, default=None,
                        help="GPU memory left free by the parked buffer (default: 2 unfixed, 15 fixed)")
    args = parser.parse_args()
    if args.fix:
        # Read when CUDA's allocator starts, which has not happened yet at this point.
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    device = setup(args, "memory_pressure")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    features, hidden, max_batch = (2048, 8192, 8192) if on_cuda else (128, 256, 256)
    model = MLP(features, hidden, 4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    rng = random.Random(args.seed)

    def train(batch: int) -> None:
        x = torch.randn(batch, features, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    def step(_: int) -> None:
        train(rng.randint(max_batch // 8, max_batch))  # variable-length batches

    # Warm up at the largest batch, so the working set is already reserved (and stays cached) when
    # the buffer is parked: the job fits, just barely.
    train(max_batch)
    leave_free = (args.leave_free_pct if args.leave_free_pct is not None else (15.0 if args.fix else 2.0)) / 100
    parked = _park_buffer(device, leave_free)
    result = run_steps(args, device, step)
    extra: dict[str, object] = {"parked_gib": f"{(parked.numel() if parked is not None else 0) / 2**30:.1f}"}
    if on_cuda:
        stats = torch.cuda.memory_stats(device)
        total = torch.cuda.get_device_properties(device).total_memory
        extra.update(alloc_retries=stats.get("num_alloc_retries", 0),
                     peak_reserved_pct=f"{100 * stats.get('reserved_bytes.all.peak', 0) / total:.1f}",
                     alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
    report("memory_pressure", args, device, result, **extra)


if __name__ == "__main__":
    main()
