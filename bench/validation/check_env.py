"""Validate `gpudoctor check --env` on a real GPU machine, in one go (< 1 minute).

Run on the GPU machine (python3.12, torch+CUDA, nvidia-ml-py; gpudoctor installed or run from the
repository root, which this script adds to sys.path):

    python3.12 bench/validation/check_env.py

It compares what `check --env` read *without importing torch* (torch/version.py as text, NVML) with
what torch itself says after import (torch.version.cuda, torch.cuda.device_count()), confirms that
the driver-vs-torch rule (GD803) stays quiet on a working machine, and that a CUDA_VISIBLE_DEVICES
naming a GPU one past the last is reported (GD706) in a subprocess. Prints a table; exits 1 if a row fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))


def check_env_json(extra_env: dict[str, str]) -> dict:
    env = {**os.environ, **extra_env,
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--env", "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=60)
    try:
        report = json.loads(out.stdout) if out.returncode in (0, 1) else None
    except json.JSONDecodeError:
        report = None
    if report is None:  # an import error also exits 1, with a traceback on stderr and no JSON
        raise SystemExit(f"gpudoctor check --env failed (exit {out.returncode}): {out.stderr.strip()[-2000:]}")
    return report


def main() -> int:
    from gpudoctor.static.machine import machine_factset

    facts = machine_factset()
    import torch  # only now, to compare

    rows = []
    rows.append(("torch CUDA from version.py == torch.version.cuda", facts.get("torch_cuda"), torch.version.cuda,
                 facts.get("torch_cuda") == torch.version.cuda))
    rows.append(("NVML gpu_count == torch.cuda.device_count()", facts.get("gpu_count"), torch.cuda.device_count(),
                 facts.get("gpu_count") == torch.cuda.device_count()))
    rows.append(("driver CUDA >= torch CUDA (torch works)", facts.get("driver_cuda"), torch.cuda.is_available(),
                 (facts.get("driver_cuda_version") or 0) >= (facts.get("torch_cuda_version") or 0)))
    report = check_env_json({})
    codes = {f["code"] for f in report["findings"]}
    rows.append(("GD803 quiet on this machine", sorted(codes), "", "GD803" not in codes))
    count = facts.get("gpu_count") or 0
    bad = check_env_json({"CUDA_VISIBLE_DEVICES": str(count)})
    bad_codes = {f["code"] for f in bad["findings"]}
    rows.append((f"GD706 for CUDA_VISIBLE_DEVICES={count}", sorted(bad_codes), "", "GD706" in bad_codes))
    print(f"{'check':<52} {'gpudoctor':>16} {'torch':>10}  ok")
    for name, ours, theirs, ok in rows:
        print(f"{name:<52} {str(ours):>16} {str(theirs):>10}  {'yes' if ok else 'NO'}")
    machine = next(t for t in report["tables"] if t["key"] == "machine")
    print(json.dumps({r["metric"]: r["value"] for r in machine["rows"]}))
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
