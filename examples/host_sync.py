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

from collections.abc import Callable

import torch
from _common import MLP, bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def make_step(device: torch.device, variant: str = "planted", log_every: int = 100,
              batch_size: int | None = None) -> tuple[Callable[[int], None], int]:
    """The training step and its batch size. ``variant``: ``planted`` (the fault), ``fixed`` (the fix),
    or ``no_reads`` — the planted per-parameter norms still launched but never read in the step (for
    the host_sync_probe.py probe (docs/bench-history.md), which measures what the reads cost apart from the launches)."""
    on_cuda = device.type == "cuda"
    batch, features, hidden, layers = (batch_size or 8192, 512, 2048, 8) if on_cuda else \
        (batch_size or 64, 128, 256, 4)
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
        if variant == "fixed":
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            running += loss.detach()
            if (i + 1) % log_every == 0:
                logged.append(running.item() / log_every)
                running.zero_()
        elif variant == "no_reads":
            norms = torch.stack([p.grad.norm() for p in params if p.grad is not None])
            running += loss.detach()
            if (i + 1) % log_every == 0:
                logged.append(float(norms.max().item()) + running.item())
                running.zero_()
        else:
            for p in params:  # a host round trip per parameter
                if p.grad is not None and p.grad.norm().item() > 1.0:
                    p.grad.mul_(1.0 / (p.grad.norm() + 1e-6))
            logged.append(loss.item())  # and one per step for logging
        optimizer.step()

    return step, batch


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--log-every", type=int, default=100)
    args = parser.parse_args()
    device = setup(args, "host_sync")
    healthy_cuda_defaults(device)
    step, batch = make_step(device, "fixed" if args.fix else "planted", args.log_every, args.batch_size)
    result = run_steps(args, device, step)
    report("host_sync", args, device, result, batch_size=batch)


if __name__ == "__main__":
    main()
