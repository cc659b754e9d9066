"""Validate gpudoctor's verdict, ranking and estimates on real third-party training scripts (issue 12, item 6).

Why this exists: the fault zoo of ``examples/`` was written to be found. This harness runs public
training scripts this project did not write (pytorch/examples, nanoGPT, timm, Lightning, a Hugging Face
``Trainer``), unmodified, under ``gpudoctor run``; reads the bottleneck verdict, the ranked findings with
their impact estimates and the agent's step times; applies the top-ranked fix that the script can
express through its own flags; runs again; and prints predicted against measured speedup — repeated up
to ``chain`` fixes per script (the classic ResNet-50 sequence: up to 4). When gpudoctor names several
fixes at a stage, each is then measured on its own (budget allowing), to check that the top-ranked fix
is the one that measured fastest.

    # on the H200 (two calls of < 600 s each; see docs/bench-history.md "Third-party scripts for validation"):
    python3 bench/validation/realscripts_validation.py --scripts thirdparty --part 1 --budget-s 540
    python3 bench/validation/realscripts_validation.py --scripts thirdparty --part 2 --budget-s 540
    # CPU dry-run of every scenario with tiny sizes (proves the plumbing; numbers mean nothing):
    python bench/validation/realscripts_validation.py --scripts thirdparty --cpu --tiny --budget-s 3000

Data the scripts read is generated at run time in a temporary folder. Every child runs in its own
process group, bounded by a timeout and killed when its report is written or the harness exits.
Results: ``realscripts_part<P>.json`` (everything), ``.txt`` (the table) and ``.log`` in ``--out``
(default ``$OUT``). In ``--cpu`` mode, a stage where gpudoctor names no fix the script can express
applies the script's next fix anyway, marked ``forced``, so that every command line is exercised.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realscripts import procs, reportread
from realscripts.results import bound_label, finding_label, fmt, ratio, summary, table
from realscripts.scenarios import COMPILING_KINDS, SCENARIOS, Ctx, Scenario, with_args

REPO = Path(__file__).resolve().parents[2]
LOG: list[str] = []


def say(line: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    LOG.append(f"{stamp} {line}")
    print(f"{stamp} {line}", flush=True)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


class Harness:
    def __init__(self, args: argparse.Namespace, ctx: Ctx) -> None:
        self.args, self.ctx = args, ctx
        self.budget = Budget(args.budget_s)
        self.kinds = reportread.fix_kind_map(REPO / "rules")
        self.runs: list[dict[str, Any]] = []
        self.stages: list[dict[str, Any]] = []
        self.alternatives: list[dict[str, Any]] = []
        self._cache: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
        self.pending: list[tuple[Scenario, tuple[str, ...], list[dict[str, Any]], dict[str, Any]]] = []

    # -- one run ---------------------------------------------------------------------------------
    def compile_extra(self, sc: Scenario, applied: tuple[str, ...]) -> float:
        if not any(k in COMPILING_KINDS for k in applied):
            return 0.0
        extra = self.args.compile_extra_s
        return float(extra if extra is not None else 150.0 if self.ctx.cpu else sc.compile_s)

    def duration_for(self, sc: Scenario, applied: tuple[str, ...]) -> float:
        """--duration: the base window, plus (``run``: the watch starts at launch) the compile time."""
        extra = self.compile_extra(sc, applied) if self.args.launch == "run" else 0.0
        return float(self.args.duration + extra + (0.0 if self.ctx.cpu else sc.startup_s))

    def warmup_for(self, sc: Scenario, applied: tuple[str, ...]) -> float:
        """``attach``: the longest wait for the script's first progress line before attaching anyway."""
        return float(self.args.attach_wait_s + self.compile_extra(sc, applied))

    def cost(self, sc: Scenario, applied: tuple[str, ...]) -> float:
        wait = self.warmup_for(sc, applied) if self.args.launch == "attach" else 0.0
        return self.duration_for(sc, applied) + wait + self.args.startup_s

    def run(self, sc: Scenario, applied: tuple[str, ...], forced: bool = False) -> dict[str, Any] | None:
        """Run ``sc`` with the fixes ``applied`` (in order) under gpudoctor; None when out of budget.

        On the GPU, a report whose profile window was not analysed in time (a slow first start, a
        compile longer than its allowance) is re-run once with 30 s more, when the budget allows it."""
        key = (sc.name, applied)
        if key in self._cache:
            return self._cache[key]
        rec = self._run_once(sc, applied, forced, extra_s=0.0)
        if (rec is not None and not self.ctx.cpu and rec.get("steps_per_s") and not rec.get("profile_analysed")
                and self.budget.left() > 2 * (self.cost(sc, applied) + 30.0)):
            say("    the profile window was not analysed within the run: once more with 30 s more")
            again = self._run_once(sc, applied, forced, extra_s=30.0)
            if again is not None:
                again["retried"] = True
                rec = again
        if rec is not None:
            self.runs.append(rec)
            self._cache[key] = rec
        return rec

    def _run_once(self, sc: Scenario, applied: tuple[str, ...], forced: bool,
                  extra_s: float) -> dict[str, Any] | None:
        if self.budget.left() < self.cost(sc, applied):
            say(f"  skip {sc.name} [{'+'.join(applied) or 'base'}]: {self.budget.left():.0f} s of budget left, "
                f"a run needs ~{self.cost(sc, applied):.0f} s")
            return None
        fixes = sc.fixes(self.ctx)
        script_args = sc.base(self.ctx)
        for kind in applied:
            script_args = with_args(script_args, fixes[kind])
        label = "+".join(applied) or "base"
        stem = f"{sc.name}__{label}".replace("+", "_")
        report_path, log_path = self.ctx.work / f"{stem}.json", self.ctx.work / f"{stem}.log"
        report_path.unlink(missing_ok=True)
        duration = self.duration_for(sc, applied) + extra_s
        profile = ["--profile", str(self.args.profile)] if self.args.profile else []   # 0: the automatic window
        cmd = [*self.args.gpudoctor, "run", "--duration", f"{duration:g}", *profile,
               "--format", "json", "-o", str(report_path), "--no-dashboard", "--fail-on", "critical",
               "--", self.ctx.python, *script_args]
        env = dict(os.environ, PYTHONUNBUFFERED="1", **sc.env)
        if env.get("PYTHONPATH"):     # the scripts run in their own folders: relative entries would break
            env["PYTHONPATH"] = os.pathsep.join(str(Path(x).resolve()) for x in env["PYTHONPATH"].split(os.pathsep) if x)
        if self.ctx.cpu:
            env.setdefault("CUDA_VISIBLE_DEVICES", "")
        say(f"  run {sc.name} [{label}] {self.args.launch} D={duration:g}s: {' '.join(script_args)}")
        if self.args.launch == "run":
            res = procs.run_until_report(cmd, sc.cwd(self.ctx), env, report_path, log_path,
                                         timeout_s=min(duration + self.args.startup_s + 30.0,
                                                       max(30.0, self.budget.left())))
        else:   # attach once the script prints its own progress (or after the warm-up wait)
            gd = [*self.args.gpudoctor, "attach", "--duration", f"{duration:g}", *profile,
                  "--format", "json", "-o", str(report_path), "--fail-on", "critical"]
            wait_s = self.warmup_for(sc, applied)
            res = procs.run_attached([self.ctx.python, *script_args], gd, sc.cwd(self.ctx), env, report_path,
                                     log_path, lambda text: reportread.wall_rate(sc.wall, text, 1) is not None,
                                     wait_s, timeout_s=min(wait_s + duration + self.args.startup_s + 30.0,
                                                           max(30.0, self.budget.left())))
        rec: dict[str, Any] = {"scenario": sc.name, "variant": label, "applied": list(applied), "forced": forced,
                               "cmd": [self.ctx.python, *script_args], "duration_s": duration,
                               "wall_s": round(res.wall_s, 1), "ended_by": res.ended_by, "rc": res.returncode}
        batch = sc.batch(self.ctx)
        try:
            rec.update(reportread.read_report(json.loads(report_path.read_text()), self.kinds, batch))
            rec["error"] = None
        except (OSError, ValueError) as exc:
            rec.update({"steps_per_s": None, "samples_per_s": None, "findings": [], "bottleneck": None,
                        "error": f"no report ({type(exc).__name__}: {exc})"})
        rec["wall_steps_per_s"] = reportread.wall_rate(sc.wall, res.log, batch)
        if rec["error"] or not rec.get("steps_per_s"):
            rec["log_tail"] = res.log[-3000:]
            last = [ln for ln in res.log.splitlines() if ln.strip()][-1:] or ["(no output)"]
            say(f"    log ends: {last[0][:200]}")
        top = rec["findings"][0] if rec["findings"] else None
        say(f"    -> {res.ended_by} after {res.wall_s:.0f}s; steps/s agent={fmt(rec.get('steps_per_s'))} "
            f"wall={fmt(rec['wall_steps_per_s'])}; bound={bound_label(rec)}; "
            f"top={finding_label(top) if top else '-'}; findings={len(rec['findings'])}"
            + (f"; {rec['error']}" if rec["error"] else ""))
        return rec

    # -- one scenario: the chain, then the alternatives --------------------------------------------
    def scenario(self, sc: Scenario) -> None:
        say(f"scenario {sc.name}: {sc.origin} — {sc.note}")
        if sc.prepare is not None:
            t0 = time.monotonic()
            sc.prepare(self.ctx)
            say(f"  data ready in {time.monotonic() - t0:.1f}s")
        fixes = sc.fixes(self.ctx)
        cur = self.run(sc, ())
        applied: tuple[str, ...] = ()
        chain: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []
        base = cur
        for stage in range(1, sc.chain + 1):
            if cur is None or not cur.get("steps_per_s"):
                break
            cands = reportread.expressible(cur["findings"], fixes, set(applied) | self.args.skip_kinds)
            forced = False
            if not cands and self.args.force_fixes:
                left = [k for k in fixes if k not in applied and k not in self.args.skip_kinds]
                cands = [{"code": None, "fix_kind": left[0], "severity": None, "impact": None}] if left else []
                forced = bool(cands)
            if not cands:
                say(f"  stage {stage}: gpudoctor names no further fix this script's flags can express")
                break
            top = cands[0]
            nxt = self.run(sc, (*applied, top["fix_kind"]), forced)
            chain.append((applied, cands))
            self.stages.append(self._compare(sc, stage, cur, nxt, top, forced, base, cands))
            if nxt is None:
                break
            cur, applied = nxt, (*applied, top["fix_kind"])
        self.pending += [(sc, before, cands, st) for (before, cands), st in
                         zip(chain, [x for x in self.stages if x["scenario"] == sc.name]) if len(cands) > 1]

    def alternatives_pass(self) -> None:
        """Measure, for every stage where gpudoctor named several expressible fixes, each non-top fix on
        its own from the same starting point; run after all scenarios' chains (lower priority)."""
        for sc, before, cands, st in self.pending:
            parent = self._cache.get((sc.name, before))
            measured = {cands[0]["fix_kind"]: st["measured_speedup"]}
            for alt in cands[1:]:
                r = self.run(sc, (*before, alt["fix_kind"]))
                if r is None or parent is None:
                    continue
                m = ratio(r.get("steps_per_s"), parent.get("steps_per_s"))
                measured[alt["fix_kind"]] = m
                lo, hi = reportread.speedup_band(alt)
                self.alternatives.append({"scenario": sc.name, "stage": st["stage"], "fix_kind": alt["fix_kind"],
                                          "code": alt.get("code"), "severity": alt.get("severity"),
                                          "est_low": lo, "est_high": hi, "measured_speedup": m})
                say(f"  {sc.name} stage {st['stage']} alternative {alt['fix_kind']} ({alt.get('code')}): "
                    f"predicted {fmt(lo)}–{fmt(hi)}x, measured {fmt(m)}x")
            known = {k: v for k, v in measured.items() if v is not None}
            if len(known) > 1:
                fastest = max(known, key=lambda k: known[k])
                st["fastest_fix"], st["top_was_fastest"] = fastest, fastest == cands[0]["fix_kind"]
                st["measured_by_fix"] = known

    def _compare(self, sc: Scenario, stage: int, cur: dict[str, Any], nxt: dict[str, Any] | None,
                 top: dict[str, Any], forced: bool, base: dict[str, Any] | None,
                 cands: list[dict[str, Any]]) -> dict[str, Any]:
        lo, hi = reportread.speedup_band(top)
        measured = ratio(nxt.get("steps_per_s"), cur.get("steps_per_s")) if nxt else None
        wall = ratio(nxt.get("wall_steps_per_s"), cur.get("wall_steps_per_s")) if nxt else None
        mid = math.sqrt(lo * hi) if lo and hi else None
        err = abs(mid - measured) / abs(measured - 1.0) if mid and measured and abs(measured - 1.0) > 0.02 else None
        st = {"scenario": sc.name, "stage": stage, "fix_kind": top["fix_kind"], "code": top.get("code"),
              "severity": top.get("severity"), "forced": forced, "est_low": lo, "est_high": hi,
              "basis": (top.get("impact") or {}).get("basis"), "measured_speedup": measured,
              "wall_speedup": wall, "in_band": (lo <= measured <= hi) if lo and hi and measured else None,
              "rel_error_of_gain": err, "candidates": [c["fix_kind"] for c in cands],
              "report_top": finding_label(cur["findings"][0]) if cur.get("findings") else None,
              "cumulative_vs_base": ratio(nxt.get("steps_per_s"), base.get("steps_per_s")) if nxt and base else None}
        say(f"  stage {stage}: {'forced ' if forced else ''}{top['fix_kind']} ({top.get('code')}, "
            f"{top.get('severity')}) predicted {fmt(lo)}–{fmt(hi)}x, measured {fmt(measured)}x "
            f"(wall {fmt(wall)}x); cumulative {fmt(st['cumulative_vs_base'])}x")
        return st


PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])          # the timm checkout, as benchmark.py sees it from its folder
out = {"python": sys.version.split()[0]}
for name in ("torch", "torchvision", "timm", "lightning", "transformers", "accelerate", "jsonargparse",
             "numpy", "PIL", "gpudoctor"):
    try:
        out[name] = getattr(importlib.import_module(name), "__version__", "?")
    except Exception as exc:
        out[name] = f"missing ({type(exc).__name__}: {exc})"[:160]
import torch
out["torch_cuda"] = torch.version.cuda
print(json.dumps(out))
"""


def probe_env(ctx: Ctx) -> dict[str, Any]:
    """Package versions the scripts will see (no CUDA context is opened)."""
    rc, text = procs.run_bounded([ctx.python, "-c", PROBE, str(ctx.scripts / "timm")], timeout_s=90.0)
    try:
        return dict(json.loads(text.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"probe_failed": f"rc {rc}: {text[-300:]}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scripts", type=Path, required=True, help="folder of fetched third-party scripts")
    p.add_argument("--part", choices=["1", "2", "3", "all"], default="all")
    p.add_argument("--only", action="append", default=[], help="run only these scenarios (repeatable)")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--cpu", action="store_true", help="no GPU: CPU dry-run (implies --force-fixes)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes (with --cpu)")
    p.add_argument("--force-fixes", action="store_true")
    p.add_argument("--no-alternatives", action="store_true", help="do not measure non-top fixes")
    p.add_argument("--skip-kinds", default="", help="fix kinds never applied, comma-separated (e.g. compile)")
    p.add_argument("--duration", type=float, default=None, help="gpudoctor run --duration (s)")
    p.add_argument("--compile-extra-s", type=float, default=None, help="added to --duration for compiled runs (default: per scenario, 60-75 s; CPU 150 s)")
    p.add_argument("--startup-s", type=float, default=None, help="expected start/stop cost of a run (s)")
    p.add_argument("--profile", type=int, default=0,
                   help="pass --profile N (armed at once); default 0: gpudoctor's automatic 5-step window, "
                        "taken once steps are seen (after a compile, after start-up)")
    p.add_argument("--launch", choices=["run", "attach"], default="run",
                   help="run: `gpudoctor run -- script` (default); attach: start the script, then "
                        "`gpudoctor attach --duration` once it prints progress (a profile of steady steps)")
    p.add_argument("--attach-wait-s", type=float, default=None,
                   help="attach: longest wait for the first progress line (plus compile time)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO / "bench" / "results" / "realscripts"))
    p.add_argument("--work", type=Path, default=None, help="temporary folder (default: a new one)")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the scripts")
    p.add_argument("--gpudoctor", default=f"{sys.executable} -m gpudoctor", help="how to start gpudoctor")
    args = p.parse_args(argv)
    cpu = args.cpu
    args.force_fixes = args.force_fixes or cpu
    args.duration = args.duration or (60.0 if cpu else 30.0)
    args.startup_s = args.startup_s or (40.0 if cpu else 15.0)
    args.attach_wait_s = args.attach_wait_s if args.attach_wait_s is not None else (90.0 if cpu else 30.0)
    args.gpudoctor = args.gpudoctor.split()
    args.skip_kinds = {k for k in args.skip_kinds.split(",") if k}
    scripts = args.scripts.resolve()
    if not scripts.is_dir():
        print(f"realscripts_validation: --scripts {args.scripts} is not a folder.", file=sys.stderr)
        return 2
    procs.install_cleanup()
    work = args.work or Path(tempfile.mkdtemp(prefix="gd_realscripts_"))
    work.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(scripts=scripts, work=work.resolve(), cpu=cpu, python=args.python)
    h = Harness(args, ctx)
    env_versions = probe_env(ctx)
    say(f"environment: {json.dumps(env_versions)}")
    chosen = [s for s in SCENARIOS if (args.part == "all" or str(s.part) == args.part)
              and (not args.only or s.name in args.only)]
    say(f"realscripts: part {args.part}, {len(chosen)} scenarios, budget {args.budget_s:.0f}s, "
        f"{'CPU tiny' if cpu else 'GPU'}, work {work}; fix kinds by rule: "
        + ", ".join(f"{c}={k}" for c, k in sorted(h.kinds.items())))
    for sc in chosen:
        if h.budget.left() < h.cost(sc, ()):
            say(f"skip scenario {sc.name}: budget spent")
            continue
        try:
            h.scenario(sc)
        except Exception as exc:       # one broken scenario must not lose the others' results
            say(f"scenario {sc.name} failed: {type(exc).__name__}: {exc}")
    if not args.no_alternatives:
        try:
            h.alternatives_pass()
        except Exception as exc:
            say(f"alternatives failed: {type(exc).__name__}: {exc}")
    text = table(h)
    summ = summary(h)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"realscripts_part{args.part}"
    Path(f"{stem}.json").write_text(json.dumps(
        {"part": args.part, "cpu": cpu, "budget_s": args.budget_s, "scripts": str(scripts), "env": env_versions,
         "settings": {"launch": args.launch, "duration": args.duration, "compile_extra_s": args.compile_extra_s,
                      "profile": args.profile}, "fix_kinds": h.kinds, "summary": summ,
         "runs": h.runs, "stages": h.stages, "alternatives": h.alternatives}, indent=1, default=str))
    Path(f"{stem}.txt").write_text(text + "\n\n" + json.dumps(summ, indent=1) + "\n")
    print("\n" + text + "\n\nsummary: " + json.dumps(summ), flush=True)
    Path(f"{stem}.log").write_text("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
