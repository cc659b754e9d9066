"""Straggler and desync verdicts on per-step timings measured in real 2-rank DDP runs (gloo, CPU).

Each run takes about 5 s; the three runs are shared by the tests of this module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.stragglers import RankWindow, StragglerTracker, rank_factsets, rank_table, score_ranks
from gpudoctor.model import Source

from .conftest import WARMUP_STEPS, ddp_run, to_windows

Runs = Callable[[str], dict[int, list[dict]]]
pytestmark = pytest.mark.slow


def _track(rows: dict[int, list[dict]], tracker: StragglerTracker | None = None):
    tracker = tracker or StragglerTracker()
    reports = [tracker.update(w, now=float(i)) for i, w in enumerate(to_windows(rows))]
    assert len(reports) >= 4, "the run must give at least four windows"
    return reports


def _live_findings(report, code: str):
    catalog = load_catalog().select([code], [])
    return evaluate(catalog, rank_factsets(report), [Source.LIVE])


@pytest.mark.parametrize(("mode", "cause"), [("compute", "compute"), ("input", "input")])
def test_slow_rank_is_named_with_its_cause(ddp_runs: Runs, mode: str, cause: str) -> None:
    rows = ddp_runs(mode)
    reports = _track(rows)
    named = [r for r in reports if r.stragglers]
    assert named, "rank 1 was never slow for three windows in a row"
    for report in named:
        assert [(v.rank, v.cause) for v in report.stragglers] == [(1, cause)], (report.stragglers, report.windows)
        assert report.stragglers[0].score is not None and report.stragglers[0].score < 0.75
    # The fast rank is never blamed, although its step time is the same.
    assert all(not v.is_straggler for r in reports for v in r.verdicts if v.rank == 0)
    result = _live_findings(named[-1], "GD601")
    assert [(f.code, f.location.rank) for f in result.findings] == [("GD601", 1)]
    assert f"({cause})" in result.findings[0].message


def test_step_time_alone_cannot_tell_the_straggler(ddp_runs: Runs) -> None:
    """The premise: in synchronous DDP the ranks' step times are equal; only the waits differ."""
    rows = ddp_runs("compute")
    whole_run = to_windows(rows, window_steps=len(rows[0]) - WARMUP_STEPS)[0]  # one window: all steps
    steps = {w.rank: w.step_time_ms for w in whole_run}
    assert steps[0] is not None and steps[1] is not None
    assert min(steps.values()) / max(steps.values()) > 0.75  # a step-time score would see no straggler
    by_rank = {w.rank: w for w in whole_run}
    assert by_rank[0].collective_wait_ms > 2 * by_rank[1].collective_wait_ms  # type: ignore[operator]
    assert score_ranks(whole_run)[1][2] < 0.75


def _blamed(reports) -> list[tuple[int, str | None]]:
    return [(v.rank, v.cause) for r in reports for v in r.stragglers if v.cause != "cpu"]


def test_healthy_run_has_no_straggler(ddp_runs: Runs, tmp_path: Path) -> None:
    """Equal work on both ranks: nobody is blamed for input or compute.

    On a loaded test machine one rank can really be starved of CPU for a while; that is reported
    with cause "cpu" (its own run-queue delay explains it), never as extra work or slow input.
    Starvation that leaves no run-queue delay — the hypervisor taking the vCPU (steal time counts
    as the thread's own CPU time) or a thrashed shared cache; seen once in CI on a fresh 2-core VM
    beside the other xdist worker: rank 1 named "compute" for two windows — cannot be told from
    extra work by the live numbers; such a run is repeated once, and a fault that blames a healthy
    rank every time still fails.
    """
    reports = _track(ddp_runs("healthy"))
    if _blamed(reports):
        first = [(r.stragglers, r.windows) for r in reports if r.stragglers]
        reports = _track(ddp_run(tmp_path, "healthy"))
        assert _blamed(reports) == [], ("blamed in two healthy runs", first)
    for r in reports:
        for f in _live_findings(r, "GD601").findings:
            assert "(cpu)" in f.message


def test_rank_table_rows(ddp_runs: Runs) -> None:
    last = [r for r in _track(ddp_runs("input")) if r.stragglers][-1]
    rows = {row["rank"]: row for row in rank_table(last)}
    assert rows[1]["status"] == "straggler" and rows[1]["cause"] == "input"
    assert rows[0]["status"] == "ok"
    assert rows[1]["data_wait_pct"] > 50 > rows[0]["data_wait_pct"]
    assert rows[0]["collective_wait_pct"] > 50 > rows[1]["collective_wait_pct"]


def test_cause_from_gpu_and_cpu_evidence() -> None:
    fast = RankWindow(0, steps_total=50, window_steps=10, step_time_ms=100, data_wait_ms=2,
                      collective_wait_ms=60, compute_ms=38, cpu_run_delay_pct=3.0)
    slow = dict(rank=1, steps_total=50, window_steps=10, step_time_ms=100, data_wait_ms=2,
                collective_wait_ms=2, compute_ms=96)
    for extra, cause in [({"gpu_throttled": True}, "gpu"), ({"gpu_shared": True}, "gpu"),
                         ({"cpu_run_delay_pct": 45.0}, "cpu"), ({"cpu_run_delay_pct": 3.0}, "compute")]:
        # the fast rank waited for a CPU 3% of its runnable time; 45% on the slow one is contention
        tracker = StragglerTracker.from_options({"min_slow_windows": 1})
        report = tracker.update([fast, RankWindow(**slow, **extra)], now=0.0)  # type: ignore[arg-type]
        assert [(v.rank, v.cause) for v in report.stragglers] == [(1, cause)], extra


def test_without_collective_wait_an_input_straggler_is_still_named(ddp_runs: Runs) -> None:
    """What today's agent gives (step time, data wait, no collective wait): the estimate still works."""
    tracker = StragglerTracker()
    for i, wins in enumerate(to_windows(ddp_runs("input"))):
        stripped = [RankWindow(w.rank, w.pid, w.steps_total, w.window_steps, w.step_time_ms, w.data_wait_ms,
                               w.h2d_ms) for w in wins]
        report = tracker.update(stripped, now=float(i))
        assert report.basis.startswith("estimated")
        if report.stragglers:
            named = report
    assert [(v.rank, v.cause) for v in named.stragglers] == [(1, "input")]
    findings = _live_findings(named, "GD601").findings
    assert len(findings) == 1 and "estimated from data wait" in findings[0].message


def test_without_collective_wait_a_compute_straggler_cannot_be_seen(ddp_runs: Runs) -> None:
    """The honest limit of the estimate: extra compute is invisible without the collective wait."""
    tracker = StragglerTracker()
    for i, wins in enumerate(to_windows(ddp_runs("compute"))):
        stripped = [RankWindow(w.rank, w.pid, w.steps_total, w.window_steps, w.step_time_ms, w.data_wait_ms,
                               w.h2d_ms) for w in wins]
        report = tracker.update(stripped, now=float(i))
    assert not report.stragglers


def test_missing_step_evidence_is_not_evaluated() -> None:
    wins = [RankWindow(r, steps_total=10, window_steps=10, step_time_ms=50.0) for r in (0, 1)]
    report = StragglerTracker().update(wins, now=0.0)
    assert report.missing and not report.stragglers
    result = _live_findings(report, "GD601")
    assert not result.findings
    assert [n.code for n in result.not_evaluated] == ["GD601"]


def test_a_single_process_job_is_not_judged() -> None:
    report = StragglerTracker().update([RankWindow(0, steps_total=5, window_steps=5, step_time_ms=9.0)], 0.0)
    for code in ("GD601", "GD610"):
        result = _live_findings(report, code)
        assert not result.findings and not result.not_evaluated


def test_desync_names_the_rank_behind_after_the_stall() -> None:
    tracker = StragglerTracker()
    rep = None
    for t, steps in [(0, (100, 100)), (10, (110, 109)), (20, (111, 110)), (50, (111, 110)), (90, (111, 110))]:
        wins = [RankWindow(r, steps_total=s, window_steps=0) for r, s in enumerate(steps)]
        rep = tracker.update(wins, now=float(t))
        if t == 50:
            assert not _live_findings(rep, "GD610").findings  # 30 s < min_stall_s
    assert rep is not None and rep.desync.lagging_ranks == (1,) and rep.desync.stalled_s == 70.0
    result = _live_findings(rep, "GD610")
    assert [(f.code, f.location.rank) for f in result.findings] == [("GD610", 1)]
    assert "step 110" in result.findings[0].message and "111" in result.findings[0].message


def test_dead_rank_is_reported() -> None:
    tracker = StragglerTracker()
    tracker.update([RankWindow(r, steps_total=40, window_steps=5) for r in (0, 1)], now=0.0)
    rep = tracker.update([RankWindow(0, steps_total=40), RankWindow(1, steps_total=40, alive=False)], now=100.0)
    result = _live_findings(rep, "GD610")
    assert len(result.findings) == 1 and "exited" in result.findings[0].message


def test_all_ranks_paused_at_the_same_step_is_not_desync() -> None:
    tracker = StragglerTracker()
    for t in (0.0, 200.0):
        rep = tracker.update([RankWindow(r, steps_total=7, window_steps=0) for r in (0, 1)], now=t)
    assert rep.desync.stalled_s == 200.0
    assert not _live_findings(rep, "GD610").findings
