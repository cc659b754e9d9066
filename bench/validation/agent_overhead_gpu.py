#!/usr/bin/env python3
"""The H200 run of bench/perf/agent_overhead.py: agent overhead on a CPU-saturated CUDA job, in one call.

    python3.12 bench/validation/agent_overhead_gpu.py            # ~90 s: the CPU-saturated convnet (issue 13's goal)
    python3.12 bench/validation/agent_overhead_gpu.py --all      # + the launch-bound MLP and the plain convnet (~6 min)

The default workload is the case the overhead goal is about: a convnet fed by DataLoader workers on
every core, each sample burning 2 ms of real CPU ("decode"), pinned memory, ``non_blocking`` copies,
and one ``loss.item()`` per step (so the sampled sync counter has work). Steps/s with the agent
detached vs attached in 5+5 interleaved windows (ABBA) of 5 s; while attached a client polls
``stats`` once a second, as the live session does. It prints one short table: both rates, the change
with a 95 % interval, attached throughput as a share of detached (goal >= 99.5 %), the agent's own
reading (host syncs and H2D copies per step included) and a 3-step profile window. Attaches by
injection when hypno is installed, else in-process. Standard library + torch only; no network.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))

import agent_overhead

SATURATED = ("CPU-saturated convnet (DataLoader workers on every core)",
             ["--model", "conv", "--width", "64", "--batch", "128", "--workers", "-1", "--decode-ms", "2",
              "--syncs-per-step", "1", "--windows", "5", "--window-s", "5", "--no-micro"])
MORE = [
    ("launch-bound MLP", ["--model", "mlp", "--width", "1024", "--batch", "256", "--windows", "6", "--window-s", "4"]),
    ("small convnet", ["--model", "conv", "--width", "128", "--batch", "256", "--windows", "6", "--window-s", "4"]),
]


def main() -> int:
    extra = [a for a in sys.argv[1:] if a != "--all"]
    workloads = [SATURATED, *MORE] if "--all" in sys.argv[1:] else [SATURATED]
    for title, args in workloads:
        print(f"\n=== {title} ===", flush=True)
        agent_overhead.main(["--device", "cuda", *args, *extra])
    return 0


if __name__ == "__main__":
    sys.exit(main())
