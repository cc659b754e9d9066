"""What the host syncs of examples/host_sync.py cost on their own, apart from the rest of its fix.

Why this exists: the planted fault reads each gradient's norm with ``.item()`` (one round trip per
parameter) and the loss every step; its ``--fix`` replaces the per-parameter loop with one
``clip_grad_norm_`` (fused norms, no read) and reads the loss every 100 steps. The fix therefore
removes two things — the syncs, and the per-parameter norm launches and Python — and its measured
gain (1.19–1.27x on the H200) does not say which one GD301's estimate should carry. This probe runs
the example's model and step in variants that remove one thing at a time:

- ``unfixed``: the planted step (per-parameter ``norm().item()`` check, ``loss.item()``);
- ``no_reads``: the same per-parameter norms launched, never read in the step (stacked on the GPU,
  read every 100 steps), the loss read every 100 steps — the syncs gone, the launches kept;
- ``fixed``: the example's fix.

For each: steps/s over ``--seconds`` after a warm-up (a CUDA sync at both ends only), and a
torch.profiler trace of 5 steps (``$OUT/host_sync_<variant>.json.gz``) for ``gpudoctor analyze``.

    python3 bench/gpu/host_sync_probe.py --seconds 4      # on the H200
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from _common import healthy_cuda_defaults
from host_sync import make_step


def rate(step, seconds: float) -> float:  # type: ignore[no-untyped-def]
    for i in range(30):
        step(i)
    torch.cuda.synchronize()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step(done)
        done += 1
    torch.cuda.synchronize()
    return done / (time.perf_counter() - t0)


def trace(step, path: Path) -> None:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile, schedule

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        # the window is written when it ends (torch.profiler clears its events after each cycle)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=0, warmup=2, active=5),
                     on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw))) as prof:
            for i in range(8):
                step(i)
                prof.step()
        path.write_bytes(gzip.compress(raw.read_bytes()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is printed")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = p.parse_args()
    device = torch.device("cuda")
    healthy_cuda_defaults(device)
    variants = ("unfixed", "no_reads", "fixed")
    steps = {v: make_step(device, "planted" if v == "unfixed" else v)[0] for v in variants}
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for v in variants:
            rates[v].append(rate(steps[v], args.seconds))
    args.out.mkdir(parents=True, exist_ok=True)
    for v in variants:
        trace(steps[v], args.out / f"host_sync_{v}.json.gz")
    base = sorted(rates["unfixed"])[len(rates["unfixed"]) // 2]
    print("| variant | steps/s (median of rounds) | rounds | × unfixed |\n|---|---|---|---|")
    for v in variants:
        med = sorted(rates[v])[len(rates[v]) // 2]
        print(f"| {v} | {med:.1f} | {', '.join(f'{r:.1f}' for r in rates[v])} | {med / base:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
