"""``EventTable.positions_of``: the events of some name ids, found by byte searches, as enumerate finds them."""

from __future__ import annotations

import random
from array import array

import pytest

from gpudoctor.trace.events import EventTable


@pytest.mark.parametrize("names", [1, 5, 256, 257, 1000, 70_000])
def test_positions_match_a_plain_scan(names: int) -> None:
    """Both ways (one byte per event for ≤ 256 names, 4-byte patterns above), few ids and many, rare
    names and common ones; ids whose byte patterns also occur across two items (e.g. 0, 256) included."""
    rng = random.Random(names)
    listed = [f"n{i}" for i in range(names)]
    for _ in range(300):
        t = EventTable(names=listed)
        t.name = array("I", [rng.choice([0, 1, 256 % names, rng.randrange(names)]) for _ in range(rng.randint(0, 400))])
        ids = set(rng.sample(range(names), min(names, rng.choice([0, 1, 3, 20]))))
        assert t.positions_of(ids) == [i for i, nid in enumerate(t.name) if nid in ids]
