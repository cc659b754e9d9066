"""Planted problem: a conv net with ``cudnn.benchmark`` off (expected finding: GD205 cudnn-benchmark-off).

With fixed input shapes, ``torch.backends.cudnn.benchmark = True`` lets cuDNN time its convolution
algorithms once and keep the fastest. Left off, cuDNN picks by heuristics, which is often slower.
This one is found by ``gpudoctor check`` (static: a conv model and no ``cudnn.benchmark = True``).

Fix (``--fix``)::

    torch.backends.cudnn.benchmark = True   # once, before training (input shapes fixed)
"""

from __future__ import annotations

import torch
from _common import SmallConvNet, make_parser, report, run_steps, setup
from torch import nn


def enable_cudnn_autotuner() -> None:
    """The fix, kept in one function so the planted problem is visible in the unfixed path."""
    torch.backends.cudnn.benchmark = True


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "cudnn_benchmark_off")
    on_cuda = device.type == "cuda"
    if args.fix:
        enable_cudnn_autotuner()
    batch, side, width = (args.batch_size or 128, 64, 64) if on_cuda else (args.batch_size or 8, 32, 16)
    model = SmallConvNet(width=width, blocks=3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, 3, side, side, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("cudnn_benchmark_off", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
