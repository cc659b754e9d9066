#!/usr/bin/env python3
"""Validate gpudoctor on the fault zoo: does each planted problem get found, and does its fix help?

One command, run by the lead on the H200 (python3.12, torch with CUDA, gpudoctor + py-spy + hypno
installed from wheels, no network)::

    python3.12 bench/validation/validate_examples.py             # all 15 examples, ~540 s, writes docs/validation.md
    python3.12 bench/validation/validate_examples.py --only healthy,input_bound --out /tmp/v.md   # debugging
    python3 bench/validation/validate_examples.py --cpu           # short CPU subset, docs/validation-cpu.md

Per example, unfixed and ``--fix`` (examples/zoo.py), one GPU job at a time:

1. The job runs with ``--steps 0``; its own progress lines give its step rate at any moment.
2. *alone*: its rate with nothing attached; *passive*: ``gpudoctor attach PID --duration P`` (collectors,
   py-spy and the injected agent, no profile window) — its rate after the injection settled, the live
   findings, the time to the first finding, and the raw step samples ``compare`` bootstraps; on the
   unfixed run a second *alone* window follows, so the steady-state overhead is alone → attached →
   alone, interleaved.
3. *profile*: ``gpudoctor attach PID --duration D --profile 5``; its findings, and ``analyze`` of the
   trace the agent wrote (in the background, while the next job warms up). Its step rate is shown
   apart: it includes the injection and the profiler window, so it is not steady-state overhead.
4. The fix's speedup: tool-free (fixed / unfixed rate alone) and ``gpudoctor compare`` of the two
   passive reports (median step time with a bootstrap 95% CI).

To fit one run, the next job is started while the current one is measured, held by
``--wait-for-go`` after ``import torch`` and before it touches the GPU (it costs one CPU core for
a few seconds, never GPU time); ``check``, ``analyze`` and ``compare`` run in the background. Every
subprocess has a timeout; ``--budget-s`` stops starting examples when the time is spent, and the
table is rewritten after every example, so a crash or a kill still leaves partial results. Standard
library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo_runner import (
    EXAMPLES_DIR,
    REPO,
    Budget,
    Job,
    Row,
    Settings,
    Variant,
    codes_of,
    environment,
    gd_json,
    run_cmd,
    static_codes,
)
from zoo_table import table, write

sys.path.insert(0, str(EXAMPLES_DIR))
from zoo import EXAMPLES, Example

CPU_SUBSET = ("healthy", "input_bound", "graph_breaks", "small_shm", "cudnn_benchmark_off", "ddp_straggler",
              "host_sync")
#: GPU run order: if the budget runs out, the examples left out are the ones that cost most
#: (compile time) or matter least.
GPU_ORDER = ("healthy", "input_bound", "no_autocast", "tf32_off", "host_sync", "pageable_memcpy",
             "single_tensor_optimizer", "channels_last_missing", "memory_creep", "memory_pressure", "small_shm",
             "cudnn_benchmark_off", "ddp_straggler", "launch_bound", "graph_breaks")


def measure(job: Job, ex: Example, fix: bool, s: Settings, budget: Budget, workdir: Path,
            pool: cf.ThreadPoolExecutor, starter: Starter) -> Variant:
    """Alone → passive attach (→ alone) → profile attach, on one running job."""
    v = Variant(fix)
    tag = f"{ex.name}_{'fixed' if fix else 'unfixed'}"
    starter.before_go()
    job.go()
    t_go = time.monotonic()
    if not job.wait_warm(budget.timeout(s.warm_s)):
        v.errors.append(f"no progress {time.monotonic() - t_go:.0f} s after go (alive: {job.alive()}): "
                        + " | ".join(job.stderr_tail[-2:])[:200])
        return v
    starter.wait_stopped()  # the previous job has left the GPU before anything is timed
    v.warm_s = time.monotonic() - t_go
    v.rate_alone = job.window_rate(s.baseline_s)
    pid = str(job.pid)
    passive_path = workdir / f"{tag}_passive.json"
    t2 = time.monotonic()
    passive_s = s.passive_fixed_s if fix else s.passive_s
    passive, err = gd_json(["attach", pid, "--duration", str(passive_s), "--format", "json"],
                           budget.timeout(passive_s + 30))
    t3 = time.monotonic()
    if err:
        v.errors.append(f"passive attach {err}")
    if passive is not None:
        passive_path.write_text(json.dumps(passive))
        v.report_path = passive_path
        v.codes |= codes_of(passive)
        v.step_samples = len(((passive.get("steps") or {}).get("step_ms")) or [])
        first = passive.get("first_finding_s") or {}
        hits = [first[c] for c in ex.expected_on(s.cpu) if isinstance(first.get(c), (int, float))]
        v.ttff_s = min(hits) if hits else None
    v.rate_passive = job.rate(t2 + s.settle_s, t3)
    if not fix:
        v.rate_alone_after = job.window_rate(s.baseline_s)
    t4 = time.monotonic()
    profile_s = s.profile_attach_fixed_s if fix else s.profile_attach_s
    attach, err = gd_json(["attach", pid, "--duration", str(profile_s), "--profile", "5",
                           "--format", "json"], budget.timeout(profile_s + 40))
    t5 = time.monotonic()
    v.phases = f"warm {v.warm_s:.0f} s, passive {t3 - t2:.0f} s, profile {t5 - t4:.0f} s"
    v.rate_profile = job.rate(t4, t5)
    if err:
        v.errors.append(f"profile attach {err}")
    if attach is not None:
        v.codes |= codes_of(attach)
        if v.ttff_s is None and set(ex.expected_on(s.cpu)) & codes_of(attach):
            v.ttff_s = (t3 - t2) + (t5 - t4)  # an upper bound: each report comes at the end of its watch
        trace = (attach.get("agent") or {}).get("profile_trace_path")
        if trace and Path(trace).exists():
            v.pending.append(pool.submit(gd_json, ["analyze", trace, "--format", "json"], 90))
        elif "trace" in ex.evidence:
            v.errors.append("no profile trace from the agent")
    return v


def run_ddp(ex: Example, fix: bool, s: Settings, budget: Budget, workdir: Path) -> Variant:
    """``ddp_straggler`` spawns its own ranks: per-rank traces, ``analyze --per-step``."""
    from _common import parse_result_line

    v = Variant(fix)
    out = workdir / f"ddp_{'fixed' if fix else 'unfixed'}"
    rc, stdout, err = run_cmd([sys.executable, "ddp_straggler.py", "--steps", "16" if s.cpu else "30",
                               "--profile-dir", str(out), "--profile-steps", "10", "--device", s.device,
                               *(["--fix"] if fix else [])], budget.timeout(150), cwd=EXAMPLES_DIR)
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
        v.report_path = workdir / f"ddp_{'fixed' if fix else 'unfixed'}.json"
        v.report_path.write_text(json.dumps(analyzed))
        v.step_samples = sum(1 for t in (analyzed or {}).get("tables", []) if t.get("key") == "steps"
                             for _ in t.get("rows", []))
    return v


def finish_row(row: Row, budget: Budget) -> None:
    """Collect background results (trace analyses, check), then ``compare`` the two passive reports."""
    for v in row.variants.values():
        for fut in v.pending:
            analyzed, err = fut.result()
            v.codes |= codes_of(analyzed)
            if err:
                v.errors.append(f"analyze {err}")
        v.pending.clear()
    if row.static is not None:
        unfixed, fixed, err = row.static.result()
        row.static = None
        if False in row.variants:
            row.variants[False].codes |= unfixed
            if err:
                row.variants[False].errors.append(f"check {err}")
        if True in row.variants:
            row.variants[True].codes |= fixed
    before, after = row.variants.get(False), row.variants.get(True)
    if before and after and before.report_path and after.report_path:
        result, err = gd_json(["compare", str(before.report_path), str(after.report_path), "--format", "json"],
                              budget.timeout(60))
        if result and "compare" in result:
            row.compare = result["compare"]
        elif err:
            after.errors.append(f"compare {err}")


#: Examples that hold most of the GPU's memory: the next job may not start on the GPU until they exited.
MEMORY_HOGS = ("memory_pressure",)


class Starter:
    """Starts each example job ahead of its turn, held before it touches the device, and stops the
    finished one in the background (its CUDA teardown overlaps the next job's start-up, never its
    timed windows)."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        self.queue: list[tuple[Example, bool]] = []
        self.ready: dict[tuple[str, bool], Job] = {}
        self.stopping: list[tuple[str, cf.Future[object]]] = []
        self._stopper = cf.ThreadPoolExecutor(max_workers=2)

    def retire(self, job: Job) -> None:
        self.stopping.append((job.name, self._stopper.submit(job.stop)))

    def before_go(self) -> None:
        """A job that parked most of the GPU's memory must be gone before the next one allocates."""
        for name, fut in self.stopping:
            if name.split()[0] in MEMORY_HOGS:
                fut.result()

    def wait_stopped(self) -> None:
        for _, fut in self.stopping:
            fut.result()
        self.stopping.clear()

    def plan(self, examples: list[Example]) -> None:
        self.queue = [(e, fix) for e in examples if e.name != "ddp_straggler"
                      for fix in ((False,) if e.name == "healthy" else (False, True))]

    def take(self, ex: Example, fix: bool) -> Job:
        """The held job for (ex, fix), and the next one in the plan started behind it."""
        key = (ex.name, fix)
        job = self.ready.pop(key, None) or Job(ex, fix, self.s)
        if self.s.cpu:
            return job  # 2 cores: an import next to the timed job would skew its rate
        keys = [(e.name, f) for e, f in self.queue]
        if key in keys and keys.index(key) + 1 < len(keys):
            nex, nfix = self.queue[keys.index(key) + 1]
            if (nex.name, nfix) not in self.ready:
                self.ready[(nex.name, nfix)] = Job(nex, nfix, self.s)
        return job

    def close(self) -> None:
        for job in self.ready.values():
            job.stop()
        self.ready.clear()
        self.wait_stopped()
        self._stopper.shutdown()


def validate(ex: Example, s: Settings, budget: Budget, workdir: Path, pool: cf.ThreadPoolExecutor,
             starter: Starter) -> Row:
    row = Row(ex)
    if "static" in ex.evidence:
        row.static = pool.submit(static_codes, ex, workdir)
    for fix in ((False,) if ex.name == "healthy" else (False, True)):
        try:
            if ex.name == "ddp_straggler":
                starter.wait_stopped()
                row.variants[fix] = run_ddp(ex, fix, s, budget, workdir)
                continue
            job = starter.take(ex, fix)
            try:
                row.variants[fix] = measure(job, ex, fix, s, budget, workdir, pool, starter)
            finally:
                starter.retire(job)
        except Exception as exc:  # one broken example must not lose the others' results
            row.variants[fix] = Variant(fix, errors=[f"{type(exc).__name__}: {exc}"])
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="short CPU subset (debugging this script)")
    parser.add_argument("--only", default="", help="comma-separated example names")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop starting examples after this many seconds (default 540 GPU, 1500 CPU); "
                             "the table then lists the rest as skipped")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the reports and traces of every run in this folder (default: a temporary one)")
    args = parser.parse_args()
    s = Settings.for_mode(args.cpu)
    budget_s = args.budget_s if args.budget_s is not None else (1500.0 if args.cpu else 540.0)
    out = args.out or REPO / "docs" / ("validation-cpu.md" if args.cpu else "validation.md")
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {e.name for e in EXAMPLES})
    if unknown:
        print(f"validate_examples: no such example: {', '.join(unknown)}.", file=sys.stderr)
        return 2
    order = CPU_SUBSET if args.cpu else GPU_ORDER
    chosen = [e for e in EXAMPLES if (e.name in names if names else (not args.cpu or e.name in CPU_SUBSET))]
    chosen.sort(key=lambda e: order.index(e.name) if e.name in order else len(order))
    started = time.monotonic()
    budget = Budget(budget_s)
    rows: list[Row] = []
    starter = Starter(s)
    starter.plan(chosen)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(str(args.keep)) if args.keep is not None
          else tempfile.TemporaryDirectory(prefix="gpudoctor-validate-")) as tmp, \
            cf.ThreadPoolExecutor(max_workers=2) as pool, cf.ThreadPoolExecutor(max_workers=1) as finisher:
        env_future = pool.submit(environment, args.cpu)
        finishing: list[cf.Future[None]] = []
        try:
            for ex in chosen:
                if budget.left() < s.min_example_s:
                    rows.append(Row(ex, skipped=f"time budget ({budget_s:.0f} s) spent"))
                    continue
                t = time.monotonic()
                row = validate(ex, s, budget, Path(tmp), pool, starter)
                rows.append(row)
                # trace analyses, check and compare finish while the next example runs
                finishing.append(finisher.submit(finish_row, row, budget))
                phases = "; ".join(f"{'fixed' if v.fix else 'unfixed'}: {v.phases}" for v in row.variants.values()
                                   if v.phases)
                print(f"[{time.monotonic() - started:5.0f}s] {ex.name}: {time.monotonic() - t:.0f}s ({phases})",
                      flush=True)
                done = [r for r, f in zip([r for r in rows if not r.skipped], finishing) if f.done()]
                write(out, env_future.result(), done, s, time.monotonic() - started, final=False)
        finally:
            starter.close()
            for fut in finishing:
                fut.result()
        write(out, env_future.result(), rows, s, time.monotonic() - started, final=True)
    print("\n".join(table(rows, s.cpu)))
    print(f"\nwrote {out} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
