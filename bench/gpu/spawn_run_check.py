"""`gpudoctor run` on pytorch/examples' ImageNet script with `--multiprocessing-distributed` (H200).

Why this exists: that script starts its ranks with ``torch.multiprocessing.spawn`` and a
``tcp://`` init method, so the ranks carry no RANK in their environment and look like any other
multiprocessing child. ``gpudoctor run`` must give each rank an agent (the bootstrap's
``init_process_group`` hook), watch rank 0 rather than the spawn parent, and report steps. On one
GPU the script spawns one rank (NCCL, world size 1).

    python3 bench/gpu/spawn_run_check.py --scripts thirdparty [--duration 40]

Prints one table row and writes ``spawn_run.json`` (the report) to ``$OUT``; exit 0 when the watched
process is a rank with steps.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--scripts", type=Path, required=True, help="folder of fetched third-party scripts")
    p.add_argument("--duration", type=float, default=40.0)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "."))
    args = p.parse_args()
    cwd = args.scripts / "pytorch_examples" / "imagenet"
    report_path = args.out / "spawn_run.json"
    cmd = [sys.executable, "-m", "gpudoctor", "run", "--duration", f"{args.duration:g}", "--no-stacks",
           "--format", "json", "-o", str(report_path), "--",
           sys.executable, "main.py", "--dummy", "-a", "resnet50", "-j", "8", "--multiprocessing-distributed",
           "--world-size", "1", "--rank", "0", "--dist-url", f"tcp://127.0.0.1:{_free_port()}"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = started + args.duration + 120
        while not (report_path.exists() and report_path.stat().st_size) and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    if not report_path.exists():
        print(f"no report after {time.monotonic() - started:.0f} s; stderr: {proc.stderr.read().decode()[-2000:]}")
        return 1
    report = json.loads(report_path.read_text())
    steps = report.get("steps") or {}
    ranks = [row for t in report.get("tables", []) if t.get("key") == "processes" for row in t["rows"]]
    roles = {row["pid"]: row["role"] for row in ranks}
    top = [(f["code"], f["severity"], (f.get("impact") or {}).get("est_speedup")) for f in report["findings"][:4]]
    bottleneck = (report.get("bottleneck") or {}).get("line")
    print("| watched pid | its role | steps | steps/s | data wait % | top findings | verdict |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {report.get('target_pid')} | {roles.get(report.get('target_pid'), '?')} | {steps.get('steps_total')} "
          f"| {steps.get('steps_per_s')} | {steps.get('data_wait_pct')} | {top} | {bottleneck} |")
    print("notes:", report.get("notes"))
    ok = bool(steps.get("steps_total")) and roles.get(report.get("target_pid")) in ("main", "rank")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
