"""Multi-GPU validation in one call: DDP and FSDP over NCCL, healthy and with one slowed rank.

Run on the GPU machine from the repository root (2 GPUs, gpudoctor installed; NVLink multicast
stays off — every job gets ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1``)::

    python3 bench/validation/multigpu_validation.py            # writes to $OUT when set, else --out
    python3 bench/validation/multigpu_validation.py --device cpu --budget-s 300   # gloo dry run (no GPU)

What it does, inside ``--budget-s`` (default 540 s; partial results are always printed and written):

a. ``bench/validation/dist_job.py`` (small GPT, bf16 autocast, fused AdamW, 2 loader workers) under
   ``torchrun`` on 2 ranks, for ddp and fsdp × healthy / compute / input (rank 1 slowed). DDP runs
   the way a user attaches to a job started without gpudoctor — plain torchrun, then ``gpudoctor
   attach <torchrun pid> --duration N --profile 5 --format json``, which injects an agent into every
   rank (its DDP comm hook measures the collective wait), profiles every rank at once and detaches
   the agents at the end; FSDP runs
   under ``gpudoctor run --duration N --format json -o FILE -- torchrun …``. Each scenario records
   the GD601/GD610 findings (rank, cause), the report's Ranks table, the other findings, the ranks'
   own step times (their jsonl) and whether the job was alive after the report.
b. Expected: healthy → no straggler; input → rank 1 named, cause input; compute → rank 1, cause
   compute. FSDP's compute case may not be nameable live: the table shows what happened.
c. The healthy runs profile steps 20–25 on every rank; the traces are copied (gzipped) to
   ``$OUT/traces/<strategy>/`` and ``gpudoctor analyze <dir> --format json`` runs on them (its JSON
   goes into multigpu.json); bench/perf/hta_rank_overlap.py checks them against HTA later.
d. Attach overhead on the healthy DDP job with all ranks watched: its own step rate (rank 0's
   jsonl) in alternating windows, unattached / ``gpudoctor attach --duration W`` (goal ≥ 99.5%);
   each attached window injects the agents into both ranks and detaches them (so it includes that).
e. A table after each scenario and at the end. $OUT gets at most 7 files (the device machine sends
   back 8 files, ≤ 16 MiB each, ≤ 2 folders down): ``multigpu.json`` (results, every gpudoctor
   report and analyze JSON), ``multigpu.md`` (the tables), ``jobs.tar.gz`` (each scenario's rank
   jsonl, meta and launcher log tail) and ``traces/{ddp,fsdp}/rank{0,1}.pt.trace.json.gz``.

Every subprocess has a timeout; every job is killed (its process group, then every descendant:
torchrun puts its ranks in sessions of their own) even on errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multigpu_report import markdown, overhead_summary, summarize_report, text_table, verdict

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).resolve().parent / "dist_job.py"
STRATEGY_WAY = {"ddp": "attach", "fsdp": "run"}
ORDER = [("ddp", "healthy"), ("fsdp", "healthy"), ("ddp", "input"), ("ddp", "compute"), ("fsdp", "input"),
         ("fsdp", "compute")]
#: Per device: (attach seconds, calibration steps, start-up timeout s, gpudoctor-run warm-up s, overhead window s).
SETTINGS = {"cuda": (26, 20, 150, 40, 8), "cpu": (14, 10, 150, 30, 5)}
#: Slowdown sizes per device (compute factor, input factor): on the shared 2-core CPU both ranks compete
#: for the same cores, so the dry run slows rank 1 harder to keep it visible.
FACTORS = {"cuda": (0.5, 2.0), "cpu": (1.5, 4.0)}
TRACE_BUDGET_BYTES = 40_000_000
FILE_LIMIT_BYTES = 15_000_000  # the device machine returns files of at most 16 MiB


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc``'s process group and every descendant (ranks and their loader workers)."""
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


def read_rows(out: Path, world: int = 2) -> dict[int, list[dict[str, Any]]]:
    rows: dict[int, list[dict[str, Any]]] = {}
    for r in range(world):
        path = out / f"rank{r}.jsonl"
        text = path.read_text() if path.exists() else ""
        rows[r] = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
    return rows


def job_stats(rows: dict[int, list[dict[str, Any]]], since_t: float, until_t: float) -> dict[int, dict[str, Any]]:
    """Per rank, the means of its own rows between two wall times (the watched part of the run).

    Means, not medians: an input-bound rank with 2 loader workers alternates long and short steps
    (one worker's batch is ready, the next is not), and a median then lands on either mode.
    """
    out = {}
    for rank, rr in rows.items():
        sel = [r for r in rr if since_t <= r["t"] <= until_t] or rr[-20:]
        if not sel:
            continue

        def mean(key: str, sel: list[dict[str, Any]] = sel) -> float:
            return round(float(statistics.fmean(r[key] for r in sel)), 2)
        out[rank] = {"steps": len(sel), "step_ms": mean("step_ms"), "wall_ms": mean("wall_ms"),
                     "data_wait_ms": mean("data_wait_ms"), "slow": any(r.get("slow") for r in sel)}
    return out


def steps_per_s(rows: list[dict[str, Any]], a: float, b: float) -> float:
    return sum(1 for r in rows if a <= r["t"] <= b) / (b - a) if b > a else 0.0


class Validation:
    """One run of the whole validation: settings, the time budget, results, and where they go."""

    def __init__(self, args: argparse.Namespace) -> None:
        from gpudoctor.commands.run import agent_env

        self.args = args
        self.device = args.device
        self.backend = "nccl" if args.device == "cuda" else "gloo"
        self.attach_s, self.calib, self.start_timeout_s, self.run_warmup_s, self.window_s = SETTINGS[args.device]
        self.deadline = time.monotonic() + args.budget_s
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.stage = Path(tempfile.mkdtemp(prefix="gd-mg-stage-")) / "jobs"  # packed into $OUT/jobs.tar.gz
        # NVLink multicast stays off on the shared GPU host (KINDS.md): for NCCL, PyTorch and NVSHMEM.
        self.base_env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                         "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1",
                         # the job's own torch.profiler window (healthy runs) must not leave CUPTI up and
                         # slow the job for the rest of the run (pytorch#144455, the cupti_residue.py probe (docs/bench-history.md))
                         "TEARDOWN_CUPTI": "1"}
        self.agent_env = agent_env(self.base_env)
        self.gpudoctor = [sys.executable, "-m", "gpudoctor"]
        self.results: list[dict[str, Any]] = []
        self.last_startup_s = 0.0
        self.extra: dict[str, Any] = {"overhead": None, "analyze": {}}

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def job_cmd(self, strategy: str, mode: str, out: Path, profile: bool) -> list[str]:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(JOB),
               "--strategy", strategy, "--mode", mode, "--device", self.device, "--backend", self.backend,
               "--calib-steps", str(self.calib), "--max-seconds", str(int(max(60.0, self.left_s()))),
               "--compute-factor", str(FACTORS[self.device][0]), "--input-factor", str(FACTORS[self.device][1]),
               "--out", str(out)]
        if profile:
            cmd += ["--profile-dir", str(out / "prof"), "--profile-steps", "20:25"]
        return cmd

    def wait_ready(self, proc: subprocess.Popen[Any], out: Path, timeout_s: float) -> float | None:
        """Wait until every rank has run the calibration steps and the slowdown (if any) is on."""
        started = time.monotonic()
        while time.monotonic() - started < min(timeout_s, max(0.0, self.left_s() - 30)):
            rows = read_rows(out)
            if all(len(rr) >= self.calib + 5 for rr in rows.values()):
                return time.monotonic() - started
            if proc.poll() is not None:
                return None
            time.sleep(0.5)
        return None

    def scenario(self, strategy: str, mode: str) -> dict[str, Any]:
        way = STRATEGY_WAY[strategy]
        res: dict[str, Any] = {"strategy": strategy, "mode": mode, "way": way, "backend": self.backend}
        work = Path(tempfile.mkdtemp(prefix=f"gd-mg-{strategy}-{mode}-"))
        profile = mode == "healthy"
        job = self.job_cmd(strategy, mode, work, profile)
        log = (work / "launcher.log").open("wb")
        report_file = work / "report.json"
        t_start = time.time()
        if way == "attach":  # a job started without gpudoctor: attach injects the agents itself
            proc = subprocess.Popen(job, env=self.base_env, start_new_session=True, stdout=log, stderr=log)
        else:
            # the report comes `duration` s after the agent answers: cover start-up (as measured so far) + the watch
            duration = round(max(self.run_warmup_s, self.last_startup_s + 10) + self.attach_s)
            res["run_duration_s"] = duration
            cmd = [*self.gpudoctor, "run", "--duration", str(duration), "--window", "2", "--no-stacks",
                   "--no-dashboard", "--format", "json", "-o", str(report_file), "--", *job]
            proc = subprocess.Popen(cmd, env=self.base_env, start_new_session=True, stdout=log, stderr=log)
        try:
            ready = self.wait_ready(proc, work, self.start_timeout_s)
            res["ready_s"] = round(ready, 1) if ready is not None else None
            if ready is None:
                res["error"] = "ranks did not get past calibration (see log tail)"
                return res
            t_watch = time.time()
            if way == "attach":
                att = subprocess.run([*self.gpudoctor, "attach", str(proc.pid), "--duration", str(self.attach_s),
                                      "--window", "2", "--profile", "5", "--no-stacks", "--format", "json"],
                                     capture_output=True, text=True, env=self.base_env,
                                     timeout=max(5.0, min(self.attach_s + 90, self.left_s() - 10)))
                res["exit_code"] = att.returncode
                report_text = att.stdout
            else:
                limit = time.monotonic() + duration + 90
                while not _complete_json(report_file) and time.monotonic() < min(limit, self.deadline - 10):
                    if proc.poll() is not None:
                        break
                    time.sleep(0.5)
                report_text = report_file.read_text() if report_file.exists() else ""
                res["exit_code"] = proc.poll()
            t_report = time.time()
            res["watch_s"] = round(t_report - t_watch, 1)
            try:
                report = json.loads(report_text)
            except json.JSONDecodeError:
                res["error"] = f"no JSON report (exit {res.get('exit_code')})"
                return res
            res["report"] = report
            res.update(summarize_report(report))
            res["rank_profile"] = report.get("rank_profile")
            res["verdict"] = verdict(mode, res["rank_findings"], res["ranks_table"])
            rows = read_rows(work)
            slow_from = min((r["t"] for rr in rows.values() for r in rr if r.get("slow")), default=None)
            res["slow_seen_s"] = round(t_report - slow_from, 1) if slow_from else None
            res["job"] = job_stats(rows, max(t_watch, slow_from or t_watch), t_report)
            res["job_alive_after"] = proc.poll() is None and _alive_ranks(proc) >= 2
            res["startup_s"] = round(t_watch - t_start, 1)
            self.last_startup_s = max(self.last_startup_s, res["startup_s"])
            if strategy == "ddp" and mode == "healthy" and not self.args.skip_overhead:
                self.extra["overhead"] = self.overhead(proc, work)
        except Exception as exc:  # keep partial results
            res["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            kill_tree(proc)
            log.close()
            res["meta"] = _metas(work)
            self._keep(work, strategy, mode, profile, res)
        return res

    def overhead(self, proc: subprocess.Popen[Any], work: Path) -> dict[str, Any]:
        """The job's own step rate, unattached and attached, in alternating windows (U A U A U A U)."""
        windows: list[tuple[str, float, float]] = []
        w = self.window_s
        for i in range(7):
            if self.left_s() < 2 * w + 60 or proc.poll() is not None:
                break
            a = time.time()
            if i % 2 == 0:
                time.sleep(w)
            else:
                subprocess.run([*self.gpudoctor, "attach", str(proc.pid), "--duration", str(w), "--window", "2",
                                "--no-stacks", "--format", "json"], capture_output=True,
                               timeout=max(5.0, min(w + 60, self.left_s() - 10)), env=self.base_env)
            windows.append(("attached" if i % 2 else "alone", a, time.time()))
        rows = read_rows(work)[0]
        rates = [(kind, steps_per_s(rows, a, b), round(b - a, 1)) for kind, a, b in windows]
        return overhead_summary(rates)

    def agent_baseline(self) -> dict[str, Any]:
        """The healthy DDP job started without the agent: its rate vs the agent job's unattached windows."""
        work = Path(tempfile.mkdtemp(prefix="gd-mg-noagent-"))
        log = (work / "launcher.log").open("wb")
        proc = subprocess.Popen(self.job_cmd("ddp", "healthy", work, False), env=self.base_env,
                                start_new_session=True, stdout=log, stderr=log)
        try:
            if self.wait_ready(proc, work, self.start_timeout_s) is None:
                return {"error": "the job without the agent did not get past calibration"}
            a = time.time()
            time.sleep(2 * self.window_s)
            rate = steps_per_s(read_rows(work)[0], a, time.time())
        finally:
            kill_tree(proc)
            log.close()
            shutil.rmtree(work, ignore_errors=True)
        alone = (self.extra.get("overhead") or {}).get("alone_steps_per_s")
        return {"no_agent_steps_per_s": round(rate, 3), "agent_unwatched_steps_per_s": alone,
                "agent_pct": round(100.0 * alone / rate, 2) if alone and rate else None}

    def _keep(self, work: Path, strategy: str, mode: str, profile: bool, res: dict[str, Any]) -> None:
        """Copy the ranks' jsonl and the profile traces to $OUT; analyze the traces."""
        dest = self.stage / f"{strategy}-{mode}"
        dest.mkdir(parents=True, exist_ok=True)
        for f in [*work.glob("rank*.jsonl"), *work.glob("rank*.meta.json")]:
            shutil.copy2(f, dest / f.name)
        log = work / "launcher.log"
        if log.exists():
            tail = log.read_bytes()[-3000:].decode("utf-8", "replace")
            (dest / "launcher.log.tail").write_text(tail)
            if res.get("error"):
                res["log_tail"] = tail[-600:]
        if profile:
            traces = sorted((work / "prof").glob("rank*.pt.trace.json*")) if (work / "prof").exists() else []
            tdest = self.out / "traces" / strategy
            tdest.mkdir(parents=True, exist_ok=True)
            used = sum(p.stat().st_size for p in (self.out / "traces").rglob("*") if p.is_file())
            for t in traces:
                if used + t.stat().st_size > TRACE_BUDGET_BYTES or t.stat().st_size > FILE_LIMIT_BYTES:
                    res.setdefault("notes", []).append(f"{t.name} not kept: over the trace size budget")
                    continue
                shutil.copy2(t, tdest / t.name)
                used += t.stat().st_size
            if any(tdest.iterdir()):
                self.extra["analyze"][strategy] = self.analyze(tdest, strategy)
        shutil.rmtree(work, ignore_errors=True)

    def analyze(self, trace_dir: Path, strategy: str) -> dict[str, Any]:
        proc = subprocess.run([*self.gpudoctor, "analyze", str(trace_dir), "--format", "json"], capture_output=True,
                              text=True, timeout=180)
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            return {"error": f"analyze exit {proc.returncode}: {proc.stderr[-300:]}"}
        self.extra.setdefault("analyze_reports", {})[strategy] = report
        keys = ("overlap_pct", "comm_pct", "comm_kernel_share_pct", "idle_pct", "step_time_p50_ms",
                "outside_collective_ms_p50", "collective_wait_ms_p50")
        return {"exit_code": proc.returncode, "findings": sorted({f["code"] for f in report.get("findings", [])}),
                "ranks": [{"rank": r.get("rank"), **{k: r.get(k) for k in keys}} for r in report.get("ranks", [])]}

    def run(self) -> int:
        wanted = [tuple(s.split(":")) for s in self.args.only.split(",")] if self.args.only else ORDER
        for strategy, mode in wanted:
            need = (max(self.run_warmup_s, self.last_startup_s + 10) + self.attach_s + 15
                    if STRATEGY_WAY[strategy] == "run" else 75)
            if self.left_s() < need:
                self.results.append({"strategy": strategy, "mode": mode, "way": STRATEGY_WAY[strategy],
                                     "error": "skipped: time budget spent"})
            else:
                self.results.append(self.scenario(strategy, mode))
            print(json.dumps({k: v for k, v in self.results[-1].items() if k not in ("meta", "ranks_table", "report")}),
                  flush=True)
            self.write()
            print(text_table(self.results), flush=True)
        if self.extra.get("overhead") and self.left_s() > 2 * self.window_s + 60:
            try:
                self.extra["agent_baseline"] = self.agent_baseline()
            except Exception as exc:  # keep what was measured
                self.extra["agent_baseline"] = {"error": f"{type(exc).__name__}: {exc}"}
        self.write()
        print(text_table(self.results))
        print(markdown(self.results, self.extra))
        shutil.rmtree(self.stage.parent, ignore_errors=True)
        print(f"\ndone in {self.args.budget_s - self.left_s():.0f} s; results in {self.out}")
        return 0

    def write(self) -> None:
        doc = {"device": self.device, "backend": self.backend, "budget_s": self.args.budget_s,
               "elapsed_s": round(self.args.budget_s - self.left_s(), 1), "machine": machine_info(),
               "results": self.results, **self.extra}
        (self.out / "multigpu.json").write_text(json.dumps(doc, indent=1, default=str))
        if self.stage.exists():
            with tarfile.open(self.out / "jobs.tar.gz", "w:gz") as tar:
                tar.add(self.stage, arcname="jobs")
        (self.out / "multigpu.md").write_text(markdown(self.results, self.extra, doc["machine"]) + "\n")


def _complete_json(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return True


def _alive_ranks(proc: subprocess.Popen[Any]) -> int:
    import psutil

    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    return sum(1 for k in kids if _is_rank(k))


def _cmdline(proc: Any) -> str:
    try:
        return " ".join(proc.cmdline())
    except Exception:
        return ""


def _is_rank(proc: Any) -> bool:
    """A rank: runs dist_job.py and was started by torchrun (a DataLoader worker's parent is a rank)."""
    own = _cmdline(proc)
    try:
        parent = _cmdline(proc.parent())
    except Exception:
        return False
    return "dist_job.py" in own and "torch.distributed.run" not in own and "torch.distributed.run" in parent


def _metas(work: Path) -> dict[str, Any]:
    out = {}
    for f in sorted(work.glob("rank*.meta.json")):
        with contextlib.suppress(OSError, json.JSONDecodeError):
            out[f.name.split(".")[0]] = json.loads(f.read_text())
    return out


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    with contextlib.suppress(Exception):
        import torch

        info["torch"] = torch.__version__
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    with contextlib.suppress(Exception):
        from gpudoctor import __version__

        info["gpudoctor"] = __version__
    return info


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--budget-s", type=float, default=540.0, help="finish (with partial results) within this")
    p.add_argument("--out", default=os.environ.get("OUT") or "multigpu-out", help="default: $OUT")
    p.add_argument("--only", default="", help="e.g. ddp:healthy,fsdp:input (default: all six, in a fixed order)")
    p.add_argument("--skip-overhead", action="store_true")
    args = p.parse_args()
    if args.device == "cuda":
        import torch

        if torch.cuda.device_count() < 2:
            print(f"this validation needs 2 CUDA GPUs; found {torch.cuda.device_count()} (use --device cpu for a "
                  "dry run).", file=sys.stderr)
            return 6
    return Validation(args).run()


if __name__ == "__main__":
    sys.exit(main())
