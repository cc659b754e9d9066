"""One finding per rule and place: live, trace and static evidence that agree become one finding.

Why this exists: a job watched live with a profile window has the same problem seen twice — GD201
from GPM tensor-core activity and GD201 from the trace's fp32 kernels — and a report that lists both,
with different severities, makes the user wonder which to believe. Here findings of one rule at one
place are merged: the one with the strongest evidence is kept (an estimate beats none; then the
source the rule's ``estimate_from`` trusts first; then the higher severity; a trace estimate, measured
from kernels, beats a live one) and the others' sources are listed beside it.

A place is a file position for static findings, a rank for a multi-rank job, and "the job" otherwise
(a live job fact set and the rank-0 trace of the same single process are one place).

What it must not do: evaluate rules or change evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from msgspec.structs import replace

from gpudoctor.model import Finding, Severity, Source, sort_findings

#: Which source's estimate is trusted most when several agree.
_SOURCE_TRUST = {Source.TRACE: 3, Source.LIVE: 2, Source.ENV: 1, Source.STATIC: 0}


def place_of(finding: Finding) -> tuple[str, object]:
    """The place a finding is about, for merging."""
    loc = finding.location
    if loc.path is not None:
        return ("file", (loc.path, loc.line, loc.col))
    if loc.rank not in (None, 0):
        return ("rank", loc.rank)
    if loc.gpu not in (None, 0) and loc.rank is None:
        return ("gpu", loc.gpu)
    return ("job", None)


def _strength(finding: Finding) -> tuple[int, int, int, int, float]:
    # a rule may say whose estimate to believe first (GD102: the agent's wait over hundreds of steps,
    # not a 5-step profile window that caught the steps whose batches were ready)
    preferred = (len(finding.estimate_from) - finding.estimate_from.index(finding.source)
                 if finding.impact is not None and finding.source in finding.estimate_from else 0)
    return (int(finding.impact is not None), preferred, finding.severity.rank, _SOURCE_TRUST[finding.source],
            finding.gain)


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Merge findings of the same rule at the same place; the result is sorted by estimated gain."""
    groups: dict[tuple[str, tuple[str, object]], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.code, place_of(finding)), []).append(finding)
    merged: list[Finding] = []
    for group in groups.values():
        if len(group) == 1:
            merged.append(group[0])
            continue
        best = max(group, key=_strength)
        others = [s for f in group for s in f.sources if s != best.source]
        also = tuple(dict.fromkeys([*best.also_sources, *others]))
        merged.append(replace(best, also_sources=also) if also != best.also_sources else best)
    return mark_shared_costs(sort_findings(merged))


def mark_shared_costs(findings: list[Finding]) -> list[Finding]:
    """Each estimated finding whose cost overlaps that of one listed above it, at the same place, says so.

    Two rules can measure the same time: DataLoader workers forked every epoch (GD106) make the loop
    wait for its first batches, which is input wait (GD102); an eager model's layout transforms are
    both GD203's cost and part of GD403's. Acting on the list in order, the user fixes the first one
    and the second's gain shrinks or vanishes (``tests/live/epoch_loop.py``: GD106 est. 1.22–1.67×
    and GD102 1.24–1.38×; persistent workers measured 1.65×, and GD102 stayed at 1.14–1.22× with
    1.2 of its 3.1 ms). The relation comes from the rule files' ``overlaps`` (either side may name
    the other); the lower finding's impact names the upper one (``shares_cost_with``). Order,
    severity and estimates are left as they are.
    """
    out = list(findings)
    for i, lower in enumerate(out):
        if lower.impact is None or lower.impact.shares_cost_with is not None:
            continue
        place = place_of(lower)
        for upper in out[:i]:
            if (upper.code in lower.overlaps or lower.code in upper.overlaps) and place_of(upper) == place:
                out[i] = replace(lower, impact=replace(lower.impact, shares_cost_with=upper.code))
                break
    return out


def judged_clear(catalog: Iterable[Any], source: Source, findings: Iterable[Finding],
                 not_evaluated: Iterable[Any]) -> frozenset[str]:
    """Codes of the rules that ``source`` judged and found nothing: rules with a block for it, neither
    among its findings nor among what it could not evaluate (a profile window's analysis)."""
    fired = {f.code for f in findings if f.source is source}
    undecided = {n.code for n in not_evaluated if n.source is source}
    return frozenset(r.code for r in catalog if source in r.sources) - fired - undecided


def withdraw_cleared(findings: Iterable[Finding], cleared: Mapping[Source, frozenset[str]]) -> list[Finding]:
    """Findings without an estimate whose rule names, in ``cleared_by``, a source that judged it and
    found nothing (GD202 live: "TF32 is off for matmuls … how much GPU time they take needs a profile
    window"; the window measured it below the rule's threshold on accelerate's cv_example, whose
    convolutions already ran in TF32) are left out."""
    return [f for f in findings
            if f.impact is not None or not any(f.code in cleared.get(s, frozenset()) for s in f.cleared_by)]


def defer_symptoms(findings: Iterable[Finding], verdict_line: str | None) -> list[Finding]:
    """Findings of symptom rules (``symptom = true``: GD101, the GPU idles) are info where the report
    has the step's verdict, which says the same thing and names what bounds the step.

    A symptom has no fix of its own: its causes (input, syncs, launches, gaps …) carry the estimates.
    Rated by its threshold alone it warned — critical at 60% idle — on steps no rule could shorten:
    the small models of examples/input_bound.py and host_sync.py after their fixes, and of
    memory_creep.py, where the host sets the pace (H200, tests/data/gpu_runs/h200-validate-examples-dec4-night),
    and accelerate's cv_example after its input fix. Without a verdict (a trace without
    ``ProfilerStep``, NVML alone) the symptom is all there is, and it keeps its severity. Returns the
    findings in report order (:func:`gpudoctor.model.sort_findings`).
    """
    out = list(findings)
    if verdict_line:
        for i, f in enumerate(out):
            if f.symptom and f.severity is not Severity.INFO:
                note = (f"{f.impact_note}; " if f.impact_note else "") + f"info beside the step's verdict: {verdict_line}"
                out[i] = replace(f, severity=Severity.INFO, impact_note=note)
    return sort_findings(out)  # a severity changed: re-ordered, as every report lists them
