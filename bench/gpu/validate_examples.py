#!/usr/bin/env python3
"""Validate gpudoctor on the fault zoo: does each planted problem get found, and does its fix help?

One command, run by the lead on the H200 (python3.12, torch with CUDA, gpudoctor + py-spy + hypno
installed from wheels, no network)::

    python3.12 bench/gpu/validate_examples.py            # writes docs/validation.md, < 9 minutes
    python3 bench/gpu/validate_examples.py --cpu          # short CPU subset, docs/validation-cpu.md

For every example (examples/zoo.py), unfixed and ``--fix``: start it with ``--steps 0``, measure its
step rate alone from its own progress lines, attach ``gpudoctor attach PID --once`` (time to first
finding) and ``gpudoctor attach PID --duration S --profile 5`` (passive collectors + agent + a
profile window), measure the step rate while attached (overhead), analyze the profile trace the
agent wrote, and stop it. Static examples also go through ``gpudoctor check``; ``ddp_straggler``
writes per-rank traces that ``gpudoctor analyze`` reads. The fix's speedup comes from
``gpudoctor compare`` on the two attach reports, next to the tool-free rate ratio.

Every subprocess has a timeout; the whole run has a budget (``--budget-s``) after which the
remaining examples are listed as skipped; the table is rewritten after every example, so a crash
or a kill still leaves partial results. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))
from zoo import EXAMPLES, Example  # noqa: E402

CPU_SUBSET = ("healthy", "input_bound", "graph_breaks", "small_shm", "cudnn_benchmark_off", "ddp_straggler",
              "host_sync")
#: GPU run order: if the budget runs out, the examples left out are the ones that matter least or
#: cost most (compile time).
GPU_ORDER = ("healthy", "input_bound", "no_autocast", "tf32_off", "host_sync", "pageable_memcpy", "launch_bound",
             "single_tensor_optimizer", "channels_last_missing", "ddp_straggler", "memory_creep", "memory_pressure",
             "small_shm", "graph_breaks", "cudnn_benchmark_off")
PROGRESS = re.compile(r"^step (\d+): ")
GD = [sys.executable, "-m", "gpudoctor"]


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self, wanted_s: float) -> float:
        return max(1.0, min(wanted_s, self.left()))


def run_cmd(cmd: list[str], timeout_s: float, cwd: Path = REPO) -> tuple[int, str, str]:
    """Run a command with a hard timeout; (rc, stdout, stderr), rc 124 on timeout."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out, f"timed out after {timeout_s:.0f}s"
    except OSError as exc:
        return 127, "", str(exc)


def gd_json(args: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    rc, out, err = run_cmd([*GD, *args], timeout_s)
    try:
        return json.loads(out), ""
    except json.JSONDecodeError:
        tail = (err.strip().splitlines() or [f"rc={rc}"])[-1]
        return None, f"rc={rc}: {tail[:160]}"


class Job:
    """An example running with ``--steps 0 --verbose``; progress lines are timestamped as they arrive."""

    def __init__(self, example: Example, fix: bool, device: str, extra: list[str]) -> None:
        every = "2" if device == "cpu" else "5"
        cmd = [sys.executable, f"{example.name}.py", "--steps", "0", "--verbose", "--print-every", every,
               "--device", device, *(["--fix"] if fix else []), *extra]
        self.proc = subprocess.Popen(cmd, cwd=EXAMPLES_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.progress: list[tuple[float, int]] = []
        self.stderr_tail: list[str] = []
        self.stdout = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = PROGRESS.match(line)
            if m:
                self.progress.append((time.monotonic(), int(m.group(1))))
            else:
                self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-20:]

    def wait_warm(self, timeout_s: float, lines: int = 2) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and self.proc.poll() is None:
            if len(self.progress) >= lines:
                return True
            time.sleep(0.1)
        return len(self.progress) >= lines

    def rate(self, t0: float, t1: float) -> float | None:
        inside = [(t, n) for t, n in self.progress if t0 <= t <= t1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def stop(self) -> dict[str, str] | None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.stdout, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.stdout, _ = self.proc.communicate(timeout=10)
        from _common import parse_result_line
        return parse_result_line(self.stdout or "")

    def training_pid(self) -> int:
        return self.proc.pid


@dataclass
class Variant:
    fix: bool
    codes: set[str] = field(default_factory=set)
    ttff_s: float | None = None
    rate_alone: float | None = None
    rate_attached: float | None = None
    report_path: Path | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Row:
    example: Example
    variants: dict[bool, Variant] = field(default_factory=dict)
    speedup_compare: str = "–"
    verdict: str = "–"
    skipped: str = ""


def codes_of(report: dict[str, Any] | None) -> set[str]:
    return {f["code"] for f in (report or {}).get("findings", []) if isinstance(f, dict) and "code" in f}


def run_variant(ex: Example, fix: bool, args: argparse.Namespace, budget: Budget, workdir: Path) -> Variant:
    v = Variant(fix)
    extra = list(ex.cpu_args) if args.cpu else []
    job = Job(ex, fix, "cpu" if args.cpu else "auto", extra)
    try:
        if not job.wait_warm(budget.timeout(args.warm_s)):
            v.errors.append("no progress before timeout: " + " | ".join(job.stderr_tail[-2:])[:200])
            return v
        t0 = time.monotonic()
        time.sleep(min(args.baseline_s, max(budget.left() - 5, 0)))
        while job.rate(t0, time.monotonic()) is None and time.monotonic() - t0 < 3 * args.baseline_s:
            time.sleep(0.2)  # slow examples: wait for two progress lines inside the window
        v.rate_alone = job.rate(t0, time.monotonic())
        pid = str(job.training_pid())
        if not fix and ex.expected_on(args.cpu) and "live" in ex.evidence:
            started = time.monotonic()
            once, err = gd_json(["attach", pid, "--once", "--format", "json"], budget.timeout(30))
            if err:
                v.errors.append(f"attach --once {err}")
            v.codes |= codes_of(once)
            if set(ex.expected_on(args.cpu)) & codes_of(once):
                v.ttff_s = time.monotonic() - started
        report = workdir / f"{ex.name}_{'fixed' if fix else 'unfixed'}.json"
        t2 = time.monotonic()
        attach, err = gd_json(["attach", pid, "--duration", str(args.attach_s), "--profile", "5", "--format", "json"],
                              budget.timeout(args.attach_s + 40))
        t3 = time.monotonic()
        if err:
            v.errors.append(f"attach {err}")
        if attach is not None:
            report.write_text(json.dumps(attach))
            v.report_path = report
            v.codes |= codes_of(attach)
            if v.ttff_s is None and set(ex.expected_on(args.cpu)) & codes_of(attach):
                v.ttff_s = t3 - t2  # an upper bound: the report comes at the end of the watch
            trace = ((attach.get("agent") or {}).get("profile_trace_path")) if isinstance(attach, dict) else None
            if trace and Path(trace).exists():
                analyzed, err = gd_json(["analyze", trace, "--format", "json"], budget.timeout(60))
                v.codes |= codes_of(analyzed)
                if err:
                    v.errors.append(f"analyze {err}")
            elif "trace" in ex.evidence:
                v.errors.append("no profile trace from the agent: used the example's own --profile-dir")
                v.codes |= own_trace_codes(ex, fix, args, budget, workdir, v)
        v.rate_attached = job.rate(t2 + 1.0, t3)
    finally:
        job.stop()
    return v


def own_trace_codes(ex: Example, fix: bool, args: argparse.Namespace, budget: Budget, workdir: Path,
                    v: Variant) -> set[str]:
    """Fallback when the agent wrote no trace: a short run with the example's own torch.profiler."""
    if budget.left() < 60:
        return set()
    out = workdir / f"own_{ex.name}_{int(fix)}"
    rc, _, err = run_cmd([sys.executable, f"{ex.name}.py", "--steps", "12", "--profile-dir", str(out),
                          "--device", "cpu" if args.cpu else "auto", *(["--fix"] if fix else [])],
                         budget.timeout(120), cwd=EXAMPLES_DIR)
    if rc != 0:
        v.errors.append(f"own trace run rc={rc}: {err.strip()[-120:]}")
        return set()
    analyzed, error = gd_json(["analyze", str(out), "--format", "json"], budget.timeout(60))
    if error:
        v.errors.append(f"analyze (own trace) {error}")
    return codes_of(analyzed)


def run_ddp(ex: Example, fix: bool, args: argparse.Namespace, budget: Budget, workdir: Path) -> Variant:
    v = Variant(fix)
    out = workdir / f"ddp_{'fixed' if fix else 'unfixed'}"
    steps = "12" if args.cpu else "60"
    rc, stdout, err = run_cmd([sys.executable, "ddp_straggler.py", "--steps", steps, "--profile-dir", str(out),
                               "--device", "cpu" if args.cpu else "auto", *(["--fix"] if fix else [])],
                              budget.timeout(180), cwd=EXAMPLES_DIR)
    from _common import parse_result_line
    fields = parse_result_line(stdout)
    if rc != 0 or fields is None:
        v.errors.append(f"ddp rc={rc}: {err.strip()[-160:]}")
        return v
    v.rate_alone = float(fields["steps_per_s"])
    analyzed, error = gd_json(["analyze", str(out), "--per-step", "--format", "json"], budget.timeout(90))
    if error:
        v.errors.append(f"analyze {error}")
    else:
        v.codes |= codes_of(analyzed)
        report = workdir / f"ddp_{'fixed' if fix else 'unfixed'}.json"
        report.write_text(json.dumps(analyzed))
        v.report_path = report
    return v


FIX_BLOCK = re.compile(r"^\s*# gpudoctor-fix: begin\n.*?^\s*# gpudoctor-fix: end\n", re.S | re.M)


def static_codes(ex: Example, budget: Budget, workdir: Path) -> tuple[set[str], set[str], str]:
    """``check`` on the script without its marked fix block (unfixed) and as shipped (fixed)."""
    source = (EXAMPLES_DIR / f"{ex.name}.py").read_text()
    unfixed_dir = workdir / f"static_{ex.name}"
    unfixed_dir.mkdir(exist_ok=True)
    (unfixed_dir / f"{ex.name}.py").write_text(FIX_BLOCK.sub("", source))
    unfixed, err1 = gd_json(["check", str(unfixed_dir / f"{ex.name}.py"), "--format", "json"], budget.timeout(60))
    fixed, err2 = gd_json(["check", str(EXAMPLES_DIR / f"{ex.name}.py"), "--format", "json"], budget.timeout(60))
    return codes_of(unfixed), codes_of(fixed), err1 or err2


def validate(ex: Example, args: argparse.Namespace, budget: Budget, workdir: Path) -> Row:
    row = Row(ex)
    for fix in ((False,) if ex.name == "healthy" else (False, True)):
        runner = run_ddp if ex.name == "ddp_straggler" else run_variant
        try:
            row.variants[fix] = runner(ex, fix, args, budget, workdir)
        except Exception as exc:  # one broken example must not lose the others' results
            row.variants[fix] = Variant(fix, errors=[f"{type(exc).__name__}: {exc}"])
    if "static" in ex.evidence and False in row.variants:
        unfixed, fixed, err = static_codes(ex, budget, workdir)
        row.variants[False].codes |= unfixed
        if True in row.variants:
            row.variants[True].codes |= fixed
        if err:
            row.variants[False].errors.append(f"check {err}")
    before, after = row.variants.get(False), row.variants.get(True)
    if before and after and before.report_path and after.report_path:
        result, err = gd_json(["compare", str(before.report_path), str(after.report_path), "--format", "json"],
                              budget.timeout(60))
        if result and "compare" in result:
            c = result["compare"]
            row.speedup_compare = f"{c['speedup']:.2f}x" if c.get("speedup") else "–"
            row.verdict = c.get("verdict", "–") + ("" if c.get("ci95_change_pct") else ", medians only")
        elif err:
            after.errors.append(f"compare {err}")
    return row


def fmt_rate(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def table(rows: list[Row], cpu: bool) -> list[str]:
    lines = ["| example | expected | found? | other findings (unfixed) | findings after --fix (false positives) "
             "| time to first finding | steps/s alone → attached (overhead) | speedup, tool-free | speedup via compare "
             "(verdict) |", "|" + "---|" * 9]
    for r in rows:
        ex = r.example
        if r.skipped:
            lines.append(f"| {ex.name} | {', '.join(ex.expected_on(cpu)) or 'none'} | skipped: {r.skipped} |||||||")
            continue
        u, f = r.variants.get(False), r.variants.get(True)
        expected = set(ex.expected_on(cpu))
        found = "–" if u is None else ("n/a" if not expected else
                                       ("yes" if expected <= u.codes else
                                        "partly" if expected & u.codes else "**no**"))
        others = sorted((u.codes - expected - set(ex.also_ok)) if u else [])
        if ex.name == "healthy" and u:
            others = sorted(u.codes)
        fixed_fp = "–" if f is None else (", ".join(sorted(f.codes - set(ex.also_ok))) or "none")
        ttff = "–" if u is None or u.ttff_s is None else f"{u.ttff_s:.1f} s"
        if u and u.rate_alone and u.rate_attached:
            overhead = f"{fmt_rate(u.rate_alone)} → {fmt_rate(u.rate_attached)} ({(u.rate_attached / u.rate_alone - 1) * 100:+.1f}%)"
        else:
            overhead = f"{fmt_rate(u.rate_alone if u else None)} → –"
        tool_free = "–"
        if u and f and u.rate_alone and f.rate_alone:
            tool_free = f"{f.rate_alone / u.rate_alone:.2f}x"
        lines.append(f"| {ex.name} | {', '.join(sorted(expected)) or 'none'} | {found} | {', '.join(others) or 'none'} "
                     f"| {fixed_fp} | {ttff} | {overhead} | {tool_free} | {r.speedup_compare} ({r.verdict}) |")
    errors = [f"- {r.example.name} ({'fixed' if v.fix else 'unfixed'}): {e}" for r in rows
              for v in r.variants.values() for e in v.errors]
    if errors:
        lines += ["", "Errors and gaps:", "", *errors]
    return lines


def environment(cpu: bool) -> dict[str, str]:
    env = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "python": sys.version.split()[0]}
    rc, out, _ = run_cmd([sys.executable, "-c", "import torch;print(torch.__version__, torch.version.cuda, "
                          "torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"], 180)
    env["torch"] = out.strip() if rc == 0 else "not importable"
    rc, out, _ = run_cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], 15)
    env["gpu"] = out.strip().replace("\n", "; ") if rc == 0 and not cpu else ("CPU mode" if cpu else "nvidia-smi failed")
    rc, out, _ = run_cmd([*GD, "--version"], 30)
    env["gpudoctor"] = out.strip() or "not importable"
    env["cpus"] = str(os.cpu_count())
    return env


def write(path: Path, env: dict[str, str], rows: list[Row], args: argparse.Namespace, started: float,
          final: bool) -> None:
    mode = "CPU subset (--cpu)" if args.cpu else "GPU"
    head = [f"# gpudoctor validation on the fault zoo ({mode})", "",
            "Generated by `bench/gpu/validate_examples.py" + (" --cpu" if args.cpu else "") + "`; do not edit by hand.",
            "", *[f"- {k}: {v}" for k, v in env.items()],
            f"- attach: `gpudoctor attach PID --duration {args.attach_s} --profile 5` (+ `--once` on live examples)",
            f"- wall time: {time.monotonic() - started:.0f} s" + ("" if final else " (partial: still running or killed)"),
            "", "Columns: *found?* = every expected code reported on the unfixed run (attach, its profile trace, "
            "`check` for static rules, `analyze` of per-rank traces for DDP); *other findings* = codes neither "
            "expected nor listed as legitimate in examples/zoo.py (on `healthy`: every finding); *time to first "
            "finding* = wall time of `attach --once` that found it, else the `--duration` watch (an upper bound); "
            "*overhead* = the example's own step rate without and while attached (the attached window includes "
            "agent injection and the 5-step torch.profiler window, so it is an upper bound for steady-state watching); *tool-free speedup* = fixed / "
            "unfixed step rate without gpudoctor; *via compare* = `gpudoctor compare` on the two attach reports.", ""]
    path.write_text("\n".join(head + table(rows, args.cpu)) + "\n")


def rates_only(args: argparse.Namespace, chosen: list[Example]) -> int:
    """Tool-free speedups only: each example unfixed and fixed, ``--repeats`` times, alternating."""
    import statistics

    from _common import parse_result_line

    device = "cpu" if args.cpu else "auto"
    print("| example | steps | unfixed steps/s (median) | fixed steps/s (median) | speedup |\n|---|---|---|---|---|")
    for ex in chosen:
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for fix in (False, True):
                rc, out, err = run_cmd([sys.executable, f"{ex.name}.py", "--steps", str(args.steps), "--device", device,
                                        "--warmup-steps", "5", *(["--fix"] if fix else [])], 300, cwd=EXAMPLES_DIR)
                fields = parse_result_line(out)
                if fields:
                    rates[fix].append(float(fields["steps_per_s"]))
        if rates[False] and rates[True]:
            u, f = statistics.median(rates[False]), statistics.median(rates[True])
            print(f"| {ex.name} | {args.steps} | {u:.1f} | {f:.1f} | {f / u:.2f}x |", flush=True)
        else:
            print(f"| {ex.name} | {args.steps} | failed | failed | – |", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="short CPU subset (debugging this script)")
    parser.add_argument("--only", default="", help="comma-separated example names")
    parser.add_argument("--budget-s", type=float, default=510.0, help="stop starting examples after this (default 510)")
    parser.add_argument("--attach-s", type=int, default=None, help="attach --duration (default 6 GPU, 8 CPU)")
    parser.add_argument("--baseline-s", type=float, default=None, help="rate alone (default 2 GPU, 3 CPU)")
    parser.add_argument("--warm-s", type=float, default=90.0, help="wait this long for the first steps")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--rates-only", action="store_true",
                        help="only the tool-free speedups (--steps, --repeats), printed as a Markdown table")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.attach_s = args.attach_s or (8 if args.cpu else 6)
    args.baseline_s = args.baseline_s or (3.0 if args.cpu else 2.0)
    out = args.out or REPO / "docs" / ("validation-cpu.md" if args.cpu else "validation.md")
    chosen = [e for e in EXAMPLES if (e.name in args.only.split(",") if args.only
                                      else (not args.cpu or e.name in CPU_SUBSET))]
    order = CPU_SUBSET if args.cpu else GPU_ORDER
    chosen.sort(key=lambda e: order.index(e.name) if e.name in order else len(order))
    if args.rates_only:
        return rates_only(args, chosen)
    started = time.monotonic()
    budget = Budget(args.budget_s)
    env = environment(args.cpu)
    print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gpudoctor-validate-") as tmp:
        for ex in chosen:
            if budget.left() < 25:
                rows.append(Row(ex, skipped="time budget spent"))
                continue
            t = time.monotonic()
            rows.append(validate(ex, args, budget, Path(tmp)))
            print(f"[{time.monotonic() - started:5.0f}s] {ex.name}: {time.monotonic() - t:.0f}s", flush=True)
            write(out, env, rows, args, started, final=False)
        write(out, env, rows, args, started, final=True)
    print("\n".join(table(rows, args.cpu)))
    print(f"\nwrote {out} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
