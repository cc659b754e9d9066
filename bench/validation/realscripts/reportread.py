"""Reading a ``gpudoctor run --format json`` report into what the validation compares.

Why this exists: the harness needs four things from each report — the bottleneck verdict, the
findings in report order with their impact estimates, the measured step rate (the agent's step
times), and which of the findings name a fix that a given script can express through its flags. The
report schema is still growing (``bottleneck`` and ``findings[].impact`` land with issue 12), so
every field is read defensively: a missing field is recorded as missing, never guessed.

Fix kinds are the harness's own vocabulary (``bf16``, ``channels_last``, ``compile``, …); a rule
maps to one by its code, or — for rules added after this was written — by its name in ``rules/``.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

#: rule code -> fix kind, for the rules that existed when the harness was written
CODE_FIX_KIND: dict[str, str] = {
    "GD201": "bf16",            # missing-autocast
    "GD202": "tf32",            # tf32-disabled
    "GD203": "channels_last",   # channels-last-missing
    "GD102": "workers",         # input-bound
    "GD104": "workers",         # dataloader-workers-saturated
    "GD105": "pin_memory",      # unpinned-input-batches
    "GD303": "cuda_graphs",     # launch-bound: its fix is torch.compile(mode="reduce-overhead")
    "GD211": "pad_dims",        # gemm-dims-unaligned: pad the odd dimension (a vocabulary) to a multiple of 64
}

#: fix kind by a pattern on the rule's name (rules/GDxxx-<name>.md), checked in this order
NAME_FIX_KIND: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"cuda-?graph"), "cuda_graphs"),
    (re.compile(r"(?<!re)compile(?!s\b)"), "compile"),   # torch.compile advice, not "recompiles"
]


def fix_kind_map(rules_dir: Path) -> dict[str, str]:
    """Rule code -> fix kind: the fixed table plus every rule in ``rules_dir`` whose name matches."""
    kinds = dict(CODE_FIX_KIND)
    for path in sorted(rules_dir.glob("GD[0-9][0-9][0-9]-*.md")):
        code, _, name = path.stem.partition("-")
        if code in kinds:
            continue
        for pattern, kind in NAME_FIX_KIND:
            if pattern.search(name):
                kinds[code] = kind
                break
    return kinds


def _finding_kind(finding: dict[str, Any], kinds: dict[str, str]) -> str | None:
    code = str(finding.get("code", ""))
    if code in kinds:
        return kinds[code]
    name = str(finding.get("name", ""))
    for pattern, kind in NAME_FIX_KIND:
        if pattern.search(name):
            return kind
    return None


def summarize_finding(finding: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    impact = finding.get("impact")
    return {
        "code": finding.get("code"),
        "name": finding.get("name"),
        "severity": finding.get("severity"),
        "source": finding.get("source") or finding.get("sources"),
        "title": finding.get("title"),
        "fix_kind": _finding_kind(finding, kinds),
        "impact": impact if isinstance(impact, dict) else None,
        "impact_note": finding.get("impact_note"),
    }


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_report(report: dict[str, Any], kinds: dict[str, str], batch: int) -> dict[str, Any]:
    """The comparable parts of one report (see the module docstring)."""
    steps = report.get("steps") if isinstance(report.get("steps"), dict) else {}
    assert isinstance(steps, dict)
    p50 = _num(steps.get("step_time_p50_ms"))
    samples = [float(x) for x in steps.get("step_ms") or [] if _num(x)]
    # Throughput is steps over time, i.e. 1 / the MEAN step time: an input-bound job's steps alternate
    # between fast and stalled, and 1 / median would overstate it. The report's samples leave out the
    # profile window; with fewer than 5 of them, the agent's own rate, then 1 / median.
    mean_rate = 1000.0 / statistics.fmean(samples) if len(samples) >= 5 else None
    agent_rate = _num(steps.get("steps_per_s"))
    p50_rate = 1000.0 / p50 if p50 and p50 > 0 else None
    rate = mean_rate or agent_rate or p50_rate
    bottleneck = report.get("bottleneck")
    profile = report.get("rank_profile")
    if not isinstance(bottleneck, dict) and isinstance(profile, dict):
        bottleneck = profile.get("bottleneck")
    agent = report.get("agent") if isinstance(report.get("agent"), dict) else {}
    assert isinstance(agent, dict)
    findings = [f for f in report.get("findings", []) if isinstance(f, dict)]
    return {
        "steps_total": steps.get("steps_total"),
        "step_time_p50_ms": p50,
        "step_time_p90_ms": _num(steps.get("step_time_p90_ms")),
        "steps_per_s": rate,
        "rate_basis": "mean of step_ms" if mean_rate else "agent steps_per_s" if agent_rate else
                      "1/p50" if p50_rate else None,
        "steps_per_s_p50": p50_rate, "steps_per_s_agent": agent_rate, "step_samples": len(samples),
        "samples_per_s": rate * batch if rate else None,
        "data_wait_pct": _num(steps.get("data_wait_pct")),
        "autocast": steps.get("autocast_dtype") if steps.get("autocast_enabled") else None,
        "unique_graphs": steps.get("unique_graphs"),
        "bottleneck": bottleneck if isinstance(bottleneck, dict) else None,
        "profile_status": agent.get("profile_status"),
        "rank_profile": isinstance(profile, dict),
        "summary": report.get("summary"),
        "findings": [summarize_finding(f, kinds) for f in findings],
        "notes": [n for n in report.get("notes", []) if isinstance(n, str)][:12],
        # the profile window's trace was analysed: the verdict and estimates rest on kernel times
        "profile_analysed": any(isinstance(n, str) and " analysed (" in n for n in report.get("notes", [])),
    }


ACTIONABLE = ("warning", "critical")


def expressible(findings: list[dict[str, Any]], fix_args: dict[str, list[str]], done: set[str],
                severities: tuple[str, ...] = ACTIONABLE) -> list[dict[str, Any]]:
    """Findings, in report order, whose fix kind the script has flags for and that is not applied yet.

    One entry per fix kind (the first, i.e. highest-ranked, finding that names it); only findings of
    ``severities`` (an info is gpudoctor saying the fix gains little: not advice to act on).
    """
    seen: set[str] = set()
    out = []
    for f in findings:
        kind = f.get("fix_kind")
        if (kind and kind in fix_args and kind not in done and kind not in seen
                and f.get("severity") in severities):
            seen.add(kind)
            out.append(f)
    return out


def speedup_band(finding: dict[str, Any]) -> tuple[float | None, float | None]:
    impact = finding.get("impact") or {}
    return _num(impact.get("est_speedup_low")), _num(impact.get("est_speedup_high"))


# -- wall-clock rates printed by the scripts themselves (steps/s; None when the script printed none) --

def _steady(values: list[float], skip: int = 1) -> float | None:
    vals = values[skip:] if len(values) > skip else values
    return statistics.median(vals) if vals else None


def wall_rate(kind: str, text: str, batch: int) -> float | None:
    """Steps per second from a script's own progress lines (``kind`` names the script's format)."""
    if kind == "timm_bench":        # "Train [40/200]. 1234.56 samples/sec. 207.3 ms/step."
        v = _steady([float(x) for x in re.findall(r"Train \[\d+/\d+\]\. ([\d.]+) samples/sec", text)], 0)
        return v / batch if v else None
    if kind == "nanogpt":           # "iter 20: loss 10.9, time 151.20ms, mfu 30.1%"
        v = _steady([float(x) for x in re.findall(r"iter \d+: loss [\d.naif]+, time ([\d.]+)ms", text)], 2)
        return 1000.0 / v if v else None
    if kind == "pt_imagenet":       # "Epoch: [0][ 10/5005]\tTime  0.206 ( 0.610)"
        v = _steady([float(x) for x in re.findall(r"Time\s+([\d.]+)\s+\(\s*[\d.]+\)", text)], 2)
        return 1.0 / v if v else None
    if kind == "wlm":               # "| ms/batch 12.34 |"
        v = _steady([float(x) for x in re.findall(r"ms/batch\s+([\d.]+)", text)], 1)
        return 1000.0 / v if v else None
    if kind == "tqdm":              # Lightning's progress bar: "… 3.21it/s" or "1.52s/it"
        rates = [float(x) for x in re.findall(r"([\d.]+)it/s", text)]
        rates += [1.0 / float(x) for x in re.findall(r"([\d.]+)s/it", text) if float(x) > 0]
        return rates[-1] if rates else None
    if kind == "hf_trainer":        # the driver's "step_time_ms=…" lines
        v = _steady([float(x) for x in re.findall(r"step_time_ms=([\d.]+)", text)], 2)
        return 1000.0 / v if v else None
    return None
