"""``torch.multiprocessing.spawn`` ranks on ONE GPU, watched by ``gpudoctor attach <parent pid>``.

Why this exists: ranks started the way pytorch/examples' ImageNet script starts them with
``--multiprocessing-distributed`` (``mp.spawn`` + ``init_method=tcp://…``: no ``RANK`` in their
environment) were never watched on a GPU (issue 16). This runs ``bench/validation/dist_job.py --launcher
spawn`` (small GPT, bf16 autocast, fused AdamW, 2 pinned-memory loader workers per rank) with both
ranks on the one GPU — over gloo, because NCCL refuses two ranks on one device ("Duplicate GPU
detected") — and attaches to the spawn *parent*, which must find both ranks from the process tree,
inject an agent into each and name the slowed rank (GD601).

Run on the GPU machine from the repository root (gpudoctor importable: ``pip install -e .`` or
``PYTHONPATH=src``), within ``--budget-s`` (default 120 s)::

    PYTHONPATH=src python3 bench/validation/spawn_validation.py            # results to $OUT (else --out)
    PYTHONPATH=src python3 bench/validation/spawn_validation.py --device cpu --budget-s 300   # CPU dry run

Scenarios, in order, each skipped when the budget cannot hold it: ``compute`` (rank 1 does +50%
bf16 matmuls), ``healthy``, ``input`` (rank 1's loader cannot keep up). Expected: compute → GD601 on
rank 1; healthy → no GD601; input → GD601 on rank 1, cause input. Printed: one table row per
scenario (found, cause, both ranks' step time / collective wait / status, the process table's roles);
``$OUT/spawn.json`` keeps every report. Every job is killed (its process group and every descendant)
even on errors. NVLink multicast stays off (``NCCL_NVLS_ENABLE=0`` …), as on the lent machines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

JOB = Path(__file__).resolve().parent / "dist_job.py"
ORDER = ("compute", "healthy", "input")
EXPECT = {"compute": (1, "compute"), "healthy": None, "input": (1, "input")}
#: Per device: attach seconds, calibration steps, start-up timeout, compute and input slowdown factors.
SETTINGS = {"cuda": (22, 20, 60, 0.5, 2.0), "cpu": (30, 10, 150, 1.5, 4.0)}


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    import psutil

    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        victims = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for child in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def rows_of(out: Path, rank: int) -> list[dict[str, Any]]:
    path = out / f"rank{rank}.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def scenario(mode: str, args: argparse.Namespace, env: dict[str, str], left_s: float) -> dict[str, Any]:
    attach_s, calib, start_s, compute_f, input_f = SETTINGS[args.device]
    work = Path(tempfile.mkdtemp(prefix=f"gd-spawn-{mode}-"))
    cmd = [sys.executable, str(JOB), "--launcher", "spawn", "--nprocs", "2", "--strategy", "ddp", "--mode", mode,
           "--device", args.device, "--backend", "gloo", "--calib-steps", str(calib),
           "--compute-factor", str(compute_f), "--input-factor", str(input_f),
           "--max-seconds", str(int(left_s) + 30), "--out", str(work)]
    res: dict[str, Any] = {"mode": mode}
    log = (work / "job.log").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
    try:
        while time.monotonic() - started < min(start_s, left_s - attach_s - 5):
            if all(len(rows_of(work, r)) >= calib + 5 for r in (0, 1)) or proc.poll() is not None:
                break
            time.sleep(0.5)
        res["ready_s"] = round(time.monotonic() - started, 1)
        if proc.poll() is not None or not all(len(rows_of(work, r)) >= calib + 5 for r in (0, 1)):
            res["error"] = "ranks did not get past calibration: " + (work / "job.log").read_text()[-600:]
            return res
        t0 = time.time()
        att = subprocess.run([sys.executable, "-m", "gpudoctor", "attach", str(proc.pid), "--duration", str(attach_s),
                              "--window", "2", "--no-stacks", "--format", "json", "--select", "GD601,GD610,GD613"],
                             capture_output=True, text=True, env=env, timeout=attach_s + 60)
        t1 = time.time()
        res["attach_rc"] = att.returncode
        try:
            report = json.loads(att.stdout)
        except json.JSONDecodeError:
            res["error"] = "attach gave no JSON: " + att.stderr[-600:]
            return res
        res["report"] = report
        res["alive_after"] = proc.poll() is None
        tables = {t.get("key"): t["rows"] for t in report.get("tables", [])}
        res["roles"] = sorted(row["role"] for row in tables.get("processes", []))
        res["ranks"] = tables.get("ranks", [])
        res["gd601"] = [(f["location"].get("rank"), f["message"].split("(", 2)[1].split(")")[0])
                        for f in report.get("findings", []) if f["code"] == "GD601" and f["location"].get("pid")]
        own = {}
        for r in (0, 1):
            sel = [row for row in rows_of(work, r) if t0 <= row["t"] <= t1]
            own[r] = round(sum(row["step_ms"] for row in sel) / len(sel), 1) if sel else None
        res["own_step_ms"] = own
        expected = EXPECT[mode]
        res["ok"] = (res["gd601"] == [] if expected is None else
                     [(r, c) for r, c in res["gd601"]][:1] == [expected])
        return res
    finally:
        kill_tree(proc)


def table(results: list[dict[str, Any]]) -> str:
    head = f"{'mode':8} {'ok':3} {'GD601 (rank, cause)':22} {'rank: step ms / coll wait % / status':48} roles"
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['mode']:8} {'-':3} error: {r['error'][:150]}")
            continue
        ranks = "; ".join(f"{row['rank']}: {row.get('step_time_ms')} / {row.get('collective_wait_pct')} / "
                          f"{row.get('status')}" for row in r["ranks"])
        roles = ",".join(f"{n}x{role}" for role in sorted(set(r["roles"])) if (n := r["roles"].count(role)))
        lines.append(f"{r['mode']:8} {'yes' if r['ok'] else 'NO':3} {str(r['gd601'] or 'none'):22} {ranks:48} {roles}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--budget-s", type=float, default=120.0)
    p.add_argument("--out", default=os.environ.get("OUT", "bench/results/spawn"))
    args = p.parse_args()
    deadline = time.monotonic() + args.budget_s
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1"}
    results = []
    for mode in ORDER:
        left = deadline - time.monotonic()
        if left < SETTINGS[args.device][0] + 20:
            results.append({"mode": mode, "error": f"skipped: {left:.0f} s of the budget left"})
            continue
        results.append(scenario(mode, args, env, left))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spawn.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(results))
    print(f"{sum(1 for r in results if r.get('ok'))} of {len(results)} as expected; reports in {out / 'spawn.json'}")


if __name__ == "__main__":
    main()
