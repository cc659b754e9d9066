"""Planted problem: fp32 matmuls with TF32 disabled (expected finding: GD202 tf32-disabled; GD201 too).

PyTorch's default for matmuls is full-precision fp32 on CUDA cores. On Ampere and later, TF32
tensor cores run the same fp32 matmuls several times faster with a 10-bit mantissa, which is
plenty for training.

Fix (``--fix``)::

    torch.backends.cuda.matmul.allow_tf32 = True   # or torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True

After the fix GD201 (missing-autocast) may still fire: bf16 autocast would be faster again. That is
expected, not a false positive. On CPU TF32 does not exist: the fix changes nothing there.
"""

from __future__ import annotations

import torch
from _common import MLP, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    device = setup(args, "tf32_off")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device, tf32=args.fix)
    torch.backends.cuda.matmul.allow_tf32 = args.fix  # the planted problem (also on the CPU, where it is moot)
    torch.backends.cudnn.allow_tf32 = args.fix
    batch, features, hidden, layers = (args.batch_size or 4096, 1024, 4096, 6) if on_cuda else \
        (args.batch_size or 64, 256, 512, 3)
    model = MLP(features, hidden, layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, features, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("tf32_off", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
