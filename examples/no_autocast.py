"""Planted problem: matmuls run in fp32 (expected finding: GD201 missing-autocast).

A matmul-heavy MLP trains in full fp32. TF32 is allowed here (so this is not GD202), but bf16
tensor cores are still 2x+ faster on Ampere/Hopper and halve activation memory.

Fix (``--fix``): run forward and loss under bf16 autocast (no GradScaler needed for bf16)::

    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    loss.backward()

On CPU the same autocast is applied (``device_type="cpu"``); whether it helps depends on the CPU's
bf16 support, so the CPU number is not the claim.
"""

from __future__ import annotations

import contextlib

import torch
from _common import MLP, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "no_autocast")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)  # TF32 on: the remaining problem is fp32 itself
    batch, features, hidden, layers = (args.batch_size or 4096, 1024, 4096, 6) if on_cuda else \
        (args.batch_size or 64, 256, 512, 3)
    model = MLP(features, hidden, layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, features, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if args.fix
                else contextlib.nullcontext())

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("no_autocast", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
