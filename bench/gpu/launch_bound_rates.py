"""Tool-free steps/s of examples/launch_bound.py: unfixed, GD303's fix alone, and the example's whole fix.

Why this exists: GD303 estimated 1.25–1.87× on launch_bound, whose ``--fix`` measured 8.4× — but that
fix is two changes (fused built-ins for the hand-rolled LayerNorm/GELU, then
``torch.compile(mode="reduce-overhead")``). ``--graphs-only`` is GD303's own fix alone: the
hand-rolled model compiled with ``reduce-overhead``. Each variant runs in its own process for
``--seconds`` after ``--warmup`` seconds (compile variants: ``--compile-warmup``); the rate is the
median of its progress lines in that window.

    python3 bench/gpu/launch_bound_rates.py [--seconds 25] [--warmup 10] [--compile-warmup 60]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "launch_bound.py"
VARIANTS = {"unfixed": [], "graphs only (GD303's fix)": ["--graphs-only"],
            "built-ins only": ["--fix", "--no-compile"], "whole fix": ["--fix"]}
LINE = re.compile(r"step (\d+): ([0-9.]+) steps/s")


def rate(flags: list[str], warmup: float, seconds: float) -> tuple[float | None, int]:
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--steps", "0", "--verbose", "--print-every", "20", *flags],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    started = time.monotonic()
    rates: list[float] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            now = time.monotonic() - started
            m = LINE.search(line)
            if m and now >= warmup:
                rates.append(float(m.group(2)))
            if now >= warmup + seconds:
                break
    finally:
        proc.kill()
        proc.wait()
    return (statistics.median(rates) if rates else None), len(rates)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=25.0)
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--compile-warmup", type=float, default=60.0)
    args = p.parse_args()
    rows = ["| variant | steps/s (median of progress lines) | lines | × unfixed |", "|---|---|---|---|"]
    base = None
    for label, flags in VARIANTS.items():
        compiled = "--graphs-only" in flags or flags == ["--fix"]
        r, n = rate(flags, args.compile_warmup if compiled else args.warmup, args.seconds)
        base = base if base is not None else r
        rows.append(f"| {label} | {r if r is None else f'{r:.1f}'} | {n} | "
                    f"{'' if (r is None or not base) else f'{r / base:.2f}×'} |")
        print(rows[-1], flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
