"""gpudoctor.quantiles.median gives statistics.median's float, bit for bit (reports must not change)."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudoctor.quantiles import median


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=50))
def test_same_as_statistics(values: list[float]) -> None:
    assert median(values) == statistics.median(values)
    assert median(iter(values)) == statistics.median(values)


def test_empty_is_an_error() -> None:
    with pytest.raises(ValueError):
        median([])
