"""Rank comparison in post-hoc trace analysis (the trace engineer's ``analyze_paths``).

Two checks: HTA's public two-rank sample shows both ranks side by side, and the rank traces
profiled from our own 2-rank DDP run are recognised as ranks 0 and 1 of one job.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.commands.analyze import analyze_paths

pytestmark = pytest.mark.slow


def _straggler_rows(report) -> list[dict]:
    tables = [t for t in report.tables if t.key == "stragglers"]
    assert tables, "the report has no rank comparison"
    return tables[0].rows


def test_hta_trace_filter_sample_is_compared_rank_by_rank(shared_traces: Path) -> None:
    folder = shared_traces / "public" / "hta" / "trace_filter"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    rows = _straggler_rows(analyze_paths([folder]))
    assert [r["rank"] for r in rows] == [0, 1]
    # Two ranks of one synchronous job: equal step times (HTA: 615 vs 619 ms), no straggler by score.
    assert all(0.9 < r["straggler_score"] < 1.1 for r in rows)
    # HTA's view: which rank starts the dominant collective last — the shares add up to 100%.
    assert sum(r["late_collective_pct"] for r in rows) == pytest.approx(100.0)


def test_ddp_rank_traces_are_one_job_of_two_ranks(short_profiled_run: Callable[[str], Path]) -> None:
    traces = sorted(short_profiled_run("healthy").glob("rank*.pt.trace.json"))
    assert len(traces) == 2
    report = analyze_paths(traces)
    rows = _straggler_rows(report)
    assert [r["rank"] for r in rows] == [0, 1]
    assert all(r["step_time_p50_ms"] and r["step_time_p50_ms"] > 0 for r in rows)
