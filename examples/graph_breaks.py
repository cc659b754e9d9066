"""Planted problem: ``torch.compile`` splits the model into many graphs (expected finding: GD401).

The forward pass of a compiled model calls ``print`` and reads a tensor with ``.item()`` to decide
a branch. Dynamo cannot trace either, so it breaks the graph there: the model runs as several
compiled pieces with Python (and a host sync) between them, losing most of the fusion benefit.

Fix (``--fix``): keep side effects and data-dependent Python out of the compiled region — log
outside, and express the branch with tensor ops (``torch.where``)::

    scale = torch.where(h.abs().mean() > 1.0, 0.5, 1.0)   # instead of: if h.abs().mean().item() > 1.0:
    h = h * scale

On CPU the default backend is ``eager`` (Dynamo still traces and breaks graphs, without a C++
compile); pass ``--backend inductor`` to compile for real.
"""

from __future__ import annotations

import torch
from _common import bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn


class BreakyMLP(nn.Module):
    def __init__(self, features: int, hidden: int, fix: bool) -> None:
        super().__init__()
        self.fix = fix
        self.inp = nn.Linear(features, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(4))
        self.out = nn.Linear(hidden, 10)

    def _scale(self, h: torch.Tensor, first: bool) -> torch.Tensor:
        if self.fix:
            return h * torch.where(h.abs().mean() > 1.0, 0.5, 1.0)
        if h.abs().mean().item() > 1.0:  # graph break + host sync
            h = h * 0.5
        if first:
            print("", end="")  # graph break: side effect inside the compiled region
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Straight-line code on purpose: a graph break inside a Python loop makes Dynamo give up on
        # the whole frame (running it eagerly) instead of splitting it.
        b = self.blocks
        h = torch.relu(self.inp(x))
        h = self._scale(torch.relu(b[0](h)), True)
        h = self._scale(torch.relu(b[1](h)), False)
        h = self._scale(torch.relu(b[2](h)), False)
        h = self._scale(torch.relu(b[3](h)), False)
        return self.out(h)


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--backend", default=None, help="torch.compile backend (default: inductor on CUDA, "
                        "eager on CPU)")
    args = parser.parse_args()
    device = setup(args, "graph_breaks")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    backend = args.backend or ("inductor" if on_cuda else "eager")
    batch, features, hidden = (args.batch_size or 1024, 512, 1024) if on_cuda else (args.batch_size or 64, 128, 256)
    model = BreakyMLP(features, hidden, args.fix).to(device)
    compiled = torch.compile(model, backend=backend)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, features, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(compiled(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    breaks = 0
    try:
        from torch._dynamo.utils import counters
        breaks = sum(counters["graph_break"].values())
    except Exception:  # private API: the count is only informative
        breaks = -1
    report("graph_breaks", args, device, result, batch_size=batch, backend=backend, graph_breaks=breaks)


if __name__ == "__main__":
    main()
