"""The closing table and summary of ``realscripts_validation.py``: runs, fixes, predicted vs measured.

Why this exists: the lead pastes this table into docs/validation.md and the issue's closing note, so
its shape is kept in one place, apart from the measurement sequence. ``h`` is the harness (its
``runs``, ``stages`` and ``alternatives`` lists of plain dicts).
"""

from __future__ import annotations

import statistics
from typing import Any


def ratio(a: Any, b: Any) -> float | None:
    return round(a / b, 3) if isinstance(a, int | float) and isinstance(b, int | float) and b > 0 else None


def fmt(v: Any, nd: int = 2) -> str:
    return f"{v:.{nd}f}" if isinstance(v, int | float) else "-"


def bound_label(rec: dict[str, Any]) -> str:
    b = rec.get("bottleneck") or {}
    return f"{b.get('bound')} {fmt(b.get('share_pct'), 0)}%" if b.get("bound") else "-"


def finding_label(f: dict[str, Any]) -> str:
    imp = f.get("impact") or {}
    est = f" {fmt(imp.get('est_speedup_low'))}–{fmt(imp.get('est_speedup_high'))}x" if imp else ""
    return f"{f.get('code')}:{f.get('severity')}{est}"


def table(h: Any) -> str:
    lines = ["| scenario | variant | bound | findings (top 3, sev, est) | warn+ | steps/s agent | samples/s | "
             "steps/s wall |", "|---|---|---|---|---|---|---|---|"]
    for r in h.runs:
        fs = r.get("findings") or []
        warn = sum(1 for f in fs if f.get("severity") in ("warning", "critical"))
        lines.append(f"| {r['scenario']} | {r['variant']} | {bound_label(r)} | "
                     f"{', '.join(finding_label(f) for f in fs[:3]) or '-'} | {warn} | {fmt(r.get('steps_per_s'))} | "
                     f"{fmt(r.get('samples_per_s'), 0)} | {fmt(r.get('wall_steps_per_s'))} |")
    lines += ["", "| scenario | stage | fix (rule, sev) | predicted | measured (wall) | in band | cumulative | "
              "top fastest? |", "|---|---|---|---|---|---|---|---|"]
    for s in h.stages:
        fastest = {True: "yes", False: f"no ({s.get('fastest_fix')})", None: "-"}[s.get("top_was_fastest")]
        lines.append(f"| {s['scenario']} | {s['stage']} | {'forced ' if s['forced'] else ''}{s['fix_kind']} "
                     f"({s['code']}, {s['severity']}) | {fmt(s['est_low'])}–{fmt(s['est_high'])}x | "
                     f"{fmt(s['measured_speedup'])}x ({fmt(s['wall_speedup'])}x) | "
                     f"{ {True: 'yes', False: 'no', None: '-'}[s['in_band']] } | {fmt(s['cumulative_vs_base'])}x | "
                     f"{fastest} |")
    for a in h.alternatives:
        lines.append(f"| {a['scenario']} | {a['stage']} alt | {a['fix_kind']} ({a['code']}) | "
                     f"{fmt(a['est_low'])}–{fmt(a['est_high'])}x | {fmt(a['measured_speedup'])}x | | | |")
    return "\n".join(lines)


def summary(h: Any) -> dict[str, Any]:
    real = [s for s in h.stages if not s["forced"]]
    errs = [s["rel_error_of_gain"] for s in real if s["rel_error_of_gain"] is not None]
    def overall(name: str) -> float | None:
        stages = [s for s in real if s["scenario"] == name]
        return stages[-1]["cumulative_vs_base"] if stages else None

    return {"fixes_applied": len(real), "forced_fixes": len(h.stages) - len(real),
            "median_rel_error_of_gain": round(statistics.median(errs), 3) if errs else None,
            "within_25pct_of_gain": sum(1 for e in errs if e <= 0.25), "with_estimate": len(errs),
            "in_band": sum(1 for s in real if s["in_band"]),
            "top_was_fastest": [s["top_was_fastest"] for s in real if s.get("top_was_fastest") is not None],
            "classic_overall_speedup": overall("timm_resnet50"),
            "classic_overall_speedup_plain_loop": overall("torchvision_resnet50")}
