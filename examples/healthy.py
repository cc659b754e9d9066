"""The healthy baseline: no planted problem (expected finding: none).

What "healthy" means here: data already on the device (no input stall), bf16 autocast with TF32
allowed (tensor cores on CUDA), ``channels_last`` convolutions, ``cudnn.benchmark`` on, a fused
(CUDA) or foreach (CPU) optimizer, no host synchronisation inside the step, losses kept without
their graphs. gpudoctor should report nothing at warning level or above on this script; any finding
on it is a false positive. ``--fix`` is accepted and changes nothing (there is nothing to fix).
"""

from __future__ import annotations

import contextlib

import torch
from _common import SmallConvNet, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "healthy")
    on_cuda = device.type == "cuda"
    if on_cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    batch_size = args.batch_size or (256 if on_cuda else 16)
    side = 64 if on_cuda else 32
    model = SmallConvNet(width=64 if on_cuda else 16, blocks=3).to(device)
    model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented; not in the stubs
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch_size, 3, side, side, device=device).contiguous(memory_format=torch.channels_last),
             torch.randint(0, 10, (batch_size,), device=device)) for _ in range(4)]
    autocast = (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if on_cuda
                else contextlib.nullcontext())
    running_loss = torch.zeros((), device=device)

    def step(i: int) -> None:
        nonlocal running_loss
        images, labels = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.detach()  # stays on the device: no sync

    result = run_steps(args, device, step)
    report("healthy", args, device, result, batch_size=batch_size,
           mean_loss=f"{running_loss.item() / max(result.steps, 1):.4f}")


if __name__ == "__main__":
    main()
