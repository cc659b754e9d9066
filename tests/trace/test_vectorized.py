"""The numpy interval primitives against the pure-Python ones they reproduce (random intervals)."""

from __future__ import annotations

import random

import pytest

from gpudoctor.trace import timeline, vectorized

np = pytest.importorskip("numpy")


def _intervals(rng: random.Random, n: int, inverted: bool = False) -> list[tuple[float, float]]:
    out = []
    for _ in range(n):
        start = 1.7e15 + rng.choice([rng.uniform(0, 1e4), float(rng.randrange(0, 2000))])
        length = rng.choice([rng.uniform(0, 50), float(rng.randrange(0, 20)), 0.0])
        if inverted and rng.random() < 0.05:
            length = -rng.uniform(0, 2)
        out.append((start, start + length))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_merge_and_total_match_the_pure_loop(seed: int) -> None:
    rng = random.Random(seed)
    spans = _intervals(rng, rng.choice([0, 1, 2, 10, 300, 3000]), inverted=seed % 2 == 1)
    expected = timeline.merge(spans)
    starts, ends = vectorized.merge(np.array([a for a, _ in spans]), np.array([b for _, b in spans]))
    assert list(zip(starts.tolist(), ends.tolist())) == expected
    assert vectorized.total(starts, ends) == timeline.total(expected)


@pytest.mark.parametrize("seed", range(40))
def test_intersection_length_matches_the_two_pointer_walk(seed: int) -> None:
    rng = random.Random(seed)
    a = timeline.merge(_intervals(rng, rng.choice([0, 1, 5, 400, 4000])))
    b = timeline.merge(_intervals(rng, rng.choice([0, 1, 5, 400, 4000])))
    got = vectorized.intersection_length(*(np.array(x, dtype=float) for x in ([s for s, _ in a], [e for _, e in a],
                                                                              [s for s, _ in b], [e for _, e in b])))
    assert got == timeline.intersection_length(a, b)


def test_the_gate_follows_the_table_size_and_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.trace.events import EventTable

    table = EventTable()
    monkeypatch.delenv(vectorized.MODE_ENV, raising=False)
    assert vectorized.numpy_for(table) is None
    monkeypatch.setenv(vectorized.MODE_ENV, "always")
    assert vectorized.numpy_for(table) is np
    monkeypatch.setenv(vectorized.MODE_ENV, "never")
    monkeypatch.setattr(vectorized, "NUMPY_MIN_EVENTS", 0)
    assert vectorized.numpy_for(table) is None
