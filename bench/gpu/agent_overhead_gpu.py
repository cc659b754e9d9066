#!/usr/bin/env python3
"""The H200 run of bench/agent_overhead.py: agent overhead on CUDA training loops, in one go.

    python3.12 bench/gpu/agent_overhead_gpu.py          # ~5 minutes, prints one table per workload

Two workloads: a launch-bound MLP (sub-millisecond steps: the worst case for a per-step hook) and a
small convnet (a few ms per step). For each: steps/s with the agent detached vs attached in 6+6
interleaved windows of 4 s (a client polls stats once a second while attached), the attach latency,
the hook cost in paired blocks, the agent's own reading (CUDA memory included), and a 3-step profile
window (ProfilerStep ranges and GPU kernels in the trace). Attaches by injection when hypno is
installed, else in-process. Standard library + torch only; no network.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import agent_overhead

WORKLOADS = [
    ("launch-bound MLP", ["--model", "mlp", "--width", "1024", "--batch", "256"]),
    ("small convnet", ["--model", "conv", "--width", "128", "--batch", "256"]),
]


def main() -> int:
    extra = sys.argv[1:]
    for title, args in WORKLOADS:
        print(f"\n=== {title} ===", flush=True)
        agent_overhead.main(["--device", "cuda", "--windows", "6", "--window-s", "4", *args, *extra])
    return 0


if __name__ == "__main__":
    sys.exit(main())
