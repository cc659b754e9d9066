"""Validate the live side of gpudoctor on a real GPU, in one go (≤ 8 minutes, partial results on failure).

Run on the GPU machine (python3.12, torch+CUDA, nvidia-ml-py, psutil; gpudoctor, py-spy, hypno installed):

    python3.12 bench/validation/live_validation.py            # all three workloads
    python3.12 bench/validation/live_validation.py --quick    # fewer overhead windows

For each workload — fp32 conv net (expect GD201 missing-autocast from GPM tensor-core util ≈ 0),
bf16 autocast (expect no GD201), input-bound DataLoader (expect GD102) — it starts a CUDA training
loop as a subprocess, attaches a LiveSession (NVML + process + /dev/shm + py-spy + injected agent),
measures the time to the first finding, the GPM tensor-core util, a 5-step profile window analysed
through the trace analyzer, and the overhead: steps/s in interleaved unattached/attached windows
(≥ 5 each; attached = a fresh session started, warmed up, measured, closed). It also runs the CLI
once (``gpudoctor attach --once --format json``). Prints one table at the end (and after each
workload, so a crash still leaves partial results), plus a JSON line per workload.

Every step is bounded by a timeout; the workloads are killed at the end. Needs no network and no
torchvision.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

TOTAL_BUDGET_S = 450.0          # hard stop for the whole script (< 8 min)
START_TIMEOUT_S = 90.0
DIAGNOSE_TIMEOUT_S = 20.0
PROFILE_TIMEOUT_S = 20.0
ABSENT_WAIT_S = 12.0
WARM_S = 4.0                    # steady state: after the agent's first step and the first py-spy window            # how long a finding that should NOT appear is given to appear

WORKLOAD = textwrap.dedent('''
    import mmap, os, struct, sys, time
    import torch, torch.nn as nn
    from torch.utils.data import DataLoader, Dataset
    mode, counter_path, dev = sys.argv[1], sys.argv[2], sys.argv[3]
    res, batch = (112, 128) if dev == "cuda" else (32, 8)     # cpu: plumbing smoke test only
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False      # fp32 really on CUDA cores

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
    model = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                          block(64, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    class Slow(Dataset):
        def __len__(self): return 10**9
        def __getitem__(self, i):
            x = torch.randn(3, res, res)
            for _ in range(40):                     # a heavy per-sample CPU transform
                x = torch.tanh(x * 1.01)
            return x, i % 1000

    fd = os.open(counter_path, os.O_RDWR)
    counter = mmap.mmap(fd, 16)
    if mode == "input":
        batches = iter(DataLoader(Slow(), batch_size=batch // 2, num_workers=0))
        get = lambda: tuple(t.to(dev, non_blocking=True) for t in next(batches))
    else:
        xs = torch.randn(batch, 3, res, res, device=dev); ys = torch.randint(0, 1000, (batch,), device=dev)
        get = lambda: (xs, ys)
    step = 0
    while True:
        x, y = get()
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=(mode == "bf16")):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 5 == 0 and dev == "cuda":
            torch.cuda.synchronize()              # bound the queue: the counter tracks GPU work done
        counter[:16] = struct.pack("qd", step, time.monotonic())
        if step == 5:
            print("ready", flush=True)
''')

CASES = [
    # workload, expected rule, expect present?
    ("fp32", "GD201", True),
    ("bf16", "GD201", False),
    ("input", "GD102", True),
]


class Budget:
    def __init__(self, total_s: float) -> None:
        self.end = time.monotonic() + total_s

    def left(self) -> float:
        return self.end - time.monotonic()


class Workload:
    """A CUDA training loop in a subprocess with a shared (step, time) counter in an mmap'd file."""

    def __init__(self, mode: str, tmp: Path, device: str = "cuda") -> None:
        self.mode = mode
        self.counter_path = tmp / f"counter-{mode}"
        self.counter_path.write_bytes(b"\0" * 16)
        script = tmp / "workload.py"
        script.write_text(WORKLOAD)
        # Output goes to a file, never a pipe: a full pipe would block the training loop.
        self.log_path = tmp / f"workload-{mode}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([sys.executable, str(script), mode, str(self.counter_path), device],
                                         stdout=log, stderr=subprocess.STDOUT)
        fd = os.open(self.counter_path, os.O_RDONLY)
        self._map = mmap.mmap(fd, 16, prot=mmap.PROT_READ)
        os.close(fd)

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.steps() >= 5:
                return
            if self.proc.poll() is not None:
                err = self.log_path.read_text(errors="replace")[-500:]
                raise RuntimeError(f"{self.mode} workload exited ({self.proc.returncode}): {err}")
            time.sleep(0.2)
        raise TimeoutError(f"{self.mode} workload not ready after {timeout_s:.0f} s")

    def steps(self) -> int:
        return int(struct.unpack("qd", self._map[:16])[0])

    def rate(self, seconds: float) -> float:
        """Steps/s over about ``seconds``, from the workload's own (step, time) stamps."""
        s0, t0 = struct.unpack("qd", self._map[:16])
        time.sleep(seconds)
        s1, t1 = struct.unpack("qd", self._map[:16])
        if s1 <= s0 or t1 <= t0:
            raise RuntimeError(f"{self.mode} workload made no step in {seconds:.0f} s")
        return (s1 - s0) / (t1 - t0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def diagnose(work: Workload, code: str, expect: bool, budget: Budget) -> dict[str, Any]:
    from gpudoctor.catalog import load_catalog
    from gpudoctor.live.session import LiveSession

    row: dict[str, Any] = {}
    session = LiveSession(work.proc.pid, load_catalog(), agent="inject", window_s=2.0)
    t0 = time.monotonic()
    session.start()
    try:
        limit = min(DIAGNOSE_TIMEOUT_S if expect else ABSENT_WAIT_S, max(1.0, budget.left() - 30))
        found = session.wait_until(lambda s: any(f.code == code for f in s.findings), limit)
        row["found"] = found
        row["first_finding_s"] = round(time.monotonic() - t0, 1) if found else None
        row["pass"] = found == expect
        snap = session.snapshot()
        tensor = [g.gpm_tensor_util_pct for s in session.history() for g in s.gpus if g.gpm_tensor_util_pct is not None]
        sm = [g.gpm_sm_util_pct for s in session.history() for g in s.gpus if g.gpm_sm_util_pct is not None]
        util = [g.util_pct for s in session.history() for g in s.gpus if g.util_pct is not None]
        row["gpm_tensor_pct"] = round(statistics.fmean(tensor), 2) if tensor else None
        row["gpm_sm_pct"] = round(statistics.fmean(sm), 1) if sm else None
        row["nvml_util_pct"] = round(statistics.fmean(util), 0) if util else None
        row["agent"] = snap.agent.status + (f" ({snap.agent.detail})" if snap.agent.detail else "")
        row["findings"] = sorted({f.code for f in snap.findings})
        row["data_wait_pct"] = round(snap.steps.data_wait_pct, 1) if snap.steps and snap.steps.data_wait_pct else None
        row["stack_data_pct"] = snap.stacks.share_pct.get("data_loading") if snap.stacks else None
        # 5-step profile window through the agent, analysed by the trace analyzer
        if snap.agent.status == "connected" and budget.left() > 60:
            p0 = time.monotonic()
            row["profile_request"] = session.profile(5)
            done = session.wait_until(lambda s: (s.agent.profile_status or "").startswith(("done", "failed")),
                                      PROFILE_TIMEOUT_S)
            snap = session.snapshot()
            row["profile"] = f"{snap.agent.profile_status} in {time.monotonic() - p0:.1f}s" if done else "timeout"
            row["trace_findings"] = sorted({f.code for f in snap.findings if f.source.value == "trace"})
        row["notes"] = list(snap.notes)
    finally:
        session.close()
    row["alive_after_detach"] = work.proc.poll() is None
    return row


def overhead(work: Workload, pairs: int, window_s: float, budget: Budget) -> dict[str, Any]:
    from gpudoctor.catalog import load_catalog
    from gpudoctor.live.session import LiveSession

    catalog = load_catalog()
    base, attached = [], []
    for _ in range(pairs):
        if budget.left() < 2 * window_s + 15:
            break
        base.append(work.rate(window_s))
        session = LiveSession(work.proc.pid, catalog, agent="inject", window_s=2.0).start()
        try:  # warm: agent injected and started, NVML opened, py-spy running; the attach transient
            session.wait_until(lambda s: s.agent.status != "injecting", 10.0)  # is reported as t_first_s
            time.sleep(WARM_S)
            attached.append(work.rate(window_s))
        finally:
            session.close()
        time.sleep(0.5)
    if not base or not attached:
        return {"overhead": "skipped (time)"}
    ratio = statistics.median(attached) / statistics.median(base)
    return {"steps_s_unattached": round(statistics.median(base), 2), "steps_s_attached": round(statistics.median(attached), 2),
            "windows": f"{len(base)}+{len(attached)}", "throughput_pct": round(100 * ratio, 2),
            "overhead_ok": ratio >= 0.995}


def cli_once(work: Workload) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "gpudoctor", "attach", str(work.proc.pid), "--once", "--format", "json"],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return {"cli_once": "timeout"}
    elapsed = time.monotonic() - t0
    try:
        codes = sorted({f["code"] for f in json.loads(proc.stdout)["findings"]})
    except (ValueError, KeyError):
        return {"cli_once": f"rc={proc.returncode} {proc.stderr.strip()[-200:]}"}
    return {"cli_once": f"rc={proc.returncode} {elapsed:.1f}s {','.join(codes) or '-'}"}


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = [("workload", 8), ("expect", 11), ("found", 6), ("pass", 5), ("t_first_s", 9), ("tensor%", 8),
            ("sm%", 6), ("util%", 6), ("thru%", 7), ("profile", 16), ("cli_once", 22)]
    print("\n" + " ".join(name.ljust(width) for name, width in cols))
    for r in rows:
        vals = [r.get("workload"), r.get("expect"), r.get("found"), r.get("pass"), r.get("first_finding_s"),
                r.get("gpm_tensor_pct"), r.get("gpm_sm_pct"), r.get("nvml_util_pct"), r.get("throughput_pct"),
                r.get("profile"), r.get("cli_once")]
        print(" ".join(str("-" if v is None else v)[:w].ljust(w) for v, (_, w) in zip(vals, cols)))
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 overhead pairs instead of 5")
    parser.add_argument("--only", choices=[c[0] for c in CASES], action="append")
    parser.add_argument("--device", default="cuda", help="cpu: smoke-test the plumbing without a GPU")
    args = parser.parse_args()
    budget = Budget(TOTAL_BUDGET_S)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gd-live-") as tmp_name:
        tmp = Path(tmp_name)
        for mode, code, expect in CASES:
            if args.only and mode not in args.only:
                continue
            row: dict[str, Any] = {"workload": mode, "expect": f"{code} {'yes' if expect else 'no'}"}
            rows.append(row)
            if budget.left() < 60:
                row["error"] = "skipped: time budget spent"
                continue
            work = Workload(mode, tmp, args.device)
            try:
                work.wait_ready(min(START_TIMEOUT_S, budget.left() - 30))
                row.update(diagnose(work, code, expect, budget))
                row.update(cli_once(work))
                row.update(overhead(work, 3 if args.quick else 5, 3.0, budget))
            except Exception as exc:  # partial results, then the next workload
                row["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                work.stop()
            print("JSON " + json.dumps(row, default=str), flush=True)
            print_table(rows)
    print_table(rows)
    ok = all(r.get("pass") and "error" not in r for r in rows) and all(r.get("overhead_ok", True) for r in rows)
    print(f"\n{'ALL PASS' if ok else 'SOME CHECKS FAILED'} in {TOTAL_BUDGET_S - budget.left():.0f} s "
          "(thru% = median attached / unattached steps/s; goal >= 99.5)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
