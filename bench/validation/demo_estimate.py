#!/usr/bin/env python3
"""Does the demo's estimate hold? The gain `gpudoctor demo` promises for its fix, beside that fix measured.

The demo watches examples/input_bound.py (num_workers=0, a CPU "decode" per sample) and ranks its fix
first with an estimated speed-up range. This script, in one run on one machine:

1. runs ``gpudoctor demo --no-dashboard --format json --duration D --device DEV`` and reads the lead
   finding's estimate (code, low–high);
2. runs the example alone, unfixed and with ``--fix`` (the fix the demo's card gives: workers, pinned
   memory, persistent workers, prefetch), ``--rounds`` times each, interleaved (unfixed, fixed, unfixed,
   …), and takes each run's own timed rate (its result line, warm-up steps left out);
3. prints the estimate beside the measured speed-up (median of the fixed / unfixed rate ratios, with
   their range) and whether the range brackets it.

    python3 bench/validation/demo_estimate.py --device cuda     # on the GPU machine
    .venv/bin/python bench/validation/demo_estimate.py --device cpu --steps 120

Standard library only; the example jobs import torch, this script does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "input_bound.py"
RESULT_PREFIX = "gpudoctor-example:"


def demo_estimate(device: str, duration: float) -> dict[str, object]:
    """The lead finding of a non-interactive demo run: its code, estimate and the verdict line."""
    cmd = [sys.executable, "-m", "gpudoctor", "demo", "--no-dashboard", "--format", "json",
           "--duration", f"{duration:g}", "--device", device]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 180, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"demo failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    report = json.loads(proc.stdout)
    ranked = [f for f in report["findings"] if f.get("impact")]
    ranked.sort(key=lambda f: -(f["impact"]["est_speedup_low"] * f["impact"]["est_speedup_high"]) ** 0.5)
    lead = ranked[0] if ranked else None
    return {"wall_s": time.monotonic() - started, "lead": lead,
            "verdict": (report.get("bottleneck") or {}).get("line") or report["summary"]["headline"],
            "codes": sorted({f["code"] for f in report["findings"]})}


def example_rate(device: str, fix: bool, steps: int, warmup: int) -> float:
    cmd = [sys.executable, str(EXAMPLE), "--device", device, "--steps", str(steps), "--warmup-steps", str(warmup)]
    if fix:
        cmd.append("--fix")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=EXAMPLE.parent)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            fields = dict(p.split("=", 1) for p in line[len(RESULT_PREFIX):].split() if "=" in p)
            return float(fields["steps_per_s"])
    raise SystemExit(f"{' '.join(cmd)} printed no result line ({proc.returncode}): {proc.stderr.strip()[-800:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--duration", type=float, default=20.0, help="the demo's watch in seconds (default 20)")
    parser.add_argument("--steps", type=int, default=400, help="steps per measured run (default 400)")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up steps left out of each rate (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="unfixed/fixed pairs, interleaved (default 3)")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()

    demo = demo_estimate(args.device, args.duration)
    lead = demo["lead"]
    print(f"demo ({args.device}, {args.duration:g} s watch, {demo['wall_s']:.0f} s wall): codes {demo['codes']}",
          flush=True)
    print(f"  verdict: {demo['verdict']}", flush=True)
    ratios, unfixed, fixed = [], [], []
    for k in range(args.rounds):
        slow = example_rate(args.device, False, args.steps, args.warmup)
        fast = example_rate(args.device, True, args.steps, args.warmup)
        unfixed.append(slow)
        fixed.append(fast)
        ratios.append(fast / slow)
        print(f"  round {k + 1}: unfixed {slow:.2f} steps/s, --fix {fast:.2f} steps/s ({fast / slow:.2f}x)", flush=True)
    measured = statistics.median(ratios)
    row = {"device": args.device, "cpus": os.cpu_count(), "load": os.getloadavg()[0], "demo": demo,
           "unfixed_steps_per_s": unfixed, "fixed_steps_per_s": fixed, "ratios": ratios, "measured": measured}
    if lead is None:
        print(f"no finding with an estimate; measured {measured:.2f}x", flush=True)
        verdict = "no estimate"
    else:
        low, high = lead["impact"]["est_speedup_low"], lead["impact"]["est_speedup_high"]
        if low <= measured <= high:
            verdict = "brackets"
        else:
            edge = high if measured > high else low
            verdict = (f"{'under' if measured > high else 'over'}, "
                       f"{abs(measured / edge - 1) * 100:.1f}% from the range")
        print(f"\n| device | lead finding | estimate | measured (median of {args.rounds}, range) | estimate vs measured |")
        print("|---|---|---|---|---|")
        print(f"| {args.device} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}) | {lead['code']} | "
              f"{low:.2f}–{high:.2f}x | {measured:.2f}x ({min(ratios):.2f}–{max(ratios):.2f}) | {verdict} |", flush=True)
    row["verdict"] = verdict
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(row, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
