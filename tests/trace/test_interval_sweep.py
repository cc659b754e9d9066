"""The step picture's interval shortcuts give what the plain subtraction and re-merge gave, exactly."""

from __future__ import annotations

import random

from gpudoctor.trace.partition import _first_class_wins
from gpudoctor.trace.partition import clip as _clip
from gpudoctor.trace.partition import span_minus as _span_minus
from gpudoctor.trace.timeline import merge
from gpudoctor.trace.timeline import subtract as _subtract


def _random_classes(rng: random.Random) -> list[list[tuple[float, float]]]:
    classes = []
    for _ in range(rng.randrange(1, 6)):
        spans = []
        for _ in range(rng.randrange(0, 12)):
            a = float(rng.randrange(0, 60)) / 2
            spans.append((a, a + rng.choice([0.5, 1.0, 1.5, 3.0, 7.5])))
        classes.append(merge(spans))
    return classes


def test_first_class_wins_equals_subtracting_the_earlier_classes() -> None:
    rng = random.Random(14)
    for _ in range(3000):
        classes = _random_classes(rng)
        covered: list[tuple[float, float]] = []
        expected = []
        for spans in classes:
            own = _subtract(spans, covered)
            expected.append(own)
            covered = merge([*covered, *own])
        assert _first_class_wins(classes) == (expected, covered)


def test_span_minus_equals_subtract() -> None:
    rng = random.Random(41)
    for _ in range(3000):
        union = merge(s for spans in _random_classes(rng) for s in spans)
        a = float(rng.randrange(-4, 40)) / 2
        b = a + float(rng.randrange(0, 40)) / 2
        cut = _clip(union, a, b)
        assert _span_minus(a, b, cut) == _subtract([(a, b)], cut)


def _clip_by_loop(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi]


def test_clip_equals_clipping_every_piece() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        union = merge(s for spans in _random_classes(rng) for s in spans)
        lo = float(rng.randrange(-4, 40)) / 2
        hi = lo + float(rng.randrange(0, 40)) / 2
        assert _clip(union, lo, hi) == _clip_by_loop(union, lo, hi)


def test_union_of_runs_equals_merging_the_intervals_in_the_window() -> None:
    from gpudoctor.trace.hostfloor import _union_of_runs

    rng = random.Random(23)
    for _ in range(3000):
        starts, x = [], 0.0
        for _ in range(rng.randrange(0, 40)):  # mostly ascending, with descents (per-thread blocks meeting)
            x += rng.choice([0.0, 0.5, 1.0, 2.0, -5.0, -20.0])
            starts.append(x)
        ends = [a + rng.choice([0.0, 0.5, 1.0, 3.0, 10.0]) for a in starts]
        lo, hi = rng.choice([(-100.0, 100.0), (-3.0, 10.0), (0.0, 0.0)])
        expected = merge((a, b) for a, b in zip(starts, ends) if lo <= a <= hi)
        assert _union_of_runs(starts, ends, lo, hi) == expected
