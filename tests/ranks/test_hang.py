"""GD613 ranks-hung on rank windows over time: every rank alive at the same step, none moving.

The windows are what each rank's agent reports: ``steps_total``, and — because the agent falls back
to its last 8 steps when fewer than 3 ended in the window — the last step time even while hung.
The real hang (2 gloo ranks, one blocked in I/O, the other in the all-reduce) is in
test_hang_job.py.
"""

from __future__ import annotations

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.stragglers import RankWindow, StragglerTracker, rank_factsets, rank_table
from gpudoctor.model import Severity, Source


def _windows(steps: tuple[int, ...], step_ms: float | None = 500.0, alive: tuple[bool, ...] = (True, True)):
    return [RankWindow(r, pid=1000 + r, steps_total=s, window_steps=8 if s else 0,
                       step_time_ms=step_ms if s else None, alive=a)
            for r, (s, a) in enumerate(zip(steps, alive))]


def _judge(report, code: str = "GD613", options: dict | None = None):
    catalog = load_catalog().select([code], [])
    return evaluate(catalog, rank_factsets(report), [Source.LIVE], {code: options or {}})


def _run(timeline, **kwargs):
    """Feed (t, steps per rank[, step ms]) to one tracker; return the report after each."""
    tracker = StragglerTracker()
    return [(t, tracker.update(_windows(*rest, **kwargs), now=float(t))) for t, *rest in timeline]


def test_all_ranks_stopped_at_the_same_step_is_a_hang() -> None:
    timeline = [(0, (10, 10)), (5, (20, 20)), (10, (30, 30)), (15, (31, 31))]
    timeline += [(15 + k * 5, (31, 31)) for k in range(1, 15)]  # 70 s without a step
    for t, report in _run(timeline):
        found = _judge(report).findings
        if t < 15 + 60:
            assert not found, (t, found[0].message)
    assert report.desync.stalled_s == 70.0 and report.desync.recent_step_time_ms == 500.0
    (f,) = found
    assert f.code == "GD613" and f.severity == Severity.CRITICAL
    assert "No rank finished a step for 70 s" in f.message and "at step 31" in f.message
    assert "rank 0: step 31, last step 70 s ago; rank 1: step 31, last step 70 s ago" in f.message
    evidence = {e.name: e.value for e in f.evidence}
    assert evidence["hang_after_s"] == 60.0 and evidence["recent_step_time_s"] == 0.5
    assert not _judge(report, "GD610").findings  # the step counts agree: no desync


def test_a_slow_job_that_progresses_is_not_hung() -> None:
    """Steps of 2 minutes: 119 s without a step is normal, not a hang (10 x 120 s threshold)."""
    timeline = [(t, (t // 120 + 1, t // 120 + 1)) for t in range(0, 1200, 10)]
    for t, report in _run(timeline, step_ms=120_000.0):
        assert not _judge(report).findings, t
        assert report.desync.stalled_s < 120.0
    # the same job really hung: caught once no step came for 10 step times
    tracker = StragglerTracker()
    for t in range(0, 1300, 100):
        report = tracker.update(_windows((9, 9), step_ms=120_000.0), now=float(t))
        assert bool(_judge(report).findings) == (t >= 1200), t


def test_no_verdict_before_the_first_step() -> None:
    """Start-up (imports, data, compile) can take minutes: steps_total 0 is not a hang."""
    for _, report in _run([(t, (0, 0)) for t in range(0, 600, 60)]):
        result = _judge(report)
        assert not result.findings and not result.not_evaluated  # decided: not a hang (no step yet)


def test_without_a_step_time_the_hang_is_not_evaluated() -> None:
    """An agent that reports counts but no step time: no threshold can be derived — say so."""
    _, report = _run([(0, (5, 5)), (300, (5, 5))], step_ms=None)[-1]
    result = _judge(report)
    assert not result.findings
    assert [n.code for n in result.not_evaluated] == ["GD613"]
    assert "recent_step_time_s" in result.not_evaluated[0].needs


def test_desync_and_dead_ranks_stay_gd610() -> None:
    _, behind = _run([(0, (30, 30)), (10, (31, 30)), (200, (31, 30))])[-1]
    assert not _judge(behind).findings and _judge(behind, "GD610").findings
    tracker = StragglerTracker()
    tracker.update(_windows((30, 30)), now=0.0)
    dead = tracker.update(_windows((30, 30), alive=(True, False)), now=200.0)
    assert not _judge(dead).findings and _judge(dead, "GD610").findings


def test_options_and_where_the_ranks_are() -> None:
    tracker = StragglerTracker()
    tracker.update(_windows((40, 40), step_ms=50.0), now=0.0)
    where = {0: "all_reduce (torch/distributed/distributed_c10d.py:2800)", 1: "block_on_io (hang_job.py:34)"}
    report = tracker.update(_windows((40, 40), step_ms=50.0), now=20.0, where=where)
    assert not _judge(report).findings  # 20 s < hang_after_s (60)
    (f,) = _judge(report, options={"hang_after_s": 15.0}).findings
    evidence = {e.name: e.value for e in f.evidence}
    assert evidence["where_by_rank"] == ("rank 0: all_reduce (torch/distributed/distributed_c10d.py:2800); "
                                         "rank 1: block_on_io (hang_job.py:34)")
    rows = {row["rank"]: row for row in rank_table(report)}
    assert rows[0]["since_last_step_s"] == rows[1]["since_last_step_s"] == 20.0


def test_one_rank_still_moving_resets_the_stall() -> None:
    """Ranks at the same step count but one of them moving now and then: progress, not a hang."""
    timeline = [(t, (50 + t // 50, 50 + t // 50)) for t in range(0, 400, 10)]
    for _, report in _run(timeline, step_ms=100.0):
        assert report.desync.stalled_s < 50.0
        assert not _judge(report).findings


#: ``py-spy dump --pid <rank 0> --nonblocking`` of hang_job.py, recorded here while it hung (rank 0
#: waits in the all-reduce); py-spy shortens paths under sys.path.
DUMP_RANK0 = '''Process 6342: /work/main/.venv/bin/python3 -u tests/ranks/hang_job.py --out /tmp/gd6/hang
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 6355 (idle): "gpudoctor-agent"
    select (selectors.py:415)
    serve (gpudoctor/agent/server.py:80)

Thread 6342 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    main (ranks/hang_job.py:65)
    <module> (ranks/hang_job.py:70)
'''


def test_where_a_rank_is_from_its_dump() -> None:
    from gpudoctor.live.rankwhere import parse_dump

    # the main thread (id = pid), not the agent's thread listed first; the caller outside torch
    assert parse_dump(DUMP_RANK0, 6342) == "all_reduce (distributed_c10d.py:3252) from main (hang_job.py:65)"
    # a thread id that is not the pid: the first thread listed
    assert parse_dump(DUMP_RANK0, 1) == "select (selectors.py:415) from serve (server.py:80)"
    assert parse_dump("Process 1: x\n", 1) is None
    full = "Thread 7 (idle)\n    wait (/usr/lib/python3.11/threading.py:320)\n    run (/srv/job/train.py:9)\n"
    assert parse_dump(full, 7) == "wait (threading.py:320) from run (train.py:9)"


def test_a_rank_whose_steps_cannot_be_read_prevents_the_verdict() -> None:
    """Rank 1's agent does not answer (no step count): rank 0 alone stalling is not called a hang."""
    tracker = StragglerTracker()
    unread = [RankWindow(0, steps_total=12, window_steps=8, step_time_ms=50.0), RankWindow(1)]
    tracker.update(unread, now=0.0)
    report = tracker.update(unread, now=300.0)
    assert report.desync.stalled_s == 300.0
    assert not _judge(report).findings
