"""Planted problem: a conv net under AMP in NCHW layout (expected finding: GD203 channels-last-missing).

cuDNN's fast tensor-core convolutions want NHWC ("channels last"). With bf16 autocast and the
default NCHW layout, cuDNN transposes activations before and after convolutions
(``nchwToNhwcKernel`` / ``nhwcToNchwKernel`` in a trace) — pure overhead.

Fix (``--fix``)::

    model = model.to(memory_format=torch.channels_last)
    x = x.to(memory_format=torch.channels_last)
"""

from __future__ import annotations

import torch
from _common import SmallConvNet, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "channels_last_missing")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, side, width = (args.batch_size or 512, 64, 64) if on_cuda else (args.batch_size or 8, 32, 16)
    fmt = torch.channels_last if args.fix else torch.contiguous_format
    model = SmallConvNet(width=width, blocks=3).to(device)
    model.to(memory_format=fmt)  # type: ignore[call-overload]  # documented; not in the stubs
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, 3, side, side, device=device).contiguous(memory_format=fmt),
             torch.randint(0, 10, (batch,), device=device)) for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("channels_last_missing", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
