"""``median`` as :func:`statistics.median` computes it, without importing :mod:`statistics`.

Why this exists: ``statistics`` pulls in ``random``, ``fractions`` and ``decimal`` — ~5 ms of every
``gpudoctor analyze`` start for one function (bench/trace_bench.py's import table). The result is the
same float: the middle item, or the mean of the two middle ones computed as ``(a + b) / 2``.
"""

from __future__ import annotations

from collections.abc import Iterable


def median(values: Iterable[float]) -> float:
    """The median of ``values``; ValueError when there are none."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        raise ValueError("no median for empty data")
    mid = n // 2
    if n % 2 == 1:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2
