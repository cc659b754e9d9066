"""Findings that measure some of the same time say so: the lower one names the upper (``overlaps``).

The case: ``tests/live/epoch_loop.py`` (two workers forked for every epoch of 8 steps) gives GD106 and
GD102 side by side, live; fixing GD106 (persistent workers, measured 1.65×) left GD102 with 1.2 of
its 3.1 ms/step. The two gains do not add, and the list says so on the finding listed lower.
"""

from __future__ import annotations

import time

import pytest
from msgspec.structs import replace

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.finalize import finalize
from gpudoctor.catalog.merge import mark_shared_costs, merge_findings
from gpudoctor.catalog.rulefile import RuleFileError, parse_rule_text
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import ProcessSample, StepStats
from gpudoctor.model import Finding, Location, Source


def _live_findings(starts: int) -> list[Finding]:
    # epoch_loop.py's numbers: 30% data wait in a 6.3 ms step, 88 starts, 4.7 ms/step to start them
    # and the agent's split of the 3.3 ms wait: 1.5 restarts, 0.3 the first batches, 1.5 workers behind
    steps = StepStats(time.time(), 2000, 700, data_wait_pct=29.6, step_time_p50_ms=6.33, steps_per_s=89.0,
                      loader_workers=2, loader_worker_starts=starts, loader_start_ms_per_step=4.72 if starts else 0.0,
                      loader_start_fork_ms_per_step=2.0 if starts else 0.0,
                      data_wait_restart_ms_per_step=1.5 if starts else 0.0, data_wait_first_ms_per_step=0.3,
                      data_wait_steady_ms_per_step=1.5, data_wait_main_ms_per_step=0.0, loader_steady_steps=600,
                      loader_steady_step_ms=10.5, loader_steady_wait_ms=1.6)
    proc = ProcessSample(time.time(), 10, True, cpu_pct=100.0, cpu_affinity=tuple(range(8)))
    factsets = build_factsets(10, [], proc, None, None, steps, 10.0)
    catalog = load_catalog()
    return finalize(evaluate(catalog, factsets, [Source.LIVE]).findings, catalog)


def test_the_lower_of_two_overlapping_findings_names_the_upper() -> None:
    findings = _live_findings(88)
    codes = [f.code for f in findings]
    assert {"GD102", "GD106"} <= set(codes)
    upper, lower = sorted((f for f in findings if f.code in ("GD102", "GD106")), key=lambda f: codes.index(f.code))
    assert upper.impact is not None and upper.impact.shares_cost_with is None
    assert lower.impact is not None and lower.impact.shares_cost_with == upper.code
    assert f"overlaps {upper.code} above" in lower.impact.describe()
    assert lower.to_dict()["impact"]["shares_cost_with"] == upper.code
    # estimates and order are left as they are
    assert [f.code for f in merge_findings(findings)] == codes


def test_no_overlap_without_the_other_finding_or_at_another_place() -> None:
    alone = _live_findings(0)
    assert "GD106" not in {f.code for f in alone}
    assert all(f.impact is None or f.impact.shares_cost_with is None for f in alone)
    both = _live_findings(88)
    apart = [replace(f, location=Location(rank=k), impact=replace(f.impact, shares_cost_with=None)
                     if f.impact is not None else None) for k, f in enumerate(both, start=1)]
    assert all(f.impact is None or f.impact.shares_cost_with is None for f in mark_shared_costs(apart))


def test_every_overlap_names_a_rule_of_the_catalog() -> None:
    rules = load_catalog().rules.values()
    codes = {r.code for r in rules}
    named = {c for r in rules for c in r.overlaps}
    assert {"GD102", "GD203", "GD211", "GD303"} <= named
    assert named <= codes


def _rule_text(extra: str) -> str:
    """A minimal rule file with one more front-matter line."""
    return f'''+++
code = "GD500"
name = "some-problem"
title = "t"
{extra}

[[when]]
id = "trace-idle"
source = "trace"
scope = "rank"
condition = "idle_pct > 1"
message = "m"
+++
'''


@pytest.mark.parametrize("overlaps", ['["GD9"]', '["GD500"]', '"GD102"'])
def test_a_bad_overlaps_entry_is_a_rule_file_error(overlaps: str) -> None:
    text = _rule_text(f"overlaps = {overlaps}")
    with pytest.raises(RuleFileError, match="overlaps"):
        parse_rule_text(text)


@pytest.mark.parametrize(("value", "ok"), [('["live", "trace"]', True), ('["agent"]', False), ('"live"', False)])
def test_estimate_from_names_sources(value: str, ok: bool) -> None:
    text = _rule_text(f"estimate_from = {value}")
    if ok:
        assert parse_rule_text(text).estimate_from == (Source.LIVE, Source.TRACE)
    else:
        with pytest.raises(RuleFileError, match="estimate_from"):
            parse_rule_text(text)
