"""A live finding that could not say what it costs is withdrawn once a profile window judged its rule clean.

The case: accelerate's cv_example on the H200 (tests/data/gpu_runs/h200-accelerate-cv/). The agent read
``torch.backends.cuda.matmul.allow_tf32 == False`` and GD202 said, live and without an estimate, that
fp32 matmuls use CUDA cores — "how much GPU time they take needs a profile window". The window
measured it: the convolutions already ran in TF32 (cuDNN's own flag), GD202's trace block did not fire,
and the list kept the live suspicion anyway.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.merge import judged_clear, withdraw_cleared
from gpudoctor.catalog.rulefile import RuleFileError, parse_rule_text
from gpudoctor.model import Finding, Impact, Severity, Source
from gpudoctor.pipeline import analyze_paths

CATALOG = load_catalog()
WINDOW = Path(__file__).resolve().parents[1] / "data" / "trace" / "h200_accelerate_cv_as_is.json.gz"


def _live(code: str, impact: Impact | None = None) -> Finding:
    rule = CATALOG.get(code)
    assert rule is not None
    return Finding(code=code, name=rule.name, severity=Severity.INFO, title=rule.title, message="m",
                   source=Source.LIVE, evidence=(), fix=rule.fix, impact=impact, cleared_by=rule.cleared_by)


def test_the_cv_example_window_judges_gd202_clean_and_gd102_not() -> None:
    report = analyze_paths([str(WINDOW)])
    cleared = judged_clear(CATALOG, Source.TRACE, report.findings, report.not_evaluated)
    assert "GD202" in cleared
    assert "GD102" not in cleared and "GD302" not in cleared          # they fired
    assert not cleared & {n.code for n in report.not_evaluated}      # not judged is not clean


def test_only_an_unestimated_finding_of_a_rule_that_names_the_source_is_withdrawn() -> None:
    cleared = {Source.TRACE: frozenset({"GD202", "GD101"})}
    gd202 = _live("GD202")
    assert withdraw_cleared([gd202], cleared) == []
    assert withdraw_cleared([gd202], {Source.TRACE: frozenset()}) == [gd202]      # not judged clean
    estimated = replace(gd202, impact=Impact(2.0, 5.0, 1.02, 1.05, "b", "gpu"))
    assert withdraw_cleared([estimated], cleared) == [estimated]                  # an estimate stays
    gd101 = _live("GD101")                     # NVML's long reading beats a 5-step window: no cleared_by
    assert not gd101.cleared_by and withdraw_cleared([gd101], cleared) == [gd101]


@pytest.mark.parametrize(("value", "ok"), [('["trace"]', True), ('["window"]', False)])
def test_cleared_by_names_sources(value: str, ok: bool) -> None:
    text = f'''+++
code = "GD500"
name = "some-problem"
title = "t"
cleared_by = {value}

[[when]]
id = "live-cuda"
source = "live"
scope = "job"
condition = "cuda_in_use"
message = "m"
+++
'''
    if ok:
        assert parse_rule_text(text).cleared_by == (Source.TRACE,)
    else:
        with pytest.raises(RuleFileError, match="cleared_by"):
            parse_rule_text(text)
