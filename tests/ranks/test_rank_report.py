"""The headless live report (``attach --once/--duration``, text/JSON/Markdown) shows the rank table.

Rows come from the straggler tracker fed by a real 2-rank DDP run (rank 1 slowed by its data loading)
— what ``Snapshot.rank_table`` holds in a live session watching several ranks.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from gpudoctor.live.report import build_report
from gpudoctor.live.samples import AgentState, Snapshot
from gpudoctor.live.stragglers import StragglerTracker, rank_table
from gpudoctor.report.render import render, to_json, to_markdown

from .conftest import to_windows

Runs = Callable[[str], dict[int, list[dict]]]

COLUMNS = ["rank", "pid", "steps_total", "since_last_step_s", "step_time_ms", "data_wait_pct",
           "collective_wait_pct", "compute_ms", "gpu_util_pct", "straggler_score", "status", "cause", "note"]


def _snapshot(table: tuple[dict, ...]) -> Snapshot:
    return Snapshot(timestamp=1000.0, started_at=990.0, target_pid=4242, process=None, gpus=(), shm=None,
                    stacks=None, steps=None, agent=AgentState("connected"), ranks=(4242, 4243), rank_table=table)


@pytest.mark.slow
def test_report_has_the_ranks_table(ddp_runs: Runs) -> None:
    tracker = StragglerTracker()
    reports = [tracker.update(w, now=float(i)) for i, w in enumerate(to_windows(ddp_runs("input")))]
    last = [r for r in reports if r.stragglers][-1]
    report = build_report(_snapshot(rank_table(last)))
    (table,) = [t for t in report.tables if t.key == "ranks"]
    assert table.title == "Ranks" and table.columns == COLUMNS
    rows = {row["rank"]: row for row in table.rows}
    assert rows[1]["status"] == "straggler" and rows[1]["cause"] == "input"
    assert rows[0]["status"] == "ok" and rows[0]["cause"] is None
    assert rows[1]["data_wait_pct"] > 50 > rows[0]["data_wait_pct"]
    assert rows[0]["collective_wait_pct"] > 50 > rows[1]["collective_wait_pct"]
    assert rows[1]["straggler_score"] < 0.75 and rows[1]["straggler_score"] == round(rows[1]["straggler_score"], 2)
    assert rows[0]["step_time_ms"] == round(rows[0]["step_time_ms"], 1) > 0
    assert rows[0]["steps_total"] == rows[1]["steps_total"] > 0
    assert rows[0]["since_last_step_s"] == 0.0  # it stepped in the last window

    as_json = json.loads(to_json(report))
    (ranks,) = [t for t in as_json["tables"] if t["key"] == "ranks"]
    assert [r["rank"] for r in ranks["rows"]] == [0, 1] and ranks["columns"] == COLUMNS
    assert "straggler" in to_markdown(report)
    text = io.StringIO()
    render(report, "text", text, color=False)
    assert "Ranks" in text.getvalue() and "straggler" in text.getvalue()


def test_one_process_has_no_ranks_table() -> None:
    report = build_report(_snapshot(()))
    assert not [t for t in report.tables if t.key == "ranks"]
