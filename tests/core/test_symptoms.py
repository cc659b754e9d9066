"""A symptom rule (GD101: the GPU idles) is info beside the step's verdict, which names what bounds the step.

On the H200 GD101 warned — critical above 60% idle — with no estimate on steps no rule could shorten:
the small models of examples/input_bound.py and host_sync.py after their fixes, and of memory_creep.py
(tests/data/gpu_runs/h200-validate-examples-dec4-night). Without a verdict it keeps its severity.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from gpudoctor.catalog.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.merge import defer_symptoms
from gpudoctor.catalog.rulefile import parse_rule_text
from gpudoctor.model import FactSet, Location, Severity, Source
from gpudoctor.pipeline import analyze_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def _gd101(idle_pct: float) -> list:
    facts = FactSet(source=Source.TRACE, scope="rank", location=Location(rank=0),
                    values={"idle_pct": idle_pct, "has_steps": False, "compute_pct": 100 - idle_pct,
                            "non_compute_pct": 0.0, "rank": 0})
    return evaluate(load_catalog().select(["GD101"]), [facts], [Source.TRACE]).findings


def test_a_symptom_is_info_beside_a_verdict_and_keeps_its_severity_without_one() -> None:
    (critical,) = _gd101(75.0)
    assert critical.severity is Severity.CRITICAL and critical.symptom
    (kept,) = defer_symptoms([critical], None)
    assert kept.severity is Severity.CRITICAL
    (deferred,) = defer_symptoms([critical], "Host overhead bounds the step on rank 0: the GPU idles 74%")
    assert deferred.severity is Severity.INFO
    assert deferred.impact_note.endswith("info beside the step's verdict: Host overhead bounds the step on rank 0: "
                                         "the GPU idles 74%")


def test_only_symptom_rules_are_deferred() -> None:
    (finding,) = _gd101(75.0)
    cause = replace(finding, code="GD303", symptom=False)
    assert defer_symptoms([cause], "a verdict")[0].severity is Severity.CRITICAL


def test_a_trace_with_steps_shows_gd101_as_info_after_its_verdict() -> None:
    """accelerate's cv_example after its input fix (H200): GD101 was critical, 83% idle, no estimate."""
    report = analyze_paths([str(DATA / "h200_accelerate_cv_gd102.json.gz")])
    assert report.bottleneck is not None
    (gd101,) = [f for f in report.findings if f.code == "GD101"]
    assert gd101.severity is Severity.INFO and report.bottleneck.line in gd101.impact_note
    assert all(f.severity is Severity.INFO for f in report.findings[report.findings.index(gd101):])
    assert any(f.severity is not Severity.INFO for f in report.findings)  # GD403 ranks above it


def test_symptom_must_be_a_boolean() -> None:
    text = (Path(__file__).resolve().parents[2] / "rules" / "GD101-low-gpu-utilization.md").read_text()
    with pytest.raises(ValueError, match="symptom must be true or false"):
        parse_rule_text(text.replace("symptom = true", 'symptom = "yes"'), "GD101.md")
