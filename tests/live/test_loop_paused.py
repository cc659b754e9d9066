"""GD101 live does not judge a window in which a loop that stepped before counts no step.

The timm ResNet-50 benchmark (bf16, compiled, 94% busy in its profiled steps on the H200) warned
GD101 from the windows after its last step while the process exited; compiling and evaluation
windows idle the GPU the same way without costing a training step anything.
"""

from __future__ import annotations

import dataclasses
import os
import time

from live_helpers import step_stats

from gpudoctor.agent.protocol import StatsReply, StepStats
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import build_factsets, steps_in_window
from gpudoctor.live.samples import AgentState, GpuSample, ProcessSample
from gpudoctor.live.session import LiveSession
from gpudoctor.model import Source

CATALOG = load_catalog([])


def _gpu(util: float) -> GpuSample:
    fields = {f.name: None for f in dataclasses.fields(GpuSample)}
    fields.update(index=0, name="H200", timestamp=100.0, util_pct=util, target_pids=(10,), other_pids=(),
                  throttle_reasons=())
    return GpuSample(**fields)  # type: ignore[arg-type]


def _steps(total: int) -> StepStats:
    return step_stats(steps_total=total, window_steps=min(total, 8))


def _gd101(steps: StepStats | None, counted: int | None) -> list[str]:
    factsets = build_factsets(10, [[_gpu(5.0)]], None, None, None, steps, 30.0, counted)
    return [f.code for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings if f.code == "GD101"]


def test_an_idle_gpu_while_the_loop_steps_is_judged() -> None:
    assert _gd101(_steps(500), 12) == ["GD101"]


def test_an_idle_gpu_while_a_loop_that_stepped_counts_no_step_is_not_judged() -> None:
    assert _gd101(_steps(500), 0) == []


def _gd101_process(started_s_ago: float | None, steps_total: int) -> list[str]:
    proc = ProcessSample(timestamp=1000.0, pid=10, alive=True,
                         started_at=None if started_s_ago is None else 1000.0 - started_s_ago)
    factsets = build_factsets(10, [[_gpu(5.0)]], proc, None, None, _steps(steps_total), 30.0, 0)
    return [f.code for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings if f.code == "GD101"]


def test_a_young_process_whose_agent_counted_no_step_yet_is_starting_not_judged() -> None:
    # The plain torchvision ResNet-50 loop, fp32 eager (H200, tests/data/gpu_runs/h200-realscripts-6/):
    # GD101 from the start-up before its first step, 99% busy once it stepped.
    assert _gd101_process(20.0, 0) == []
    assert _gd101_process(600.0, 0) == ["GD101"]   # attached to an old process: no step seen is judged
    assert _gd101_process(None, 0) == ["GD101"]    # its start is unknown


def test_before_the_first_step_or_without_an_agent_nvml_alone_still_judges() -> None:
    assert _gd101(_steps(0), 0) == ["GD101"]      # no step ever seen, no process readings: may not be detectable
    assert _gd101(None, None) == ["GD101"]        # no agent at all
    assert _gd101(_steps(500), None) == ["GD101"]  # polls too short to tell


def test_steps_in_window_counts_from_the_last_poll_before_the_window() -> None:
    polls = [(90.0, 100), (95.0, 150), (100.0, 200), (105.0, 200), (110.0, 200)]
    assert steps_in_window(polls, now=110.0, window_s=12.0) == 50    # from the poll at 95 s (150) to 200
    assert steps_in_window(polls, now=110.0, window_s=10.0) == 0     # the last step was counted by 100 s
    assert steps_in_window(polls, now=110.0, window_s=30.0) is None  # polls start at 90 s
    assert steps_in_window(polls, now=125.0, window_s=10.0) is None  # no poll since 110 s: the agent went quiet


def _reply(at: float, total: int) -> StatsReply:
    return StatsReply(StepStats(timestamp=at, steps_total=total, window_steps=1), recent_step_times_ms=(25.0,))


class _Link:
    """Stands in for AgentLink: the raw stats reply the session keeps polls from."""

    def __init__(self) -> None:
        self.last_stats: StatsReply | None = None
        self.steps = None

    def state(self) -> AgentState:
        return AgentState(status="connected")

    def close(self) -> None:
        pass


def test_the_session_counts_steps_per_window_from_fresh_replies_only() -> None:
    session = LiveSession(os.getpid(), CATALOG, agent="off", use_stacks=False, window_s=10.0)
    link = _Link()
    session._agent = link  # type: ignore[assignment]
    now = time.time()
    for at, total in [(now - 12, 100), (now - 8, 140), (now - 4, 180), (now - 1, 220)]:
        link.last_stats = _reply(at, total)
        session._keep_step_samples()
    assert steps_in_window(session._step_totals, now, 10.0) == 120
    for _ in range(5):  # the agent stopped answering: the link keeps its last reply, polled again
        session._keep_step_samples()
    assert len(session._step_totals) == 4
    assert steps_in_window(session._step_totals, now + 20, 10.0) is None  # unknown, not "paused"
    session.close()


def test_a_window_in_which_gpudoctors_own_profile_window_ran_is_not_judged() -> None:
    # A plain torchvision ResNet-50 loop (H200, tests/data/gpu_runs/h200-realscripts-5/): 99% busy in its
    # profiled steps, yet GD101 warned from the windows of the profile window and its export.
    factsets = build_factsets(10, [[_gpu(5.0)]], None, None, None, _steps(500), 30.0, 12, profiling=True)
    assert [f.code for f in evaluate(CATALOG, factsets, [Source.LIVE]).findings if f.code == "GD101"] == []


class _ProfilingLink(_Link):
    def __init__(self) -> None:
        super().__init__()
        self.profile_state: object = None

    def state(self) -> AgentState:
        return AgentState(status="connected", profile_state=self.profile_state)  # type: ignore[arg-type]


def test_the_session_marks_windows_up_to_one_window_after_its_profile_window_ended() -> None:
    from gpudoctor.live.samples import ProfileState

    session = LiveSession(os.getpid(), CATALOG, agent="off", use_stacks=False, window_s=2.0)
    link = _ProfilingLink()
    session._agent = link  # type: ignore[assignment]
    link.last_stats = _reply(time.time(), 10)
    assert session._profile_busy_at is None
    link.profile_state = ProfileState.RECORDING
    session._keep_step_samples()
    seen = session._profile_busy_at
    assert seen is not None and time.time() - seen < 1.0
    for later in (ProfileState.ANALYSING, ProfileState.DONE):   # the job runs unhindered again
        link.profile_state = later
        session._keep_step_samples()
        assert session._profile_busy_at == seen   # the last busy poll is kept, not moved
    session.close()
