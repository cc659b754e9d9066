"""Step boundaries for loops without a ``torch.optim`` optimizer step, gradient accumulation, and the
time window a profile falls back to when no step boundary comes — on real CPU torch subprocesses."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_helpers import HERE, Target

from gpudoctor.agent.client import AgentClient, find_agent
from gpudoctor.agent.protocol import ProfileState, StepSource, StepStats, WindowKind
from gpudoctor.commands.run import agent_env

MANUAL_LOOP = HERE / "manual_loop.py"


def _start(*args: str, count_cpu_syncs: bool = False) -> Target:
    env = agent_env(dict(os.environ))
    if count_cpu_syncs:
        env["GPUDOCTOR_COUNT_CPU_SYNCS"] = "1"
    target = Target(cmd=[sys.executable, str(MANUAL_LOOP), "--seconds", "90", *args], env=env)
    assert target.ready.wait(90), target.stderr
    return target


@pytest.fixture
def loop() -> Iterator[Callable[..., Target]]:
    started: list[Target] = []

    def make(*args: str, count_cpu_syncs: bool = False) -> Target:
        started.append(_start(*args, count_cpu_syncs=count_cpu_syncs))
        return started[-1]

    yield make
    for t in started:
        t.stop()


def _client(target: Target, timeout_s: float = 30.0) -> AgentClient:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        client = find_agent(target.pid)
        if client is not None:
            return client
        time.sleep(0.1)
    raise AssertionError(f"no agent in the loop: {target.stderr[-2000:]}")


def _stats_when(client: AgentClient, ok: Callable[[StepStats], bool], timeout_s: float = 30.0) -> StepStats:
    deadline = time.monotonic() + timeout_s
    stats = client.stats()
    while not ok(stats) and time.monotonic() < deadline:
        time.sleep(0.2)
        stats = client.stats()
    return stats


def _stats_and_loop_rate(client: AgentClient, target: Target, window_s: float = 3.0) -> tuple[StepStats, float]:
    """The agent's stats over the last ``window_s`` and the loop's own rate over the same seconds,
    once the loop has stepped for longer than that (its first steps are slow warm-up)."""
    deadline = time.monotonic() + 20.0
    while (not target.ticks or time.time() - target.ticks[0][0] < window_s + 1.0) and time.monotonic() < deadline:
        time.sleep(0.1)
    now = time.time()
    stats = client.stats(window_s=window_s)
    return stats, target.rate_over(now - window_s, now)


def test_manual_update_loop_gets_steps_data_wait_and_a_step_profile(loop: Callable[..., Target]) -> None:
    target = loop("--mode", "manual", "--load-ms", "4", "--compute-ms", "3")
    client = _client(target)
    stats = _stats_when(client, lambda s: s.window_steps >= 20 and s.data_wait_pct is not None)
    assert stats.step_source is StepSource.BACKWARD
    stats, rate = _stats_and_loop_rate(client, target)
    assert stats.steps_per_s == pytest.approx(rate, rel=0.3)
    # 4 ms of collate sleep against 3 ms of sleep plus the model per step: a large share is data wait
    assert stats.data_wait_pct is not None and 25 < stats.data_wait_pct < 85
    assert stats.step_time_p50_ms is not None and stats.step_time_p50_ms >= 7.0

    client.profile(steps=3, timeout_s=30)
    done = client.wait_profile(30)
    assert done.status is ProfileState.DONE and done.window is WindowKind.STEPS, done.detail
    assert done.steps_done == 3
    events = json.loads(Path(done.trace_path or "").read_text())["traceEvents"]
    assert sum(str(e.get("name", "")).startswith("ProfilerStep#") for e in events) >= 2
    assert any(e.get("name") == "aten::addmm" for e in events)   # the training thread's CPU ops
    client.close()


def test_gradient_accumulation_counts_optimizer_steps_not_backward_passes(loop: Callable[..., Target]) -> None:
    target = loop("--mode", "accum", "--accum", "4", "--syncs", "2", "--load-ms", "0", "--compute-ms", "2",
                  count_cpu_syncs=True)
    client = _client(target)
    stats = _stats_when(client, lambda s: s.step_source is StepSource.OPTIMIZER and s.window_steps >= 10
                        and (s.sync_sampled_steps or 0) >= 3)
    assert stats.step_source is StepSource.OPTIMIZER
    window, rate = _stats_and_loop_rate(client, target)   # the loop counts one step per optimizer step
    assert window.steps_per_s == pytest.approx(rate, rel=0.3)
    # 4 backward passes × 2 .item() calls per optimizer step
    assert stats.host_syncs_per_step is not None and 7.5 <= stats.host_syncs_per_step <= 9.5
    client.close()


def test_custom_optimizer_that_is_not_torch_optim_is_stepped_by_backward(loop: Callable[..., Target]) -> None:
    target = loop("--mode", "custom", "--load-ms", "0", "--compute-ms", "3")
    client = _client(target)
    stats = _stats_when(client, lambda s: s.window_steps >= 20)
    assert stats.step_source is StepSource.BACKWARD
    window, rate = _stats_and_loop_rate(client, target)
    assert window.steps_per_s == pytest.approx(rate, rel=0.3)
    client.close()


def test_host_syncs_are_counted_per_step_and_cpu_calls_are_not_syncs(loop: Callable[..., Target]) -> None:
    counted = loop("--mode", "manual", "--syncs", "3", "--load-ms", "0", "--compute-ms", "2", count_cpu_syncs=True)
    plain = loop("--mode", "manual", "--syncs", "3", "--load-ms", "0", "--compute-ms", "2")
    for target, low, high in ((counted, 2.9, 3.6), (plain, 0.0, 0.0)):
        client = _client(target)
        stats = _stats_when(client, lambda s: (s.sync_sampled_steps or 0) >= 5)
        assert stats.sync_sampled_steps and stats.sync_sampled_steps >= 5
        assert stats.host_syncs_per_step is not None and low <= stats.host_syncs_per_step <= high, stats
        assert stats.h2d_mib_per_step is None          # no CUDA here: no copy numbers, never made up
        client.close()


def test_loop_that_never_steps_records_a_bounded_time_window_and_says_so(loop: Callable[..., Target]) -> None:
    target = loop("--mode", "never")
    client = _client(target)
    time.sleep(1.0)
    assert client.stats().step_source is StepSource.NONE
    started = time.monotonic()
    client.profile(steps=5, timeout_s=30)
    done = client.wait_profile(30)
    took = time.monotonic() - started
    assert done.status is ProfileState.DONE, done.detail
    assert done.window is WindowKind.TIME and done.window_s == 3.0
    assert "no training step boundary" in done.detail and "time window" in done.detail
    assert took < 20, took                          # 3 s without a step, then a 3 s window (+ export)
    assert Path(done.trace_path or "").is_file()
    assert target.alive()
    client.close()


def test_the_optimizers_unaligned_weights_are_read_at_its_first_step(loop: Callable[..., Target]) -> None:
    """A 50257-way head (GPT-2's vocabulary) is reported by shape; the 32/64-wide layers are not."""
    client = _client(loop("--mode", "accum", "--vocab", "50257"))
    stats = _stats_when(client, lambda s: s.unaligned_weight_shapes is not None)
    assert stats.unaligned_weight_shapes == ("50257x1", "1x50257")
    aligned = _client(loop("--mode", "accum", "--vocab", "50304"))
    assert _stats_when(aligned, lambda s: s.unaligned_weight_shapes is not None).unaligned_weight_shapes == ()
