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


@pytest.mark.parametrize("seed", range(20))
def test_median_is_the_quantiles_median(seed: int) -> None:
    from gpudoctor.quantiles import median

    rng = random.Random(seed)
    values = [rng.choice([rng.uniform(0, 100), float(rng.randrange(5))]) for _ in range(rng.choice([1, 2, 3, 10, 501]))]
    got = vectorized.median(np.array(values))
    assert got == median(values) and type(got) is float
    with pytest.raises(ValueError):
        vectorized.median(np.array([]))


def test_kind_positions_are_the_events_of_those_kinds() -> None:
    from gpudoctor.trace.events import EventTable

    table = EventTable(kind=bytearray([4, 1, 6, 4, 9, 5]))
    assert vectorized.kind_positions(table, (4, 5, 6)).tolist() == [0, 2, 3, 5]
    assert vectorized.kind_positions(table, (4,)).tolist() == [0, 3]
    assert vectorized.kind_positions(EventTable(), (4,)).tolist() == []


def test_name_positions_are_positions_of() -> None:
    from gpudoctor.trace.events import EventTable

    names = [f"n{k}" for k in range(300)]  # more than 256 names: positions_of's slow branch for > 16 ids
    table = EventTable(names=names)
    rng = random.Random(3)
    for _ in range(2000):
        table.name.append(rng.randrange(len(names)))
        table.kind.append(1)
    for ids in ([], [5], list(range(0, 300, 7)), list(range(40))):
        assert vectorized.name_positions(table, ids).tolist() == table.positions_of(ids)
