"""GD601 post-hoc: how much evidence a verdict needs, and how the cause is told apart (synthetic ranks).

The per-step numbers below are shaped like the real ones in test_posthoc_straggler.py (2-rank gloo
DDP on CPU): ~9 ms/step outside collectives on a healthy rank, ~430 aten ops per step. They test
the decision itself: a median over 4 noisy steps must not name a straggler, a rank slower in only
half of its steps must not either, and the cause follows the rank's own work per step.
"""

from __future__ import annotations

from statistics import median

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import Severity, Source
from gpudoctor.trace.facts import slower_step_counts, straggler_factsets
from gpudoctor.trace.metrics import RankMetrics


def _rank(rank: int, outside_ms: list[float], aten_ops: int = 430, gpu_busy_ms: float | None = None,
          loader_ms: float = 0.5, first_step: int = 3) -> RankMetrics:
    rows = [{"step": first_step + k, "step_time_ms": 40.0, "outside_collective_ms": ms, "aten_ops": aten_ops,
             "gpu_busy_ms": gpu_busy_ms or 0.0} for k, ms in enumerate(outside_ms)]
    values = {"step_time_p50_ms": 40.0, "outside_collective_ms_p50": median(outside_ms),
              "collective_wait_ms_p50": 40.0 - median(outside_ms), "dataloader_ms_per_step": loader_ms}
    return RankMetrics(rank, values, rows)  # type: ignore[arg-type]


def _gd601(metrics: list[RankMetrics], options: dict | None = None):
    catalog = load_catalog().select(["GD601"], [])
    return evaluate(catalog, straggler_factsets(metrics), [Source.TRACE], {"GD601": options or {}}).findings


def test_noisy_four_step_median_is_info_not_a_straggler() -> None:
    """Two descheduled steps of four pull the median of a healthy rank to a 0.57 score."""
    fast = _rank(0, [9.0, 9.2, 8.8, 9.1])
    noisy = _rank(1, [8.5, 24.0, 8.7, 23.5])  # median 16.1 ms: score 0.57, slower in 2 of 4 steps
    findings = _gd601([fast, noisy])
    assert [(f.location.rank, f.severity) for f in findings] == [(1, Severity.INFO)]
    assert "2 of 4 profiled steps" in findings[0].message and "too thin" in findings[0].message


def test_enough_steps_but_slower_in_only_half_of_them_is_not_a_straggler() -> None:
    fast = _rank(0, [9.0] * 8)
    noisy = _rank(1, [8.0, 30.0, 8.0, 30.0, 8.0, 30.0, 30.0, 8.0])  # median 19: score 0.47, 4 of 8
    findings = _gd601([fast, noisy])
    assert [(f.location.rank, f.severity) for f in findings] == [(1, Severity.INFO)]
    assert "4 of 8" in findings[0].message


def test_consistently_slower_rank_with_enough_steps_is_a_straggler() -> None:
    """The same thresholds do name a rank that is slower in (nearly) every step: the test can fail."""
    fast = _rank(0, [9.0, 9.3, 8.9, 9.1, 9.0, 9.2])
    slow = _rank(1, [30.0, 31.0, 8.0, 29.5, 30.5, 30.2], aten_ops=1030)  # 5 of 6 steps slower
    findings = _gd601([fast, slow])
    assert [(f.location.rank, f.severity.rank >= Severity.WARNING.rank) for f in findings] == [(1, True)]
    assert "(compute)" in findings[0].message and "5 of 6 profiled steps" in findings[0].message
    assert "1030 vs 430 aten ops" in findings[0].message
    # The thresholds are options: asking for every step turns the same evidence into info.
    strict = _gd601([fast, slow], {"min_slower_step_pct": 100.0})
    assert [f.severity for f in strict] == [Severity.INFO]


def test_same_work_run_slower_on_the_host_is_cpu_not_compute() -> None:
    fast = _rank(0, [9.0] * 6, gpu_busy_ms=5.0)
    starved = _rank(1, [27.0] * 6, gpu_busy_ms=5.2)  # same ops, same GPU time: the host was slower
    (f,) = _gd601([fast, starved])
    assert "(cpu)" in f.message and "same work" in f.message and "430 vs 430 aten ops" in f.message
    cpu_only = _rank(1, [27.0] * 6)  # no GPU in the trace at all
    (c,) = _gd601([_rank(0, [9.0] * 6), cpu_only])
    assert "(cpu)" in c.message
    # Same ops but 3x the GPU time: more data per op or a slower GPU — the trace cannot tell: compute.
    busier = _rank(1, [27.0] * 6, gpu_busy_ms=15.0)
    (g,) = _gd601([fast, busier])
    assert "(compute)" in g.message and "GPU is busy 15.0 ms/step vs 5.0 ms" in g.message


def test_input_cause_comes_first() -> None:
    fast = _rank(0, [12.0] * 6, loader_ms=0.8)
    reader = _rank(1, [110.0] * 6, loader_ms=91.0)
    (f,) = _gd601([fast, reader])
    assert "(input)" in f.message and "91.0 ms/step vs 0.8 ms" in f.message


def test_steps_are_matched_by_number_then_by_position() -> None:
    a = _rank(0, [9.0, 9.0, 9.0, 9.0, 9.0])
    b = _rank(1, [20.0, 20.0, 8.0, 20.0, 20.0])
    assert slower_step_counts([a, b], "outside_collective_ms") == {0: (1, 5), 1: (4, 5)}
    shifted = _rank(1, [20.0, 20.0, 8.0, 20.0, 20.0], first_step=100)  # profiled at another time
    assert slower_step_counts([a, shifted], "outside_collective_ms") == {0: (1, 5), 1: (4, 5)}
    overlap = _rank(1, [20.0, 20.0, 8.0, 20.0, 20.0], first_step=5)  # steps 5-7 common with rank 0
    assert slower_step_counts([a, overlap], "outside_collective_ms") == {0: (1, 3), 1: (2, 3)}


def test_three_ranks_compare_each_with_the_median_of_the_others() -> None:
    ranks = [_rank(0, [9.0, 10.0, 9.0, 10.0, 9.0]), _rank(1, [10.0, 9.0, 10.0, 9.0, 10.0]),
             _rank(2, [25.0, 26.0, 24.0, 25.0, 27.0])]
    counts = slower_step_counts(ranks, "outside_collective_ms")
    assert counts[2] == (5, 5)
    # the median of a healthy rank's two peers is half-way to the straggler: never slower than that
    assert counts[0] == counts[1] == (0, 5)
    findings = _gd601(ranks)
    assert [(f.location.rank, f.severity.rank >= Severity.WARNING.rank) for f in findings] == [(2, True)]
