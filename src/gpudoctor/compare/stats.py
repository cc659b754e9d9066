"""Noise estimates for step-time samples, with the standard library only.

Why this exists: a 3% speedup means nothing if steps jitter by 10%. ``compare`` reports the
change of the median step time with a bootstrap confidence interval and a two-sided
Mann–Whitney U test, both distribution-free (step times are skewed: a few slow steps from
checkpointing, garbage collection or data hiccups are normal).

What it must not do: import numpy/scipy (the tool's base install has neither), or use global
random state (results must be reproducible: the bootstrap is seeded).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Exact Mann–Whitney distribution up to this many pairs (n1 * n2); normal approximation above.
EXACT_PAIRS_MAX = 2500


@dataclass(frozen=True)
class ChangeEstimate:
    """How the median moved from ``before`` to ``after``, and how sure we are.

    Attributes:
        before_median: Median of the before samples.
        after_median: Median of the after samples.
        change_pct: ``(after / before - 1) * 100`` of the medians.
        ci_low_pct: Lower bound of the bootstrap 95% interval of ``change_pct`` (None: too few samples).
        ci_high_pct: Upper bound of that interval.
        p_value: Two-sided Mann–Whitney U p-value (None: too few samples).
    """

    before_median: float
    after_median: float
    change_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    p_value: float | None


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def bootstrap_change_ci(before: Sequence[float], after: Sequence[float], resamples: int = 2000,
                        confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the relative change of medians, in percent."""
    rng = random.Random(seed)
    changes: list[float] = []
    for _ in range(resamples):
        b = median(rng.choices(before, k=len(before)))
        a = median(rng.choices(after, k=len(after)))
        if b > 0:
            changes.append((a / b - 1.0) * 100.0)
    changes.sort()
    if not changes:
        return (math.nan, math.nan)
    tail = (1.0 - confidence) / 2.0
    low = changes[int(math.floor(tail * (len(changes) - 1)))]
    high = changes[int(math.ceil((1.0 - tail) * (len(changes) - 1)))]
    return (low, high)


def _ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _exact_u_cdf_counts(n1: int, n2: int) -> list[int]:
    """Number of arrangements giving each U value (no ties), by the classic recurrence."""
    # counts[m][n] as a rolling table over U values: f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u)
    table: dict[tuple[int, int], list[int]] = {}
    for m in range(n1 + 1):
        for n in range(n2 + 1):
            if m == 0 or n == 0:
                table[(m, n)] = [1]
                continue
            size = m * n + 1
            row = [0] * size
            left = table[(m - 1, n)]
            for u, c in enumerate(left):
                row[u + n] += c
            for u, c in enumerate(table[(m, n - 1)]):
                row[u] += c
            table[(m, n)] = row
    return table[(n1, n2)]


def mann_whitney_p(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p-value of the Mann–Whitney U test (exact without ties for small samples)."""
    n1, n2 = len(before), len(after)
    if n1 == 0 or n2 == 0:
        return math.nan
    combined = list(before) + list(after)
    ranks = _ranks(combined)
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2.0
    u_min = min(u1, n1 * n2 - u1)
    has_ties = len(set(combined)) < len(combined)
    if n1 * n2 <= EXACT_PAIRS_MAX and not has_ties:
        counts = _exact_u_cdf_counts(n1, n2)
        total = sum(counts)
        tail = sum(counts[: int(math.floor(u_min)) + 1])
        return min(1.0, 2.0 * tail / total)
    # Normal approximation with tie correction and continuity correction.
    n = n1 + n2
    tie_term = 0.0
    for value in set(combined):
        t = combined.count(value)
        tie_term += t ** 3 - t
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0)))


def estimate_change(before: Sequence[float], after: Sequence[float], min_samples: int = 3,
                    seed: int = 0) -> ChangeEstimate:
    """Median change with a noise estimate; the interval and p-value need ``min_samples`` per side."""
    if not before or not after:
        raise ValueError("both sides need at least one sample")
    b_med, a_med = median(before), median(after)
    change = (a_med / b_med - 1.0) * 100.0 if b_med > 0 else math.nan
    if len(before) < min_samples or len(after) < min_samples:
        return ChangeEstimate(b_med, a_med, change, None, None, None)
    low, high = bootstrap_change_ci(before, after, seed=seed)
    return ChangeEstimate(b_med, a_med, change, low, high, mann_whitney_p(before, after))
