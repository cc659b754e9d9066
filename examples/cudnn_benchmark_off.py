"""Planted problem: a conv net with ``cudnn.benchmark`` off (expected finding: GD208 cudnn-autotuner-off).

With fixed input shapes, ``torch.backends.cudnn.benchmark = True`` lets cuDNN time its convolution
algorithms once and keep the fastest. Left off, cuDNN picks by heuristics, which is often slower.
This one is found by ``gpudoctor check`` (static: convolution layers, CUDA, and no
``cudnn.benchmark = True`` anywhere in the checked code).

Fix (``--fix``)::

    torch.backends.cudnn.benchmark = True   # once, before training (input shapes fixed)

The fix sits between two ``gpudoctor-fix`` marker comments; the validation checks this file as is
(the fixed code: no GD208 expected) and with the marked lines removed (the unfixed code a user
would have: GD208 expected).
"""

from __future__ import annotations

import torch
from _common import (
    channels_last,
    healthy_cuda_defaults,
    make_parser,
    nhwc,
    report,
    run_steps,
    setup,
)
from torch import nn


def conv_net(width: int, classes: int = 10) -> nn.Module:
    def block(c_in: int, c_out: int, stride: int) -> list[nn.Module]:
        return [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out),
                nn.ReLU(inplace=True)]

    return nn.Sequential(*block(3, width, 1), *block(width, width, 1), *block(width, 2 * width, 2),
                         *block(2 * width, 2 * width, 1), *block(2 * width, 4 * width, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, classes))


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "cudnn_benchmark_off")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device, cudnn_benchmark=False)  # everything else healthy; the autotuner is the problem
    if args.fix:
        # gpudoctor-fix: begin
        torch.backends.cudnn.benchmark = True
        # gpudoctor-fix: end
        pass
    batch, side, width = (args.batch_size or 512, 64, 64) if on_cuda else (args.batch_size or 8, 32, 16)
    model = channels_last(conv_net(width).to(device), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(nhwc(torch.randn(batch, 3, side, side, device=device)), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        # autocast written out (not _common.bf16_autocast): `gpudoctor check` reads this file alone
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=on_cuda):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("cudnn_benchmark_off", args, device, result, batch_size=batch,
           cudnn_benchmark=int(torch.backends.cudnn.benchmark))


if __name__ == "__main__":
    main()
