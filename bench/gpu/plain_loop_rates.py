"""Tool-free steps/s of the plain torchvision ResNet-50 loop in each combination of fixes.

Why this exists: the harness (``realscripts_validation.py --part 3``) measures the fixes gpudoctor
names, in its order, under ``gpudoctor run``. This measures what the loop reaches with no tool in it,
including combinations gpudoctor does not name (channels_last on a compiled model, CUDA graphs), so
that the sequence's end point can be set against the loop's ceiling.

    python3 bench/gpu/plain_loop_rates.py [--steps 600] [--variant "--bf16 --compile" …]

Each variant runs in its own process; the rate is the mean over the last two thirds of its printed
step times (``step_time_ms=``), so compile time and warm-up are left out.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "realscripts" / "torchvision_resnet50.py"
DEFAULT_VARIANTS = ["", "--compile", "--bf16 --compile", "--bf16 --channels-last --compile",
                    "--bf16 --channels-last --compile --compile-mode reduce-overhead"]


def rate(flags: str, steps: int, timeout_s: float) -> tuple[float | None, int, float]:
    started = time.monotonic()
    try:
        out = subprocess.run([sys.executable, str(SCRIPT), *flags.split(), "--steps", str(steps)],
                             capture_output=True, text=True, timeout=timeout_s).stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    times = [float(x) for x in re.findall(r"step_time_ms=([\d.]+)", out)]
    steady = times[len(times) // 3:]
    return (1000.0 * len(steady) / sum(steady) if steady else None), len(times), time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--timeout-s", type=float, default=170.0)
    p.add_argument("--variant", action="append", default=None)
    args = p.parse_args()
    rows = []
    base = None
    for flags in args.variant or DEFAULT_VARIANTS:
        r, n, wall = rate(flags, args.steps, args.timeout_s)
        base = base if base is not None or r is None else r
        rows.append((flags or "(fp32 eager)", r, n, wall))
        print(f"{flags or '(fp32 eager)'}: {r and round(r, 2)} steps/s over {n} steps, {wall:.0f} s", flush=True)
    print("\n| variant | steps/s | vs first | steps | wall s |\n|---|---|---|---|---|")
    for flags, r, n, wall in rows:
        vs = f"{r / base:.2f}x" if r and base else "-"
        print(f"| {flags} | {r and round(r, 2)} | {vs} | {n} | {wall:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
