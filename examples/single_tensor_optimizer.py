"""Planted problem: the optimizer updates parameters one tensor at a time (expected finding: GD204).

``Adam(foreach=False)`` runs a separate handful of kernels for every parameter tensor. A model with
hundreds of parameter tensors (here: many small layers) spends most of its optimizer step launching
kernels.

Fix (``--fix``): the fused CUDA implementation (one kernel for all parameters), or ``foreach=True``
(multi-tensor kernels) where fused is unavailable::

    torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
"""

from __future__ import annotations

import torch
from _common import bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "single_tensor_optimizer")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, width, depth = (args.batch_size or 256, 256, 96) if on_cuda else (args.batch_size or 32, 64, 48)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(device)
    if args.fix:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if on_cuda else None,
                                      foreach=None if on_cuda else True)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("single_tensor_optimizer", args, device, result, batch_size=batch,
           param_tensors=sum(1 for _ in model.parameters()))


if __name__ == "__main__":
    main()
