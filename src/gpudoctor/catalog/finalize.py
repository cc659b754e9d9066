"""The one step between judged findings and a report: cross-finding policy, in a fixed order.

Rules are judged one by one (:mod:`gpudoctor.catalog.engine`); what one finding does to another is
declared in the rule files' front matter and applied here, once, by ``analyze``, ``check`` and the
live session alike:

1. **withdraw cleared** — a finding without an estimate whose rule names, in ``cleared_by``, a source
   that judged the rule and found nothing (a profile window's trace) is left out;
2. **input gate** — a rule's ``[gate]`` (GD102): while its live fact stays at or above its option and
   its finding stands, findings of the side it holds back step back (:func:`apply_gates`);
3. **merge and shared costs** — one finding per rule and place, the lower of two overlapping findings
   saying that its gain is not in addition (:func:`gpudoctor.catalog.merge.merge_findings`);
4. **defer symptoms** — symptom rules are info beside the step's verdict.

What it must not do: evaluate rules or change evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from msgspec.structs import replace

from gpudoctor.catalog.merge import defer_symptoms, merge_findings, withdraw_cleared
from gpudoctor.catalog.rulefile import Gate, Rule
from gpudoctor.model import Finding, Severity, Source


def finalize(findings: Iterable[Finding], rules: Iterable[Rule], *,
             options: Mapping[str, Mapping[str, Any]] | None = None,
             cleared: Mapping[Source, frozenset[str]] | None = None,
             live: Mapping[str, Any] | None = None,
             verdict_line: str | None = None) -> list[Finding]:
    """Apply the cross-finding policy to judged ``findings``; the result is in report order.

    Args:
        findings: Every source's findings, as judged (merging them is this step's job).
        rules: The catalog (its ``[gate]`` declarations).
        options: Resolved rule options by code (:func:`gpudoctor.catalog.options.resolve_options`);
            a gate compares its fact with its rule's option from here.
        cleared: By source, the codes of rules that source judged and found nothing for.
        live: The live job's facts (a gate's fact); None outside a live session.
        verdict_line: The step's verdict, when the report has one.
    """
    out = withdraw_cleared(findings, cleared or {})
    if live:
        out = apply_gates(out, rules, options or {}, live)
    return defer_symptoms(merge_findings(out), verdict_line)


def apply_gates(findings: list[Finding], rules: Iterable[Rule], options: Mapping[str, Mapping[str, Any]],
                live: Mapping[str, Any]) -> list[Finding]:
    """Each rule's ``[gate]`` over ``findings`` (see :func:`hold_back`)."""
    out = list(findings)
    for rule in rules:
        if rule.gate is None:
            continue
        value = live.get(rule.gate.fact)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        threshold = {**rule.options, **(options.get(rule.code) or {})}[rule.gate.above]
        out = hold_back(out, rule.code, rule.gate, float(value), float(threshold))
    return out


def hold_back(findings: list[Finding], code: str, gate: Gate, value: float, threshold: float) -> list[Finding]:
    """Findings whose fix shortens the gated side do not warn while the gating rule's cause stands.

    A profile window of a few steps can catch steps whose batches happened to be ready (a bursty
    loader), so its GPU-side estimates ignore the wait the agent measures over many steps. While that
    wait is at least the gating rule's threshold, a faster GPU only makes the GPU wait longer: such
    findings become info, and their basis says why; the gating finding comes first.

    Only while the gating finding (GD102) is shown: a wait that the live rules did not (yet) hold as a
    finding leaves the other findings as they are, so the list never says "after the input fix" about a
    fix it does not name (pytorch/examples ImageNet on the H200). When the gating rule says its fix gains
    nothing — below ``gate.no_gain_below``: the workers already use what the CPUs allow — the step
    stays at the input's pace whatever the GPU does, and the held-back estimates become 1.0×
    (accelerate's cv_example on the H200 after GD102's own fix, 14 workers, 32% data wait: GD403 warned
    at 1.10–1.15× and GD201 said 1.03–1.04×; inductor measured 0.94× and bf16 0.92×).
    """
    out = list(findings)
    if value < threshold:
        return out
    gating = [f for f in out if f.code == code]
    if not gating:
        return out
    side = gate.holds_back
    if any(f.severity is not Severity.INFO for f in gating):
        note = (f"; while the loop waits for data {value:.0f}% of each step (agent), this gain "
                f"comes only after the input fix ({code})")
        for i, f in enumerate(out):
            if f.impact is not None and f.impact.side == side and f.severity is not Severity.INFO:
                out[i] = replace(f, severity=Severity.INFO,
                                 impact=replace(f.impact, basis=f.impact.basis + note, after=code))
        return out
    if any(f.impact is None or f.impact.est_speedup_high >= gate.no_gain_below for f in gating):
        return out  # a fix that gains something, shown as info: the other estimates stand
    note = (f"; but the loop waits for data {value:.0f}% of each step (agent) and more workers will "
            f"not hide it ({code}): the step stays at the input's pace, a faster GPU only waits longer")
    for i, f in enumerate(out):
        if f.impact is not None and f.impact.side == side:
            out[i] = replace(f, severity=Severity.INFO,
                             impact=replace(f.impact, est_speedup_low=1.0, est_speedup_high=1.0,
                                            basis=f.impact.basis + note))
    return out
