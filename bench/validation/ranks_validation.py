"""Validate many-ranks diagnosis on real GPUs, in one go (≤ 6 minutes, partial results on failure).

Run on the GPU machine from the repository root (python3.12, torch+CUDA; gpudoctor installed):

    python3.12 bench/validation/ranks_validation.py              # 2 GPUs: NCCL; 1 GPU: 2 gloo ranks share it

For each scenario — healthy, rank 1 with extra compute, rank 1 with slow data loading — it starts
``torchrun`` with 2 ranks of ``tests/ranks/ddp_job.py`` on CUDA, with the agent in every rank (the
environment ``gpudoctor run`` gives a command), then runs ``gpudoctor attach <torchrun pid>
--duration 20 --format json`` and reads its GD601/GD610 findings. It also computes, from the
per-step rows the ranks write themselves (collective wait measured by a DDP comm hook), what the
straggler tracker says with the *measured* collective wait. Expected: healthy → no straggler;
input → rank 1 "input" in both columns; compute → rank 1 "compute" with the measured wait (the
live column needs the agent to report collective wait; until then it says nothing — by design).

Prints one table (after each scenario too) and a JSON line per scenario. Needs no network.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "tests" / "ranks" / "ddp_job.py"
TOTAL_BUDGET_S = 360.0
START_TIMEOUT_S = 90.0
ATTACH_S = 20
WINDOW_STEPS = 10


def _windows(out: Path) -> list[list[Any]]:
    from gpudoctor.live.stragglers import RankWindow

    rows = {r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    n = min(len(v) for v in rows.values())
    result = []
    for start in range(10, n - WINDOW_STEPS + 1, WINDOW_STEPS):
        wins = []
        for rank, rr in rows.items():
            chunk = rr[start:start + WINDOW_STEPS]

            def med(key: str, chunk: list[dict] = chunk) -> float:
                return float(statistics.median(row[key] for row in chunk))
            wins.append(RankWindow(rank, chunk[-1]["pid"], chunk[-1]["step"], len(chunk), med("step_ms"),
                                   med("data_wait_ms"), med("h2d_ms"), med("collective_wait_ms"), med("compute_ms")))
        result.append(wins)
    return result


def _measured_verdict(out: Path) -> str:
    from gpudoctor.live.stragglers import StragglerTracker

    tracker = StragglerTracker()
    named: dict[tuple[int, str | None], float] = {}
    last = None
    for i, wins in enumerate(_windows(out)):
        last = tracker.update(wins, float(i))
        for v in last.stragglers:
            named[(v.rank, v.cause)] = min(named.get((v.rank, v.cause), 1.0), v.score or 1.0)
    names = [f"rank {r} ({c}, min score {s:.2f})" for (r, c), s in sorted(named.items())]
    if last is None:
        return "no windows"
    steps = " / ".join(f"{w.step_time_ms:.1f}" for w in last.windows)
    waits = " / ".join(f"{w.collective_wait_ms:.1f}" for w in last.windows)
    return f"{', '.join(names) or 'none'} [step ms {steps}; coll wait ms {waits}]"


def run_scenario(mode: str, gpus: int) -> dict[str, Any]:
    from gpudoctor.commands.run import agent_env

    backend = "nccl" if gpus >= 2 else "gloo"
    out = Path(tempfile.mkdtemp(prefix=f"gd-ranks-{mode}-"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(JOB),
           "--launcher", "env", "--device", "cuda", "--backend", backend, "--mode", mode,
           "--steps", "100000", "--matmul-dim", "2048", "--read-delay-ms", "2.0", "--out", str(out)]
    started = time.time()
    proc = subprocess.Popen(cmd, env=agent_env(dict(os.environ)), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    result: dict[str, Any] = {"mode": mode, "backend": backend}
    try:
        while not all((out / f"rank{r}.jsonl").exists() for r in (0, 1)):
            if proc.poll() is not None or time.time() - started > START_TIMEOUT_S:
                err = proc.stderr.read().decode()[-400:] if proc.stderr else ""
                result["error"] = f"ranks did not start: {err}"
                return result
            time.sleep(0.3)
        t0 = time.time()
        att = subprocess.run([sys.executable, "-m", "gpudoctor", "attach", str(proc.pid), "--duration", str(ATTACH_S),
                              "--window", "2", "--no-agent", "--no-stacks", "--format", "json",
                              "--select", "GD601,GD610,GD101,GD701,GD703"],
                             capture_output=True, text=True, timeout=ATTACH_S + 60)
        result["attach_s"] = round(time.time() - t0, 1)
        try:
            report = json.loads(att.stdout)
        except json.JSONDecodeError:
            result["error"] = f"attach exit {att.returncode}: {att.stderr[-300:]}"
            return result
        result["live"] = [f"{f['code']} {f['where']}: {f['message'][:90]}" for f in report["findings"]
                          if f["code"] in ("GD601", "GD610")] or ["none"]
        result["other"] = sorted({f["code"] for f in report["findings"]} - {"GD601", "GD610"})
        result["measured"] = _measured_verdict(out)
        result["job_alive_after_attach"] = proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    return result


def print_table(results: list[dict[str, Any]]) -> None:
    print(f"\n{'scenario':9} {'backend':7} {'attach s':8} live GD601/GD610  |  measured-wait tracker")
    for r in results:
        live = "; ".join(r.get("live", [])) or r.get("error", "")
        print(f"{r['mode']:9} {r['backend']:7} {r.get('attach_s', '-')!s:8} {live}")
        print(f"{'':27}measured: {r.get('measured', '-')}  job alive: {r.get('job_alive_after_attach')}"
              f"  other: {r.get('other')}")


def main() -> int:
    import torch

    gpus = torch.cuda.device_count()
    if gpus == 0:
        print("no CUDA GPU: this validation needs one (two for NCCL)")
        return 6
    deadline = time.time() + TOTAL_BUDGET_S
    results = []
    for mode in ("healthy", "compute", "input"):
        if time.time() > deadline:
            results.append({"mode": mode, "backend": "-", "error": "skipped: time budget spent"})
            continue
        try:
            results.append(run_scenario(mode, gpus))
        except Exception as exc:  # keep partial results
            results.append({"mode": mode, "backend": "-", "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(results[-1]))
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
