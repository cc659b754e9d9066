"""The event tables' byte masks select exactly what a test per event selects (issue 14's C-level passes)."""

from __future__ import annotations

import random
from array import array

from gpudoctor.trace.context import _by_thread
from gpudoctor.trace.events import EventTable
from gpudoctor.trace.masks import mask_and, mask_not, mask_or, mask_positions


def _table(rng: random.Random, n: int, threads: int, odd_negatives: bool) -> EventTable:
    t = EventTable()
    values = [-1, 0, 1, 7, 255, 256, 2**40, 2**63 - 1] + ([-2, -256, -(2**63)] if odd_negatives else [])
    t.kind = bytearray(rng.randrange(10) for _ in range(n))
    t.stream = array("q", (rng.choice(values) for _ in range(n)))
    t.correlation = array("q", (rng.choice(values) for _ in range(n)))
    t.threads = [(0, k) for k in range(threads)]
    t.thread = array("I", (rng.randrange(threads) for _ in range(n)))
    t.names = [f"op{k}" for k in range(300)]
    t.name = array("I", (rng.randrange(300) for _ in range(n)))
    return t


def test_masks_equal_a_test_per_event() -> None:
    rng = random.Random(14)
    for trial in range(200):
        t = _table(rng, rng.randrange(0, 400), rng.choice([1, 3, 300]), odd_negatives=trial % 2 == 1)
        for column in ("stream", "correlation"):
            col = getattr(t, column)
            assert t.nonnegative(column) == bytes(x >= 0 for x in col)
            assert t.not_minus_one(column) == bytes(x != -1 for x in col)
        a, b = t.nonnegative("stream"), t.not_minus_one("correlation")
        assert mask_and(a, b) == bytes(x & y for x, y in zip(a, b))
        assert mask_or(a, b) == bytes(x | y for x, y in zip(a, b))
        assert mask_not(a) == bytes(1 - x for x in a)
        assert mask_positions(a) == [i for i, x in enumerate(a) if x]
        ids = set(rng.sample(range(300), rng.randrange(0, 40)))
        assert t.name_mask(ids) == bytes(n in ids for n in t.name)


def test_events_by_thread_keep_index_order_and_first_seen_thread_order() -> None:
    rng = random.Random(41)
    for _ in range(200):
        t = _table(rng, rng.randrange(0, 300), rng.choice([1, 2, 5, 300]), odd_negatives=False)
        mask = bytes(rng.random() < 0.4 for _ in range(len(t.kind)))
        expected: dict[int, list[int]] = {}
        for i, x in enumerate(mask):
            if x:
                expected.setdefault(t.thread[i], []).append(i)
        got = _by_thread(t, mask)
        assert list(got.items()) == list(expected.items())
