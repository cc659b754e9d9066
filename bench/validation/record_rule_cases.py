"""Record the live reports that give the rules' live blocks their recorded cases (H200, ≤ 9 minutes).

Why this exists: ``tests/core/test_rule_cases.py`` wants, for every live ``[[when]]`` block, a fact
set recorded on a real GPU on which it fires; ``tests/data/rule_cases/make_cases.py`` takes them
from the JSON reports under ``tests/data/gpu_runs/**``. The fault-zoo validation keeps only its log, so
this script runs the zoo examples whose planted problem has live blocks and keeps each
``gpudoctor attach --format json`` report. Run on the GPU machine from the repository root::

    python3.12 bench/validation/record_rule_cases.py                 # all, writes $OUT/rule_cases/ (or --out)
    python3.12 bench/validation/record_rule_cases.py --only host_sync,tf32_off
    python3 bench/validation/record_rule_cases.py --cpu --only input_bound --duration 20   # CPU dry run

then copy the folder to ``tests/data/gpu_runs/<run>/rule_cases/``, run
``.venv/bin/python tests/data/rule_cases/make_cases.py`` and take the ``no_case`` line off each
block that gained a case (in its rule file; ``tests/core/test_rule_cases.py`` names them).

Per example (one at a time, each bounded by a timeout): start it with ``--steps 0``, wait for two
progress lines, ``gpudoctor attach PID --duration D --format json``, write the report, stop the job.
A failed example is written as ``<name>.error.txt`` and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from zoo import BY_NAME
from zoo_runner import Budget, Job, Settings, gd_json

#: Examples whose planted problem has live blocks, and the blocks they should record.
RECORD = {
    "input_bound": "GD102 live (agent data wait, py-spy data-loading share)",
    "small_shm": "GD103 (/dev/shm), GD104 (busy workers)",
    "no_autocast": "GD201 live (GPM tensor util, agent autocast off)",
    "tf32_off": "GD202 live (agent TF32 flag)",
    "host_sync": "GD301 live (agent syncs per step, py-spy host-sync share)",
    "graph_breaks": "GD401/GD402 live (dynamo counters)",
    "memory_pressure": "GD501/GD502 live (CUDA memory, allocator retries)",
    "memory_creep": "GD503 (allocated-memory trend)",
    "healthy": "GD403 live (eager CUDA job), the healthy baseline",
}


def record(name: str, settings: Settings, duration_s: float, budget: Budget, out: Path) -> str:
    """Run one example under ``attach`` and write its report; one line saying what happened."""
    job = Job(BY_NAME[name], False, settings)
    try:
        job.go()
        if not job.wait_warm(budget.timeout(settings.warm_s)):
            raise RuntimeError(f"no progress (alive: {job.alive()}): {' | '.join(job.stderr_tail[-2:])[:200]}")
        report, err = gd_json(["attach", str(job.pid), "--duration", str(duration_s), "--format", "json"],
                              budget.timeout(duration_s + 60))
        if report is None:
            raise RuntimeError(f"attach {err}")
        (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
        codes = sorted({f["code"] for f in report.get("findings", [])})
        return f"{name}: {', '.join(codes) or 'no findings'} ({report.get('agent', {}).get('status')})"
    except RuntimeError as exc:
        (out / f"{name}.error.txt").write_text(f"{exc}\n")
        return f"{name}: FAILED {exc}"
    finally:
        job.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated example names (default: all of RECORD)")
    parser.add_argument("--duration", type=float, default=12.0, help="attach --duration per example")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--cpu", action="store_true", help="CPU dry run (short arguments, --device cpu)")
    parser.add_argument("--out", type=Path, default=None, help="folder (default: $OUT/rule_cases)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(RECORD)
    unknown = [n for n in names if n not in RECORD]
    if unknown:
        parser.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(RECORD)}")
    out = args.out or Path(os.environ.get("OUT", "bench/results/rule_cases-new")) / "rule_cases"
    out.mkdir(parents=True, exist_ok=True)
    settings, budget = Settings.for_mode(args.cpu), Budget(args.budget_s)
    started = time.monotonic()
    for name in names:
        if budget.left() < args.duration + 30:
            print(f"{name}: skipped, budget spent", flush=True)
            continue
        print(f"[{time.monotonic() - started:5.0f}s] {record(name, settings, args.duration, budget, out)}", flush=True)
    print(f"reports in {out}; copy them to tests/data/gpu_runs/<run>/ and run tests/data/rule_cases/make_cases.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
