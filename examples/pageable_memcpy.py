"""Planted problem: host→device copies from pageable memory (expected finding: GD302 pageable-memcpy).

Each batch is built on the CPU in ordinary (pageable) memory and copied with ``.to("cuda")``. The
driver must first stage pageable memory through a pinned bounce buffer, the copy is synchronous
with respect to the host, and it cannot overlap with compute.

Fix (``--fix``): put batches in pinned (page-locked) memory and copy with ``non_blocking=True``
(``DataLoader(pin_memory=True)`` does the pinning for you)::

    x = x.pin_memory()                          # once per batch, in the loader
    x = x.to("cuda", non_blocking=True)

On CPU there is no copy: the script runs, but the fix cannot change anything.
"""

from __future__ import annotations

import torch
from _common import (
    SmallConvNet,
    bf16_autocast,
    channels_last,
    healthy_cuda_defaults,
    make_parser,
    nhwc,
    report,
    run_steps,
    setup,
)
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "pageable_memcpy")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, side, width = (args.batch_size or 256, 128, 16) if on_cuda else (args.batch_size or 16, 32, 8)
    host_batches = [(torch.randn(batch, 3, side, side), torch.randint(0, 10, (batch,))) for _ in range(4)]
    if args.fix and on_cuda:
        host_batches = [(x.pin_memory(), y.pin_memory()) for x, y in host_batches]
    model = channels_last(SmallConvNet(width=width, blocks=2).to(device), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(i: int) -> None:
        x, y = host_batches[i % len(host_batches)]
        x = nhwc(x.to(device, non_blocking=args.fix))
        y = y.to(device, non_blocking=args.fix)
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    mib = batch * 3 * side * side * 4 / 2**20
    report("pageable_memcpy", args, device, result, batch_size=batch, copy_mib_per_step=f"{mib:.1f}")


if __name__ == "__main__":
    main()
