"""The engine: severity blocks, evidence, not-evaluated, options and user rule directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.catalog import evaluate, load_catalog
from gpudoctor.catalog.rulefile import RuleFileError
from gpudoctor.model import FactSet, Location, Severity, Source

USER_RULE = '''+++
code = "GD990"
name = "too-many-kernels"
title = "Too many kernels"
severity = "info"
[options]
max_kernels = 3
[[when]]
id = "trace-kernels"
source = "trace"
scope = "rank"
condition = "kernels_per_step > max_kernels"
message = "{kernels_per_step} kernels per step (max {max_kernels})"
+++
## What it detects
Kernels.
'''


def _rank(rank: int, **values: object) -> FactSet:
    return FactSet("rank", Source.TRACE, values, Location(rank=rank))


def test_first_matching_block_sets_severity_and_evidence() -> None:
    catalog = load_catalog().select(["GD101"])
    result = evaluate(catalog, [_rank(0, idle_pct=75.0, compute_pct=20.0, has_steps=False)], [Source.TRACE])
    (finding,) = result.findings
    assert finding.severity is Severity.CRITICAL
    assert finding.location.rank == 0
    names = {e.name: e for e in finding.evidence}
    assert names["idle_pct"].value == 75.0 and not names["idle_pct"].is_threshold
    assert names["critical_idle_pct"].is_threshold
    assert "75%" in finding.message   # a whole number prints without decimals (gpudoctor.numbers.formatted)


def test_healthy_rank_gives_no_finding() -> None:
    result = evaluate(load_catalog().select(["GD101"]), [_rank(0, idle_pct=3.0)], [Source.TRACE])
    assert result.findings == [] and result.not_evaluated == []


def test_missing_evidence_is_reported_not_passed() -> None:
    result = evaluate(load_catalog().select(["GD101"]), [_rank(0, compute_pct=50.0)], [Source.TRACE])
    assert result.findings == []
    (ne,) = result.not_evaluated
    assert ne.code == "GD101" and "idle_pct" in ne.needs


def test_option_override_by_code_or_name() -> None:
    facts = [_rank(0, idle_pct=40.0, has_steps=False)]
    catalog = load_catalog().select(["GD101"])
    assert evaluate(catalog, facts, [Source.TRACE]).findings
    assert not evaluate(catalog, facts, [Source.TRACE], {"GD101": {"max_idle_pct": 45}}).findings
    assert not evaluate(catalog, facts, [Source.TRACE], {"low-gpu-utilization": {"max_idle_pct": 45}}).findings


def test_user_rule_directory_adds_rules(tmp_path: Path) -> None:
    (tmp_path / "GD990-too-many-kernels.md").write_text(USER_RULE)
    catalog = load_catalog([tmp_path]).select(["GD990"])
    result = evaluate(catalog, [_rank(1, kernels_per_step=5)], [Source.TRACE])
    assert [f.message for f in result.findings] == ["5 kernels per step (max 3)"]


def test_user_rule_reading_an_unknown_fact_is_refused_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "GD990-too-many-widgets.md").write_text(USER_RULE.replace("kernels_per_step", "widgets_per_step"))
    with pytest.raises(RuleFileError, match=r"GD990-too-many-widgets.md: GD990 reads widgets_per_step, which no "
                                            r"trace producer emits for scope 'rank'"):
        load_catalog([tmp_path])


def test_broken_user_rule_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "GD991-broken.md").write_text("no front matter")
    with pytest.raises(RuleFileError, match="GD991-broken.md"):
        load_catalog([tmp_path])


def test_select_and_ignore_by_prefix() -> None:
    catalog = load_catalog()
    assert all(r.code.startswith("GD1") for r in catalog.select(["GD1"], always=()))
    assert {r.code for r in catalog.select(["GD1"]) if not r.code.startswith("GD1")} == {"GD899"}  # always kept
    assert "GD899" not in catalog.select(["GD1"], ["GD899"]).rules  # ... unless ignored
    assert "GD101" not in catalog.select([], ["GD101"]).rules
