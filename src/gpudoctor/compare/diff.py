"""The comparison itself: step-time change with its noise, findings gone and new, and a verdict.

Why this exists: "users trust a doctor whose advice is shown to work" — after applying a fix, the
user (or CI) needs one answer: faster, slower, or no change beyond the noise, and which of the
diagnosed problems went away.

What it must not do: format output (the report renderers do), or call a change real when the
noise estimate says it may not be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.compare.inputs import FindingKey, Side
from gpudoctor.compare.stats import ChangeEstimate, estimate_change
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.numbers import speedup
from gpudoctor.report.model import MetricTable, Report

IMPROVED = "improved"
REGRESSED = "regressed"
NO_CHANGE = "no significant change"
#: A change counts as real when the Mann–Whitney p-value is below this and the CI excludes zero.
ALPHA = 0.05


@dataclass
class Comparison:
    """Everything ``compare`` concluded (the JSON ``compare`` section is this, flattened)."""

    before: Side
    after: Side
    threshold_pct: float
    estimate: ChangeEstimate
    verdict: str
    reason: str
    gone: list[FindingKey] = field(default_factory=list)
    new: list[FindingKey] = field(default_factory=list)
    kept: list[FindingKey] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """Before/after median step time: 2.0 means twice as fast."""
        e = self.estimate
        return e.before_median / e.after_median if e.after_median > 0 else math.nan

    @property
    def exit_code(self) -> int:
        return int(ExitCode.FINDINGS if self.verdict == REGRESSED else ExitCode.OK)


def _identity(key: FindingKey) -> tuple[str, str]:
    return (key.code, key.where)


def _diff_findings(before: list[FindingKey], after: list[FindingKey]
                   ) -> tuple[list[FindingKey], list[FindingKey], list[FindingKey]]:
    after_ids = {_identity(k) for k in after}
    before_ids = {_identity(k) for k in before}
    gone = [k for k in before if _identity(k) not in after_ids]
    new = [k for k in after if _identity(k) not in before_ids]
    kept = [k for k in after if _identity(k) in before_ids]
    return gone, new, kept


def _verdict(est: ChangeEstimate, threshold_pct: float) -> tuple[str, str]:
    change = est.change_pct
    size = change_text(change)
    if est.p_value is None:
        noise = "too few step samples for a noise estimate (need 3 per side), judged on the medians alone"
        significant = True
    else:
        ci_excludes_zero = est.ci_low_pct is not None and est.ci_high_pct is not None and (
            est.ci_low_pct > 0 or est.ci_high_pct < 0)
        significant = est.p_value < ALPHA and ci_excludes_zero
        noise = (f"95% CI of the time change {est.ci_low_pct:+.1f}% … {est.ci_high_pct:+.1f}%, "
                 f"Mann–Whitney p={est.p_value:.3g}")
    if abs(change) <= threshold_pct:
        return NO_CHANGE, f"{size}, within the ±{threshold_pct:g}% threshold ({noise})."
    if not significant:
        return NO_CHANGE, f"{size}, but not distinguishable from noise ({noise})."
    if change > 0:
        return REGRESSED, f"{size}: a regression beyond the {threshold_pct:g}% threshold ({noise})."
    return IMPROVED, f"{size} ({noise})."


def change_text(change_pct: float) -> str:
    """A step-time change as a person reads it, in × and in % of time, one base for both: a 2.00×
    speed-up is "2.00× faster: the median step takes 50.0% less time" (it read "50.1% faster")."""
    if change_pct <= -100.0:
        return "the median step takes no time after"
    ratio = 100.0 / (100.0 + change_pct)   # before / after
    if abs(change_pct) < 0.05:
        return "1.00×: the median step takes the same time"
    if change_pct > 0:
        return f"{1.0 / ratio:.2f}× slower: the median step takes {change_pct:.1f}% more time"
    return f"{ratio:.2f}× faster: the median step takes {-change_pct:.1f}% less time"


def compare_sides(before: Side, after: Side, threshold_pct: float = 5.0) -> Comparison:
    """Compare two sides; a side without step times is a user error (nothing to measure)."""
    for side in (before, after):
        if not side.step_ms:
            raise UserError(f"{side.label} has no step times to compare (a recording needs a 'steps' "
                            f"section; traces need ProfilerStep spans).", ExitCode.USAGE)
    est = estimate_change(before.step_ms, after.step_ms)
    verdict, reason = _verdict(est, threshold_pct)
    gone, new, kept = _diff_findings(before.findings, after.findings)
    return Comparison(before, after, threshold_pct, est, verdict, reason, gone, new, kept)


def _side_row(name: str, side: Side, median_ms: float) -> dict[str, Any]:
    steps_per_s = 1000.0 / median_ms if median_ms > 0 else None
    samples_per_s = steps_per_s * side.samples_per_step if steps_per_s and side.samples_per_step else None
    return {"run": name, "input": side.label, "steps": len(side.step_ms), "ranks": len(side.per_rank_step_ms),
            "median_step_ms": round(median_ms, 3), "steps_per_s": steps_per_s, "samples_per_s": samples_per_s,
            "findings": len(side.findings)}


def to_dict(c: Comparison) -> dict[str, Any]:
    """The machine-readable ``compare`` section of the JSON output."""
    e = c.estimate

    def keys(items: list[FindingKey]) -> list[dict[str, Any]]:
        return [{"code": k.code, "name": k.name, "where": k.where, "severity": k.severity,
                 "est_speedup_low": k.est_speedup_low, "est_speedup_high": k.est_speedup_high} for k in items]

    return {
        "verdict": c.verdict,
        "reason": c.reason,
        "threshold_pct": c.threshold_pct,
        "step_time_change_pct": e.change_pct,
        "ci95_change_pct": [e.ci_low_pct, e.ci_high_pct] if e.ci_low_pct is not None else None,
        "mann_whitney_p": e.p_value,
        "speedup": c.speedup,
        "before": _side_row("before", c.before, e.before_median),
        "after": _side_row("after", c.after, e.after_median),
        "findings_gone": keys(c.gone),
        "findings_new": keys(c.new),
        "findings_kept": keys(c.kept),
        "predicted_vs_measured": predicted_vs_measured(c),
    }


def _predicted(k: FindingKey) -> str:
    if k.est_speedup_low is None or k.est_speedup_high is None:
        return "–"
    return speedup(k.est_speedup_low, k.est_speedup_high)


def predicted_vs_measured(c: Comparison) -> dict[str, Any] | None:
    """The estimate of the fixed finding(s) on the before side beside the measured speedup.

    When the findings that went away carried estimates, the fix was theirs: the largest estimate is
    compared with what was measured (several fixed at once gain at most the largest estimate's
    product; the largest alone is the floor of what was predicted)."""
    fixed = [k for k in c.gone if k.est_speedup_low is not None and k.est_speedup_high is not None]
    if not fixed:
        return None
    top = max(fixed, key=lambda k: k.gain)
    assert top.est_speedup_low is not None and top.est_speedup_high is not None
    measured = c.speedup
    inside = top.est_speedup_low <= measured <= top.est_speedup_high
    return {"code": top.code, "est_speedup_low": top.est_speedup_low, "est_speedup_high": top.est_speedup_high,
            "measured_speedup": round(measured, 3), "within_estimate": inside,
            "error_pct_of_gain": round(100.0 * (top.gain - measured) / (measured - 1.0), 1)
            if abs(measured - 1.0) > 1e-6 else None}


def to_report(c: Comparison) -> Report:
    """A :class:`Report` for the shared renderers: verdict and step-time tables, findings by status."""
    e = c.estimate
    verdict_table = MetricTable(
        title="Step-time change", key="verdict",
        columns=["metric", "value"],
        rows=[{"metric": "speed-up (before/after median)", "value": f"{c.speedup:.3f}×"},
              {"metric": "step time change", "value": f"{e.change_pct:+.1f}% time"},
              {"metric": "95% CI of the time change", "value": "–" if e.ci_low_pct is None
               else f"{e.ci_low_pct:+.1f}% … {e.ci_high_pct:+.1f}%"},
              {"metric": "Mann–Whitney p", "value": "–" if e.p_value is None else f"{e.p_value:.3g}"},
              {"metric": "threshold", "value": f"±{c.threshold_pct:g}%"}])
    step_table = MetricTable(title="Step time", key="step_time",
                             columns=["run", "steps", "ranks", "median_step_ms", "steps_per_s", "samples_per_s",
                                      "findings"],
                             rows=[_side_row("before", c.before, e.before_median),
                                   _side_row("after", c.after, e.after_median)])
    rows = ([{"status": "gone", "code": k.code, "name": k.name, "where": k.where, "predicted": _predicted(k)}
             for k in c.gone]
            + [{"status": "new", "code": k.code, "name": k.name, "where": k.where, "predicted": _predicted(k)}
               for k in c.new]
            + [{"status": "still there", "code": k.code, "name": k.name, "where": k.where, "predicted": _predicted(k)}
               for k in c.kept])
    tables = [verdict_table, step_table]
    if rows:
        tables.append(MetricTable(title="Findings before → after (largest estimated gain first)", key="findings_diff",
                                  columns=["status", "code", "name", "where", "predicted"], rows=rows))
    notes = [f"verdict: {c.verdict} — {c.reason}", *c.before.notes, *c.after.notes]
    check = predicted_vs_measured(c)
    if check is not None:
        notes.append(f"{check['code']} was estimated at {speedup(check['est_speedup_low'], check['est_speedup_high'])}; "
                     f"measured {check['measured_speedup']:.2f}×"
                     + (" (inside the estimate)." if check["within_estimate"] else " (outside the estimate)."))
    if c.new:
        notes.append(f"{len(c.new)} finding(s) appeared after the change: "
                     + ", ".join(sorted({k.code for k in c.new})) + ".")
    if c.gone:
        notes.append(f"{len(c.gone)} finding(s) went away: " + ", ".join(sorted({k.code for k in c.gone})) + ".")
    headline = f"Verdict: {c.verdict} — {c.reason}"
    return Report(command="compare", inputs=[c.before.label, c.after.label], tables=tables, notes=notes[1:],
                  data={"compare": to_dict(c)}, headline=headline)
