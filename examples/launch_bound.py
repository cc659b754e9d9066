"""Planted problem: thousands of tiny kernels per step (expected finding: GD303 launch-bound).

A narrow, deep network written with hand-rolled LayerNorm and GELU (mean, subtract, square,
mean, add, rsqrt, multiply, … each its own kernel) on a small batch. Each kernel finishes in a few
microseconds, faster than Python and the CUDA driver can launch the next: the GPU waits for the
CPU.

Fix (``--fix``): use the fused built-ins (``nn.LayerNorm``, ``nn.functional.gelu``) — one kernel each
instead of eight — and on CUDA compile the model (``torch.compile``) so elementwise chains fuse
further, replaying the step's kernels as CUDA graphs (``mode="reduce-overhead"``, what GD303
recommends for static shapes)::

    x = F.gelu(F.layer_norm(x, x.shape[-1:], w, b))   # instead of 15 separate ops
    forward = torch.compile(model, mode="reduce-overhead")

``--no-compile`` keeps the fix to the built-ins only (compile time is part of the first steps).
"""

from __future__ import annotations

import math

import torch
from _common import bf16_autocast, healthy_cuda_defaults, make_parser, report, run_steps, setup
from torch import nn
from torch.nn import functional as F


class HandRolledBlock(nn.Module):
    def __init__(self, width: int, fused: bool) -> None:
        super().__init__()
        self.fused = fused
        self.linear = nn.Linear(width, width)
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            h = F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
            return x + F.gelu(self.linear(h), approximate="tanh")
        mean = x.mean(-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(-1, keepdim=True)
        h = centered * torch.rsqrt(var + 1e-5) * self.weight + self.bias
        h = self.linear(h)
        inner = math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)
        return x + 0.5 * h * (1.0 + torch.tanh(inner))


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--no-compile", action="store_true", help="with --fix: built-ins only, no torch.compile")
    parser.add_argument("--graphs-only", action="store_true",
                        help="without --fix: GD303's own fix alone — the hand-rolled ops kept, the model compiled "
                             "with mode=reduce-overhead (the launch_bound_rates.py probe (docs/bench-history.md))")
    args = parser.parse_args()
    device = setup(args, "launch_bound")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch, width, depth = (args.batch_size or 32, 128, 48) if on_cuda else (args.batch_size or 8, 64, 24)
    model = nn.Sequential(*(HandRolledBlock(width, args.fix) for _ in range(depth)), nn.Linear(width, 10)).to(device)
    compiled = on_cuda and ((args.fix and not args.no_compile) or args.graphs_only)
    forward = torch.compile(model, mode="reduce-overhead") if compiled else model
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=on_cuda, foreach=None if on_cuda else True)
    loss_fn = nn.CrossEntropyLoss()
    pool = [(torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device))
            for _ in range(4)]

    def step(i: int) -> None:
        x, y = pool[i % len(pool)]
        if forward is not model and mark_step is not None:
            mark_step()  # a new training step: earlier CUDA-graph outputs may be overwritten
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(forward(x), y)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("launch_bound", args, device, result, batch_size=batch, depth=depth)


if __name__ == "__main__":
    main()
