"""Predicted against measured gain of each fix on transformer training scripts (issue 35, items 2 and 5).

Why this exists: gpudoctor's estimates must bracket what each fix really gains. For each script —
the plain GPT-2 124M of ``gpt2_train.py`` (batch 16 × 1024, hand-written attention), karpathy/nanoGPT's
``train.py`` with flash attention turned off, and a Hugging Face ``Trainer`` GPT-2 with eager attention
(``bench/validation/realscripts/hf_trainer_gpt2.py``) — this harness, in one run:

1. measures the baseline's steps/s (the script's own timing lines, after its warm-up);
2. records a torch.profiler trace of a few baseline steps (``profile_wrap.py``: the script unmodified,
   the profiler stepped by a global optimizer-step hook) and runs ``gpudoctor analyze --format json``;
3. applies each fix alone to the job as it was (TF32, bf16, SDPA, torch.compile, fused AdamW — the
   ones the script can express), measures its steps/s, and
4. prints a table: the rule that names the fix, its estimate, the measured gain, and whether the
   estimate brackets the measurement (within 25% of the gain at worst).

    # H200, two calls of < 10 min each (the lead's device):
    PYTHONPATH=/tmp/site:$PWD/src python bench/validation/transformer_validation.py --scripts gpt2 --nanogpt thirdparty/nanoGPT
    PYTHONPATH=/tmp/site:$PWD/src python bench/validation/transformer_validation.py --scripts nanogpt,hf --nanogpt thirdparty/nanoGPT
    # CPU dry-run (tiny models, no compile; proves the plumbing, numbers mean nothing):
    python bench/validation/transformer_validation.py --cpu --tiny --nanogpt /work/corpus/nanoGPT

Results: ``transformer_validation.json`` and ``.txt`` in ``--out`` (default ``$OUT``, else
``bench/results/transformer``). Every child runs in its own process group with a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench" / "validation"))
from realscripts import datagen, procs  # noqa: E402

#: fix → the rules whose finding names it (the first one found is compared)
FIX_RULES: dict[str, tuple[str, ...]] = {
    "tf32": ("GD202",), "bf16": ("GD201",), "sdpa": ("GD212",), "compile": ("GD403",), "fused_adamw": ("GD204",),
}
LOG: list[str] = []


def say(line: str) -> None:
    LOG.append(f"{time.strftime('%H:%M:%S')} {line}")
    print(LOG[-1], flush=True)


@dataclass
class Script:
    name: str
    cwd: Path
    base: list[str]                       # the script and its arguments (after the interpreter)
    fixes: dict[str, list[str]]           # fix → arguments added to (or replacing in) the base
    rate: str                             # how its timing lines read: gpt2 | nanogpt | hf
    measure: dict[str, list[str]] = field(default_factory=dict)  # steps for a measured run / a profiled one
    cwd_for: dict[str, Path] = field(default_factory=dict)        # fix → another working folder


def with_args(base: list[str], extra: list[str]) -> list[str]:
    """``base`` with each ``--flag[=value]`` of ``extra`` replacing the same flag there, or appended."""
    out = list(base)
    i = 0
    while i < len(extra):
        flag = extra[i]
        value = [extra[i + 1]] if i + 1 < len(extra) and not extra[i + 1].startswith("--") and "=" not in flag else []
        key = flag.split("=", 1)[0]
        for j, b in enumerate(out):
            if b.split("=", 1)[0] == key:
                has_value = "=" not in b and j + 1 < len(out) and not out[j + 1].startswith("--")
                out[j: j + 1 + int(has_value)] = [flag, *value]
                break
        else:
            out.extend([flag, *value])
        i += 1 + len(value)
    return out


# -- rates from the scripts' own lines ------------------------------------------------------------

def rate_of(kind: str, text: str, skip: int) -> float | None:
    """Steps per second from one run's output (median step after ``skip`` warm-up steps)."""
    if kind == "gpt2":
        found = re.findall(r"steps_per_s=([\d.]+)", text)
        return float(found[-1]) if found else None
    pattern = r"iter \d+: loss [\d.naif]+, time ([\d.]+)ms" if kind == "nanogpt" else r"step_time_ms=([\d.]+)"
    times = [float(x) for x in re.findall(pattern, text)][skip:]
    return 1000.0 / statistics.median(times) if times else None


# -- the scripts ------------------------------------------------------------------------------------

def nanogpt_run_dir(src: Path, work: Path, cpu: bool) -> tuple[Path, Path]:
    """Two folders with nanoGPT's train.py and configurator.py (unchanged copies: train.py reads
    configurator.py from its working directory and imports model.py from its own), synthetic token
    bins, and model.py with flash attention off (the baseline) and on as written (the SDPA fix)."""
    data = work / "nanogpt_data" / "synth"
    if not (data / "val.bin").exists():
        n = 100_000 if cpu else 3_000_000
        datagen.token_bins(data, train_tokens=n, val_tokens=n // 10)
    model = (src / "model.py").read_text()
    flash = "self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')"
    if flash not in model:
        raise SystemExit(f"{src}/model.py has no line {flash!r}: cannot turn flash attention off")
    dirs = []
    for name, text in (("nanogpt_flash_off", model.replace(flash, "self.flash = False  # off: transformer_validation")),
                       ("nanogpt_flash_on", model)):
        run = work / name
        (run / "data").mkdir(parents=True, exist_ok=True)
        if not (run / "data" / "synth").exists():
            (run / "data" / "synth").symlink_to(data.resolve())
        # copies, not links: Python puts the script's real folder on sys.path, and train.py imports
        # model.py from there
        for name in ("train.py", "configurator.py"):
            shutil.copy(src / name, run / name)
        (run / "model.py").write_text(text)
        dirs.append(run)
    return dirs[0], dirs[1]


def scripts(args: argparse.Namespace, work: Path) -> dict[str, Script]:
    cpu, tiny = args.cpu, args.tiny
    out: dict[str, Script] = {}
    dev = ["--cpu"] if cpu else []
    size = ["--tiny"] if tiny else []
    warm, steps = (2, 4) if tiny else (3, args.steps)
    out["gpt2"] = Script(
        "gpt2", work, [str(HERE / "gpt2_train.py"), *dev, *size, "--warmup", str(warm), "--steps", str(steps)],
        {"tf32": ["--tf32"], "bf16": ["--bf16"], "sdpa": ["--sdpa"], "compile": ["--compile"],
         "fused_adamw": ["--fused-adamw"]}, "gpt2",
        measure={"profile": ["--steps", "100000"]})
    if args.nanogpt:
        run, flash_on = nanogpt_run_dir(Path(args.nanogpt), work, cpu)
        common = ["train.py", "--dataset=synth", "--compile=False", "--dtype=float32", "--eval_interval=100000",
                  "--log_interval=1", "--always_save_checkpoint=False", "--out_dir=out", "--eval_iters=1",
                  "--gradient_accumulation_steps=1", f"--max_iters={warm + steps}", f"--lr_decay_iters={10**6}"]
        if tiny:
            common += ["--n_layer=2", "--n_head=2", "--n_embd=64", "--block_size=64", "--batch_size=4"]
        else:
            common += ["--batch_size=16", "--block_size=1024"]
        if cpu:
            common += ["--device=cpu"]
        out["nanogpt"] = Script(
            "nanogpt", run, common,
            {"bf16": ["--dtype=bfloat16"], "sdpa": [], "compile": ["--compile=True"]}, "nanogpt",
            measure={"profile": ["--max_iters=100000"]}, cwd_for={"sdpa": flash_on})
    if args.hf:
        hf = [str(REPO / "bench" / "validation" / "realscripts" / "hf_trainer_gpt2.py"), "--output_dir", str(work / "hf_out"),
              "--max_steps", str(warm + steps), "--logging_steps", "1000", "--save_strategy", "no",
              "--report_to", "none", "--attn_implementation", "eager"]
        if tiny:
            hf += ["--n_layer", "2", "--n_head", "2", "--n_embd", "64", "--seq_len", "64",
                   "--per_device_train_batch_size", "4"]
        if cpu:
            hf += ["--use_cpu", "True"]
        out["hf"] = Script(
            "hf", work, hf,
            {"tf32": ["--tf32", "True"], "bf16": ["--bf16", "True"], "sdpa": ["--attn_implementation", "sdpa"],
             "compile": ["--torch_compile", "True"], "fused_adamw": ["--optim", "adamw_torch_fused"]}, "hf",
            measure={"profile": ["--max_steps", "100000"]})
    return out


# -- one run --------------------------------------------------------------------------------------

def child_env(cpu: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if env.get("PYTHONPATH"):     # the scripts run in their own folders: relative entries would break
        env["PYTHONPATH"] = os.pathsep.join(str(Path(x).resolve()) for x in env["PYTHONPATH"].split(os.pathsep) if x)
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def measure(args: argparse.Namespace, sc: Script, fix: str | None, work: Path) -> dict[str, Any]:
    cmd = [args.python, *(with_args(sc.base, sc.fixes[fix]) if fix else sc.base)]
    timeout = args.timeout_s + (args.compile_s if fix == "compile" else 0.0)
    started = time.monotonic()
    rc, text = procs.run_bounded(cmd, timeout_s=timeout, cwd=sc.cwd_for.get(fix or "", sc.cwd), env=child_env(args.cpu))
    (work / f"{sc.name}__{fix or 'base'}.log").write_text(text)
    rate = rate_of(sc.rate, text, skip=3)
    say(f"  {sc.name} [{fix or 'base'}] rc={rc} {time.monotonic() - started:.0f} s: "
        f"{f'{rate:.3f} steps/s' if rate else 'no rate: ' + text[-300:]!r}")
    return {"fix": fix or "base", "rc": rc, "steps_per_s": rate, "wall_s": round(time.monotonic() - started, 1)}


def profile_and_analyze(args: argparse.Namespace, sc: Script, work: Path) -> dict[str, Any]:
    trace = work / f"{sc.name}__base.pt.trace.json.gz"
    wait = 2 if args.tiny else 4
    cmd = [args.python, str(HERE / "profile_wrap.py"), str(trace), str(wait), str(args.profile_steps),
           *with_args(sc.base, sc.measure.get("profile", []))]
    rc, text = procs.run_bounded(cmd, timeout_s=args.timeout_s + 60.0, cwd=sc.cwd, env=child_env(args.cpu))
    (work / f"{sc.name}__profile.log").write_text(text)
    if not trace.exists():
        say(f"  {sc.name}: no trace (rc {rc}): {text[-400:]!r}")
        return {"findings": [], "error": f"no trace (rc {rc})"}
    rc, report = procs.run_bounded([*args.gpudoctor, "analyze", str(trace), "--format", "json", "--fail-on", "critical"],
                                   timeout_s=120.0, cwd=work, env=child_env(args.cpu))
    try:
        data = json.loads(report[report.index("{"):])
    except ValueError:
        say(f"  {sc.name}: analyze gave no JSON (rc {rc}): {report[-400:]!r}")
        return {"findings": [], "error": f"analyze rc {rc}"}
    if args.keep_traces:
        shutil.copy(trace, args.out / trace.name)
    findings = [{"code": f.get("code"), "severity": f.get("severity"),
                 "low": (f.get("impact") or {}).get("est_speedup_low"),
                 "high": (f.get("impact") or {}).get("est_speedup_high"),
                 "shares_cost_with": (f.get("impact") or {}).get("shares_cost_with"),
                 "message": f.get("message")} for f in data.get("findings", [])]
    say(f"  {sc.name}: gpudoctor analyze: " + ", ".join(
        f"{f['code']} {f['low']:.2f}–{f['high']:.2f}×" if f["low"] else str(f["code"]) for f in findings))
    return {"findings": findings, "trace_bytes": trace.stat().st_size}


# -- the comparison -------------------------------------------------------------------------------

def verdict(low: float | None, high: float | None, measured: float | None) -> str:
    """``brackets`` / ``within 25%`` (of the gain, measured − 1) / ``over`` / ``under`` / ``—``."""
    if measured is None or low is None or high is None:
        return "—"
    if low <= measured <= high:
        return "brackets"
    gain = max(abs(measured - 1.0), 0.05)
    miss = (low - measured) if measured < low else (measured - high)
    side = "over" if measured < low else "under"
    return f"within 25% ({side})" if miss <= 0.25 * gain else side


def rows_for(sc: Script, base: dict[str, Any], fixed: list[dict[str, Any]], analysis: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for run in fixed:
        fix = run["fix"]
        finding = next((f for code in FIX_RULES.get(fix, ()) for f in analysis["findings"] if f["code"] == code), None)
        measured = run["steps_per_s"] / base["steps_per_s"] if run["steps_per_s"] and base["steps_per_s"] else None
        low, high = (finding["low"], finding["high"]) if finding else (None, None)
        rows.append({"script": sc.name, "fix": fix, "rule": finding["code"] if finding else "(none)",
                     "severity": finding["severity"] if finding else None, "predicted_low": low, "predicted_high": high,
                     "base_steps_per_s": base["steps_per_s"], "fixed_steps_per_s": run["steps_per_s"],
                     "measured_gain": round(measured, 3) if measured else None,
                     "verdict": verdict(low, high, measured) if finding else ("quiet" if measured and measured < 1.1 else "missed")})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = "| script | fix | rule | predicted | measured | verdict | base → fixed steps/s |\n|---|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        pred = f"{r['predicted_low']:.2f}–{r['predicted_high']:.2f}×" if r["predicted_low"] else "—"
        meas = f"{r['measured_gain']:.2f}×" if r["measured_gain"] else "—"
        rates = f"{r['base_steps_per_s'] or 0:.3f} → {r['fixed_steps_per_s'] or 0:.3f}"
        lines.append(f"| {r['script']} | {r['fix']} | {r['rule']} | {pred} | {meas} | {r['verdict']} | {rates} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", action="store_true", help="run on the CPU (CUDA hidden)")
    p.add_argument("--tiny", action="store_true", help="tiny models and few steps")
    p.add_argument("--scripts", default="gpt2,nanogpt,hf", help="comma-separated: gpt2, nanogpt, hf")
    p.add_argument("--fixes", default="tf32,bf16,sdpa,compile,fused_adamw", help="fixes to measure (those a script has)")
    p.add_argument("--on-top", default="", help="fixes applied to every run first (the baseline becomes e.g. bf16): "
                   "what each other fix gains on top of them")
    p.add_argument("--nanogpt", default="thirdparty/nanoGPT", help="a checkout of karpathy/nanoGPT ('' to skip)")
    p.add_argument("--steps", type=int, default=10, help="measured steps per run (GPU)")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--timeout-s", type=float, default=150.0, help="per run")
    p.add_argument("--compile-s", type=float, default=120.0, help="added to the timeout of a compiled run")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO / "bench" / "results" / "transformer"))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--gpudoctor", default=f"{sys.executable} -m gpudoctor")
    p.add_argument("--keep-traces", action="store_true", help="copy the baseline traces into --out")
    args = p.parse_args(argv)
    args.gpudoctor = args.gpudoctor.split()
    wanted = [s for s in args.scripts.split(",") if s]
    fixes = [f for f in args.fixes.split(",") if f]
    if args.cpu and "compile" in fixes and "--fixes" not in " ".join(argv or sys.argv):
        fixes.remove("compile")   # Inductor on CPU compiles for minutes: only when asked for
    args.hf = "hf" in wanted and _has("transformers", args.python)
    if "hf" in wanted and not args.hf:
        say("hf: transformers is not installed for this interpreter: skipped")
    if args.nanogpt and not Path(args.nanogpt, "train.py").exists():
        say(f"nanogpt: no train.py under {args.nanogpt}: skipped")
        args.nanogpt = ""
    if "nanogpt" not in wanted:
        args.nanogpt = ""
    args.out.mkdir(parents=True, exist_ok=True)
    procs.install_cleanup()
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gd-transformer-") as tmp:
        work = Path(tmp)
        for name, sc in scripts(args, work).items():
            if name not in wanted:
                continue
            for fix in (f for f in args.on_top.split(",") if f):
                if fix not in sc.fixes:
                    raise SystemExit(f"{name} has no fix {fix!r} to apply first")
                if fix in sc.cwd_for:
                    sc.cwd = sc.cwd_for.pop(fix)
                sc.base = with_args(sc.base, sc.fixes.pop(fix))
            say(f"{name}: {' '.join(sc.base)}")
            base = measure(args, sc, None, work)
            analysis = profile_and_analyze(args, sc, work)
            todo = [fix for fix in fixes if fix in sc.fixes]
            if args.cpu:   # a dry run: its rates mean nothing, so its runs may share the cores
                with ThreadPoolExecutor(max_workers=2) as pool:
                    fixed = list(pool.map(measure, [args] * len(todo), [sc] * len(todo), todo, [work] * len(todo)))
            else:          # on the GPU every run has the machine to itself
                fixed = [measure(args, sc, fix, work) for fix in todo]
            rows.extend(rows_for(sc, base, fixed, analysis))
            details[name] = {"base": base, "fixed": fixed, "analysis": analysis}
    text = table(rows)
    print(text)
    meta = {"cpu": args.cpu, "tiny": args.tiny, "on_top": args.on_top, "wall_s": round(time.monotonic() - started, 1),
            "python": args.python, "nanogpt": args.nanogpt}
    (args.out / "transformer_validation.json").write_text(json.dumps({"meta": meta, "rows": rows, "details": details,
                                                                       "log": LOG}, indent=1))
    (args.out / "transformer_validation.txt").write_text(text + f"\n\n{json.dumps(meta)}\n")
    say(f"done in {meta['wall_s']:.0f} s: {args.out / 'transformer_validation.txt'}")
    return 0


def _has(module: str, python: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=120).returncode == 0


if __name__ == "__main__":
    raise SystemExit(main())
