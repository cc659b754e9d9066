"""The automatic profile window's warm-up gate (gpudoctor.live.warmup), fed the agent's step stats."""

from __future__ import annotations

from gpudoctor.live.warmup import MAX_WAIT_S, MIN_STEPS, STEPS_AFTER_COMPILE, WarmUpGate


def test_eager_loop_is_ready_after_min_steps() -> None:
    gate = WarmUpGate()
    assert not gate.ready(steps_total=2, window_steps=2, unique_graphs=None, now=0.0)
    assert gate.ready(steps_total=MIN_STEPS, window_steps=MIN_STEPS, unique_graphs=None, now=1.0)
    assert gate.reason == ""


def test_compiled_loop_waits_for_steps_after_the_last_new_graph() -> None:
    gate = WarmUpGate()
    assert not gate.ready(steps_total=3, window_steps=3, unique_graphs=1, now=0.0)  # compiled at step 3
    assert "0 of 8 steps" in gate.reason
    assert not gate.ready(steps_total=6, window_steps=6, unique_graphs=2, now=1.0)  # a second graph (a recompile)
    assert not gate.ready(steps_total=6 + STEPS_AFTER_COMPILE - 1, window_steps=10, unique_graphs=2, now=2.0)
    assert gate.ready(steps_total=6 + STEPS_AFTER_COMPILE, window_steps=10, unique_graphs=2, now=2.5)
    assert gate.reason == ""


def test_a_loop_that_keeps_compiling_is_profiled_after_the_longest_wait() -> None:
    gate = WarmUpGate()
    for k in range(3, 40):
        ready = gate.ready(steps_total=k, window_steps=k, unique_graphs=k, now=float(k))  # a new graph every step
        if k - 3 < MAX_WAIT_S:
            assert not ready
    assert gate.ready(steps_total=100, window_steps=100, unique_graphs=100, now=3.0 + MAX_WAIT_S)
    assert "profiled anyway" in gate.reason


def test_attached_late_to_a_compiled_loop_waits_a_few_steps_from_the_first_look() -> None:
    gate = WarmUpGate()
    assert not gate.ready(steps_total=5000, window_steps=50, unique_graphs=4, now=0.0)
    assert gate.ready(steps_total=5000 + STEPS_AFTER_COMPILE, window_steps=50, unique_graphs=4, now=0.5)
