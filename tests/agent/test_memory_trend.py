"""GD503's input: the agent's memory slope ignores warm-up growth and still sees a leak."""

from __future__ import annotations

import pytest

from gpudoctor.agent.runtime import _trend_mib_per_100_steps

MIB = 1024 * 1024


def test_growth_that_stops_after_warm_up_is_not_a_trend() -> None:
    # 2 GiB appear over the first 30 steps (compile, optimizer state, cuDNN workspaces), then flat
    points = [(s, (s * 70 if s < 30 else 2100) * MIB) for s in range(0, 300, 5)]
    trend = _trend_mib_per_100_steps(points)
    assert trend is not None and abs(trend) < 1.0


def test_steady_leak_is_measured_at_its_rate() -> None:
    points = [(s, (1000 + 2 * s) * MIB) for s in range(0, 300, 5)]   # 2 MiB per step
    assert _trend_mib_per_100_steps(points) == pytest.approx(200.0)


def test_too_few_late_steps_give_no_trend() -> None:
    assert _trend_mib_per_100_steps([(s, s * MIB) for s in range(0, 30, 5)]) is None
    assert _trend_mib_per_100_steps([]) is None
