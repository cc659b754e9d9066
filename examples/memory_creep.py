"""Planted problem: memory grows every step (expected finding: GD503 memory-creep).

The loop keeps every step's loss tensor in a list "for later averaging". Each loss still holds its
autograd graph, and the graph holds the activations saved for backward: nothing from any step is
ever freed, so allocated memory climbs until the job dies with an out-of-memory error hours in.

Fix (``--fix``): keep a detached number, not the tensor::

    history.append(loss.detach())      # or accumulate on the device; .item() only when logging

``--keep-every N`` logs (and so leaks) every N-th step's loss (default: every step on CPU, every 100th
on CUDA: ~270 MB of bf16 activations per kept graph at batch 8192, about a minute before an H200
fills). Batch 8192 keeps the GPU, not the host, setting the pace in bf16 (the first H200 run's
batch 1024 in fp32 would be host-bound once autocast is on).
"""

from __future__ import annotations

import torch
from _common import MLP, bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--keep-every", type=int, default=None, metavar="N")
    args = parser.parse_args()
    device = setup(args, "memory_creep")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, features, hidden, layers = (args.batch_size or 8192, 1024, 2048, 4) if on_cuda else \
        (args.batch_size or 64, 128, 256, 3)
    model = MLP(features, hidden, layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, features, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]
    history: list[torch.Tensor] = []
    keep_every = max(1, args.keep_every or (100 if on_cuda else 1))

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(x), y)
        logged = i % keep_every == 0
        # The planted bug: the logged loss is kept with its graph (retain_graph keeps the saved
        # activations, as code that calls backward twice on a logged loss must).
        loss.backward(retain_graph=logged and not args.fix)
        optimizer.step()
        if logged:
            history.append(loss.detach() if args.fix else loss)

    result = run_steps(args, device, step)
    extra: dict[str, object] = {"batch_size": batch}
    if on_cuda:
        extra["cuda_allocated_mib"] = f"{torch.cuda.memory_allocated(device) / 2**20:.0f}"
    report("memory_creep", args, device, result, keep_every=keep_every, **extra)


if __name__ == "__main__":
    main()
