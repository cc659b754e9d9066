"""The fault-zoo validation table: per example, what was found, what else, the overhead, the speedup, the goal.

Why this exists: ``validate_examples.py`` measures; this module only judges and formats, so the
judging (expected extras vs false positives, the speed goal by ``fix_kind``) is testable on made-up
rows without a GPU.

What it must not do: hide a finding. Every code reported is shown in exactly one column: the
expected one, an expected extra (listed with its reason in examples/zoo.py), or a false positive.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from zoo import MIN_SPEEDUP, Example
from zoo_runner import Row, Settings, Variant

COLUMNS = ("example", "expected", "found?", "expected extras (unfixed)", "false positives (unfixed)",
           "after --fix: expected extras", "after --fix: false positives", "time to first finding",
           "steady-state overhead: steps/s alone → attached (passive)", "steps/s in the profile attach",
           "fix kind", "speedup, tool-free", "speedup via compare (verdict, 95% CI of step-time change)", "goal")


def fmt_rate(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _codes(codes: set[str]) -> str:
    return ", ".join(sorted(codes)) or "none"


def machine_extras(env: dict[str, str] | None = None) -> set[str]:
    """Codes that the machine itself imposes on every job, whatever the example: GD805 when the host
    requires ``NCCL_NVLS_ENABLE=0`` in every process's environment (the H200 machines do). True
    findings, not planted problems: listed with the expected extras, never counted as false positives."""
    env = dict(os.environ) if env is None else env
    return {"GD805"} if env.get("NCCL_NVLS_ENABLE") == "0" else set()


def split_codes(ex: Example, v: Variant, cpu: bool) -> tuple[set[str], set[str], set[str]]:
    """(expected found, expected extras, false positives) of one variant. On the fixed run the expected
    code itself counts as a false positive ("still there"): the fix did not remove it."""
    expected = set(ex.expected_on(cpu))
    allowed = set(ex.allowed(v.fix)) | machine_extras()
    if v.fix:
        return set(), v.codes & allowed, v.codes - allowed
    return v.codes & expected, (v.codes - expected) & allowed, v.codes - expected - allowed


def speedup(row: Row) -> tuple[float | None, str]:
    """The fix's speedup for the goal: compare's (median step time) when it ran, else tool-free."""
    c = row.compare or {}
    if isinstance(c.get("speedup"), (int, float)):
        return float(c["speedup"]), "compare"
    u, f = row.variants.get(False), row.variants.get(True)
    if u and f and u.rate_alone_mean and f.rate_alone:
        return f.rate_alone / u.rate_alone_mean, "tool-free"
    return None, "–"


def goal(row: Row, cpu: bool) -> str:
    """``met`` or the reasons it is not: expected code missed, a false positive, a speed fix < 1.1x."""
    ex = row.example
    u, f = row.variants.get(False), row.variants.get(True)
    misses = []
    if u is None:
        return "not run"
    found, _, fps = split_codes(ex, u, cpu)
    if set(ex.expected_on(cpu)) - found:
        misses.append("missed " + ", ".join(sorted(set(ex.expected_on(cpu)) - found)))
    if fps:
        misses.append("false positives")
    if f is not None:
        if split_codes(ex, f, cpu)[2]:
            misses.append("false positives after --fix")
        if ex.fix_kind == "speed" and not cpu:
            value, _ = speedup(row)
            if value is None or value < MIN_SPEEDUP:
                misses.append(f"speedup < {MIN_SPEEDUP}x")
    return "met" if not misses else "**not met**: " + "; ".join(misses)


def _overhead(v: Variant | None) -> str:
    if v is None:
        return "–"
    alone = v.rate_alone_mean
    if alone and v.rate_passive:
        return f"{fmt_rate(alone)} → {fmt_rate(v.rate_passive)} ({(v.rate_passive / alone - 1) * 100:+.1f}%)"
    return f"{fmt_rate(alone)} → {fmt_rate(v.rate_passive)}"


def _compare_cell(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    value = f"{c['speedup']:.2f}x" if isinstance(c.get("speedup"), (int, float)) else "–"
    ci = c.get("ci95_change_pct")
    ci_text = f", {ci[0]:+.1f}% … {ci[1]:+.1f}%" if isinstance(ci, list) and len(ci) == 2 else ", medians only"
    return f"{value} ({c.get('verdict', '–')}{ci_text})"


def _fix_kind(ex: Example) -> str:
    if ex.fix_kind == "none":
        return "– (baseline)"
    return ex.fix_kind if ex.fix_kind == "speed" else f"{ex.fix_kind}: {ex.why_not_speed}"


def table(rows: list[Row], cpu: bool) -> list[str]:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        ex = r.example
        expected = ", ".join(sorted(ex.expected_on(cpu))) or "none"
        if r.skipped:
            lines.append(f"| {ex.name} | {expected} | skipped: {r.skipped} |" + " |" * (len(COLUMNS) - 3))
            continue
        u, f = r.variants.get(False), r.variants.get(True)
        found_codes, extras, fps = split_codes(ex, u, cpu) if u else (set(), set(), set())
        want = set(ex.expected_on(cpu))
        found = "–" if u is None else ("n/a" if not want else "yes" if want <= found_codes
                                       else "partly" if want & found_codes else "**no**")
        f_extras, f_fps = split_codes(ex, f, cpu)[1:] if f else (None, None)
        if f_fps:
            f_fps_text = ", ".join(f"{c} (still there)" if c in want else c for c in sorted(f_fps))
        else:
            f_fps_text = "–" if f is None else "none"
        ttff = "–" if u is None or u.ttff_s is None else f"{u.ttff_s:.1f} s"
        tool_free = "–"
        if u and f and u.rate_alone_mean and f.rate_alone:
            tool_free = f"{f.rate_alone / u.rate_alone_mean:.2f}x"
        cells = [ex.name, expected, found, _codes(extras), _codes(fps) if u else "–",
                 "–" if f_extras is None else _codes(f_extras), f_fps_text, ttff, _overhead(u),
                 fmt_rate(u.rate_profile if u else None), _fix_kind(ex), tool_free, _compare_cell(r.compare),
                 goal(r, cpu)]
        lines.append("| " + " | ".join(cells) + " |")
    reasons = [f"- **{r.example.name}**: {r.example.extras_reason}" for r in rows if r.example.extras_reason]
    if reasons:
        lines += ["", "Why the expected extras are true findings (examples/zoo.py `extras_reason`):", "", *reasons]
    errors = [f"- {r.example.name} ({'fixed' if v.fix else 'unfixed'}): {e}" for r in rows
              for v in r.variants.values() for e in v.errors]
    if errors:
        lines += ["", "Errors and gaps:", "", *errors]
    return lines


def summary(rows: list[Row], cpu: bool) -> str:
    run = [r for r in rows if not r.skipped]
    met = sum(1 for r in run if goal(r, cpu) == "met")
    found = sum(1 for r in run if r.example.expected_on(cpu) and False in r.variants
                and set(r.example.expected_on(cpu)) <= split_codes(r.example, r.variants[False], cpu)[0])
    wanted = sum(1 for r in run if r.example.expected_on(cpu))
    return (f"**{met} of {len(run)} examples meet every goal; expected findings found on {found} of {wanted}"
            f"{'; ' + str(len(rows) - len(run)) + ' skipped' if len(run) < len(rows) else ''}.**")


def write(path: Path, env: dict[str, str], rows: list[Row], s: Settings, wall_s: float, final: bool) -> None:
    mode = "CPU subset (--cpu)" if s.cpu else "GPU"
    head = [f"# gpudoctor validation on the fault zoo ({mode})", "",
            "Generated by `bench/validation/validate_examples.py" + (" --cpu" if s.cpu else "") + "`; do not edit by hand.",
            "", *[f"- {k}: {v}" for k, v in env.items()],
            f"- per variant: {s.baseline_s:g} s alone, `gpudoctor attach PID --duration {s.passive_s:g}` (passive: "
            f"collectors, py-spy, agent; first {s.settle_s:g} s left out of its rate; {s.passive_fixed_s:g} s after "
            f"--fix), {s.baseline_s:g} s alone again (unfixed only), then `gpudoctor attach PID --duration "
            f"{s.profile_attach_s:g} --profile 5` ({s.profile_attach_fixed_s:g} s after --fix)",
            f"- wall time: {wall_s:.0f} s" + ("" if final else " (partial: still running or killed)"),
            "", summary(rows, s.cpu), "",
            "Columns: *found?* = every expected code reported on the unfixed run (the passive and the profile "
            "attach, `analyze` of the agent's profile trace, `check` for static rules, `analyze` of per-rank "
            "traces for DDP). Every other code is shown once: as an *expected extra* when examples/zoo.py lists "
            "it for that variant with a reason (below the table), else as a *false positive*; after `--fix` the "
            "planted code itself is a false positive (\"still there\"). *Time to first finding* = seconds from "
            "the passive attach's start to the expected code (its `first_finding_s`), else the two watches' wall "
            "time (an upper bound). *Steady-state overhead* = the example's own step rate alone (mean of the "
            "windows before and after, unfixed) vs during the passive attach after the agent settled. *Steps/s "
            "in the profile attach* includes injection and the 5-step torch.profiler window and its export: not "
            "overhead. *Speedup via compare* = `gpudoctor compare` on the two passive reports (their raw step "
            "samples, `steps.step_ms`); *tool-free* = fixed / unfixed rate alone. *Goal*: expected found, no "
            f"false positive, and a speed fix >= {MIN_SPEEDUP}x (compare's, else tool-free); `memory`/`robustness` "
            "fixes say why they are not about speed.", ""]
    # Keep sections other scripts own (bench/perf/hta_rank_overlap.py's "<!-- multigpu:start -->" … end).
    old = path.read_text() if path.exists() else ""
    kept = old[old.index("<!-- multigpu:start -->"):] if "<!-- multigpu:start -->" in old else ""
    path.write_text("\n".join(head + table(rows, s.cpu)) + "\n" + ("\n" + kept if kept else ""))
