"""The noise estimate behind ``gpudoctor compare``: exact Mann–Whitney values, bootstrap interval."""

from __future__ import annotations

import math
import random

import pytest

from gpudoctor.compare.stats import bootstrap_change_ci, estimate_change, mann_whitney_p


@pytest.mark.parametrize(("before", "after", "expected"), [
    ([1, 2, 3, 4], [5, 6, 7, 8], 2 / 70),           # complete separation, C(8,4) = 70
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 2 / 252),   # C(10,5) = 252 (scipy: 0.007937)
    ([1, 2, 4], [3, 5, 6], 0.2),                    # U = 1 of 9; P(U <= 1) = 2/20 (scipy: 0.2)
    ([1, 2, 3], [4, 5, 6], 0.1),
])
def test_exact_mann_whitney_matches_known_values(before: list[float], after: list[float], expected: float) -> None:
    assert mann_whitney_p(before, after) == pytest.approx(expected, rel=1e-9)
    assert mann_whitney_p(after, before) == pytest.approx(expected, rel=1e-9)  # two-sided: symmetric


def test_identical_samples_are_not_significant() -> None:
    values = [10.0, 11.0, 12.0, 13.0]
    assert mann_whitney_p(values, values) == pytest.approx(1.0)


def test_normal_approximation_with_ties() -> None:
    rng = random.Random(3)
    before = [round(rng.gauss(50, 2)) for _ in range(80)]   # rounded: many ties
    after = [round(rng.gauss(54, 2)) for _ in range(80)]
    p = mann_whitney_p(before, after)
    assert 0 <= p < 1e-6
    same = [round(rng.gauss(50, 2)) for _ in range(80)]
    assert mann_whitney_p(before, same) > 0.01


def test_bootstrap_interval_holds_the_point_estimate_and_is_reproducible() -> None:
    rng = random.Random(7)
    before = [rng.gauss(100, 5) for _ in range(50)]
    after = [rng.gauss(80, 5) for _ in range(50)]
    est = estimate_change(before, after)
    assert est.ci_low_pct is not None and est.ci_high_pct is not None
    assert est.ci_low_pct <= est.change_pct <= est.ci_high_pct
    assert -25 < est.change_pct < -15
    assert bootstrap_change_ci(before, after, seed=1) == bootstrap_change_ci(before, after, seed=1)


def test_too_few_samples_give_no_noise_estimate() -> None:
    est = estimate_change([10.0, 11.0], [5.0, 6.0])
    assert est.p_value is None and est.ci_low_pct is None
    assert est.change_pct == pytest.approx((5.5 / 10.5 - 1) * 100)
    assert not math.isnan(est.change_pct)


def test_a_change_reads_in_times_and_in_percent_of_time_on_one_base() -> None:
    """A 2.00× speed-up read "50.1% faster": now × and "% less time" agree."""
    from gpudoctor.compare.diff import change_text

    assert change_text(-50.0) == "2.00× faster: the median step takes 50.0% less time"
    assert change_text(25.0) == "1.25× slower: the median step takes 25.0% more time"
    assert "faster" not in change_text(0.0) and "slower" not in change_text(0.0)
