"""Injection into a loop whose threads come and go: a DataLoader without persistent workers starts
two worker processes and their queue-feeder threads at every epoch (8 steps here) and ends them at
its end. Choosing one of those threads and attaching to it after it exited failed every time
(``PTRACE_ATTACH: No such process``, 3 of 3 tries); the injector now chooses settled threads first and
chooses again when the one it stopped is gone."""

from __future__ import annotations

import time

import pytest
from agent_helpers import Target, agent_threads

from gpudoctor.agent.inject import MAX_ATTACH_TRIES, WITHOUT_AGENT, _failure, inject

pytest.importorskip("hypno", reason="the optional injector (gpudoctor[inject]) is not installed")

CHURN = ("--workers", "2", "--samples", "64", "--batch", "8", "--fresh-workers", "--load-ms", "1",
         "--compute-ms", "3", "--seconds", "120")


def _threads(pid: int) -> set[int]:
    import os

    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def test_inject_into_a_loop_whose_threads_churn_every_epoch(target_factory: type[Target]) -> None:
    target = target_factory(*CHURN).wait_ready()
    seen: set[int] = set()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:        # the loop really starts new threads every epoch
        seen |= _threads(target.pid)
        time.sleep(0.01)
    assert len(seen) >= 5, seen
    for _attempt in range(3):
        result = inject(target.pid, timeout_s=40)
        assert result.ok, f"{result.reason}\n--- {target.diagnosis()}"
        assert result.client is not None
        deadline = time.monotonic() + 15
        stats = result.client.stats()
        # Until the window holds an epoch boundary: five steps right after injection can all sit inside
        # one 8-step epoch (CI saw window_steps 5, no worker start yet).
        while ((stats.window_steps < 5 or not stats.loader_worker_starts)
               and time.monotonic() < deadline):
            time.sleep(0.2)
            stats = result.client.stats()
        assert stats.window_steps >= 5 and stats.data_wait_pct is not None
        assert (stats.loader_worker_starts or 0) >= 1     # the epochs' worker starts are seen
        result.client.detach()
        deadline = time.monotonic() + 5
        while agent_threads(target.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent_threads(target.pid) == []
        target.wait_steps(10)                             # the loop carries on after each


def test_threads_that_keep_exiting_are_named_with_what_still_stands() -> None:
    import os

    result = _failure(os.getpid(), -3, "InjectorError: PTRACE_ATTACH error : No such process", 10)
    assert not result.ok
    assert f"kept exiting while the injector stopped them ({MAX_ATTACH_TRIES} tries)" in result.reason
    assert WITHOUT_AGENT in result.reason and result.reason.count(". ") == 0   # one sentence
