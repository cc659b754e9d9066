"""The healthy baseline: no planted problem (expected finding: none).

What "healthy" means here: data already on the device (no input stall), bf16 autocast with TF32
allowed (tensor cores on CUDA), ``channels_last`` convolutions, ``torch.compile`` on CUDA (fused
memory-bound kernels; the CPU run stays eager so that tests start fast), ``cudnn.benchmark`` on, a fused
(CUDA) or foreach (CPU) optimizer, no host synchronisation inside the step, losses kept without
their graphs. gpudoctor should report nothing at warning level or above on this script; any finding
on it is a false positive. ``--fix`` is accepted and changes nothing (there is nothing to fix).

Sized to keep an H200 busy: with batch 256 and width 64 (the first H200 run) a step was ~6.5 ms,
of which the host's ~300 kernel launches took most, so the GPU idled (GD101) and the profile window
looked launch-bound (GD303). Batch 512 at width 128 is ~8x the GPU work per step for the same
launches, so the GPU, not the host, sets the pace. The CPU config stays small.
"""

from __future__ import annotations

import torch
from _common import (
    SmallConvNet,
    bf16_autocast,
    healthy_cuda_defaults,
    make_parser,
    report,
    run_steps,
    setup,
)
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "healthy")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch_size = args.batch_size or (512 if on_cuda else 16)
    side = 64 if on_cuda else 32
    model = SmallConvNet(width=128 if on_cuda else 16, blocks=3).to(device)
    model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented; not in the stubs
    forward = torch.compile(model) if on_cuda else model  # compiles during the first steps (warm-up)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch_size, 3, side, side, device=device).contiguous(memory_format=torch.channels_last),
             torch.randint(0, 10, (batch_size,), device=device)) for _ in range(4)]
    running_loss = torch.zeros((), device=device)

    def step(i: int) -> None:
        nonlocal running_loss
        images, labels = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(forward(images), labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.detach()  # stays on the device: no sync

    result = run_steps(args, device, step)
    report("healthy", args, device, result, batch_size=batch_size,
           mean_loss=f"{running_loss.item() / max(result.steps, 1):.4f}")


if __name__ == "__main__":
    main()
