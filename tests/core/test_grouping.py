"""The terminal and Markdown views fold a rule's per-rank findings into one card (the JSON keeps all)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from gpudoctor.model import Finding, Fix, Impact, Location, Severity, Source
from gpudoctor.report.grouping import group_findings, rank_ranges, split_no_gain

HTA_RANKS = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "public" / "hta" / "trace_filter"


def _finding(code: str, rank: int | None, gain: float | None, severity: Severity = Severity.WARNING,
             **where: object) -> Finding:
    impact = None if gain is None else Impact(cost_ms_per_step=1.0, cost_pct_of_step=10.0, est_speedup_low=gain,
                                              est_speedup_high=gain, basis="b", side="gpu")
    return Finding(code, "name", severity, "title", f"msg {rank}", Source.TRACE, (), Fix("fix"),
                   Location(rank=rank, **where), impact=impact)  # type: ignore[arg-type]


def test_rank_ranges() -> None:
    assert rank_ranges([0, 1, 2, 3, 5, 7, 8]) == "0–3, 5, 7–8"
    assert rank_ranges([4]) == "4" and rank_ranges([]) == ""


def test_same_rule_on_several_ranks_is_one_group_in_first_place() -> None:
    found = [_finding("GD601", 7, 1.6, Severity.CRITICAL), _finding("GD403", 2, 1.30), _finding("GD403", 0, 1.28),
             _finding("GD403", 1, 1.28), _finding("GD210", 0, None, Severity.INFO), _finding("GD210", 1, None, Severity.INFO)]
    groups = group_findings(found)
    assert [(g.lead.code, g.ranks) for g in groups] == [("GD601", [7]), ("GD403", [0, 1, 2]), ("GD210", [0, 1])]
    assert groups[0].where() == "rank 7" and groups[0].spread() == ""
    assert groups[1].where() == "ranks 0–2 (3)"
    assert groups[1].spread() == "the same on 3 ranks (est. 1.28–1.30× per rank); shown: rank 2, the largest"
    assert groups[2].spread() == "the same on 2 ranks; shown: rank 0"


def test_other_places_stay_apart() -> None:
    found = [_finding("GD301", 0, 1.2, gpu=0), _finding("GD301", 1, 1.2, gpu=1),
             _finding("GD211", None, None, path="train.py", line=5), _finding("GD211", None, None, path="train.py", line=7)]
    assert len(group_findings(found)) == 4


def test_one_rule_at_two_severities_is_one_card_at_the_highest() -> None:
    """GD204 at warning on rank 1 and info on rank 0 with the same text was two cards: one card names both."""
    found = [_finding("GD204", 0, None, Severity.INFO), _finding("GD403", 0, 1.6, Severity.CRITICAL),
             _finding("GD204", 1, None, Severity.WARNING), _finding("GD403", 1, 1.3)]
    groups = group_findings(found)
    assert [(g.lead.code, g.lead.severity, g.ranks) for g in groups] == [
        ("GD204", Severity.WARNING, [0, 1]), ("GD403", Severity.CRITICAL, [0, 1])]
    assert groups[0].spread() == "the same on 2 ranks; warning on rank 1, info on rank 0; shown: rank 1"
    assert groups[1].spread() == ("the same on 2 ranks (est. 1.30–1.60× per rank); critical on rank 0, warning on "
                                  "rank 1; shown: rank 0, the largest")


@pytest.mark.skipif(not HTA_RANKS.is_dir(), reason="../shared/traces is not here")
def test_two_rank_report_folds_in_text_and_markdown_not_in_json() -> None:
    from gpudoctor.pipeline import analyze_paths
    from gpudoctor.report.render import render

    report = analyze_paths(sorted(str(p) for p in HTA_RANKS.glob("*.json.gz")))
    per_rule: dict[str, int] = {}
    for f in report.findings:
        per_rule[f.code] = per_rule.get(f.code, 0) + 1
    folded = [code for code, n in per_rule.items() if n > 1]
    assert folded, per_rule   # both ranks of this job share findings
    out = io.StringIO()
    render(report, "json", out)
    assert len(json.loads(out.getvalue())["findings"]) == len(report.findings)
    md = io.StringIO()
    render(report, "markdown", md)
    cards = [line for line in md.getvalue().splitlines() if line.startswith("## ") and " GD" in line]
    shown, quiet = split_no_gain(group_findings(report.findings))
    assert len(cards) == len(shown) < len(report.findings)
    # GD302's 8 tiny copies per step gain nothing: named on one line, no card of "est. 1.00× · costs 0.0 ms/step"
    assert [g.lead.code for g in quiet] == ["GD302"] and "est. 1.00×" not in md.getvalue()
    assert "Also found, each fix estimated at 1.00× (no card): GD302 pageable-memcpy (ranks 0–1)." in md.getvalue()
    assert any("ranks 0–1 (2)" in c for c in cards) and "Ranks: the same on 2 ranks" in md.getvalue()
    os.environ.setdefault("COLUMNS", "100")
    text = io.StringIO()
    render(report, "text", text)
    assert "a rule that fires on several ranks is one card" in " ".join(text.getvalue().split())  # as wrapped
