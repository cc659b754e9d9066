"""Planted problem: the host waits for the GPU several times per step (expected finding: GD301).

Two common habits: reading the loss with ``loss.item()`` every step for logging, and checking each
gradient on the host (``if p.grad.norm().item() > limit``) before the optimizer step. Each
``.item()`` blocks the Python thread until every queued kernel has finished, so the CPU cannot run
ahead and queue the next kernels: the GPU idles between them.

Fix (``--fix``): keep the running loss on the device and read it every ``--log-every`` steps;
clip with ``torch.nn.utils.clip_grad_norm_`` (one fused norm, no ``.item()``)::

    running += loss.detach()                  # no sync
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if step % 100 == 0: print(running.item() / 100)

Sizing (CUDA): batch 8192 through eight 2048-wide bf16 layers is a few ms of GPU work per step,
about as long as the host needs to launch it, so the fixed job keeps the GPU busy (the first H200
run used batch 512 / width 1024: fixed, it was still host-bound and the GPU idled), while the
unfixed one idles the GPU for every round trip.
"""

from __future__ import annotations

import torch
from _common import MLP, bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--log-every", type=int, default=100)
    args = parser.parse_args()
    device = setup(args, "host_sync")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, features, hidden, layers = (args.batch_size or 8192, 512, 2048, 8) if on_cuda else \
        (args.batch_size or 64, 128, 256, 4)
    model = MLP(features, hidden, layers).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, features, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]
    params = list(model.parameters())
    running = torch.zeros((), device=device)
    logged: list[float] = []

    def step(i: int) -> None:
        nonlocal running
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(x), y)
        loss.backward()
        if args.fix:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            running += loss.detach()
            if (i + 1) % args.log_every == 0:
                logged.append(running.item() / args.log_every)
                running.zero_()
        else:
            for p in params:  # a host round trip per parameter
                if p.grad is not None and p.grad.norm().item() > 1.0:
                    p.grad.mul_(1.0 / (p.grad.norm() + 1e-6))
            logged.append(loss.item())  # and one per step for logging
        optimizer.step()

    result = run_steps(args, device, step)
    report("host_sync", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
