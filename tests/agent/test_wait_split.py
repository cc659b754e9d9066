"""The agent splits the loop's data wait by cause (issue 36 item 1), measured in real CPU loops
(tests/agent/input_wait_loop.py), and GD102's estimate counts only the parts more workers remove."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from agent_helpers import HERE, REPO

from gpudoctor.agent.protocol import from_wire
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import ProcessSample, StepStats
from gpudoctor.model import Source


def _stats(mode: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, str(HERE / "input_wait_loop.py"), mode, "5"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def split() -> dict[str, dict[str, Any]]:
    return {mode: _stats(mode) for mode in ("restarted", "persistent", "main", "slow_workers")}


def _parts(stats: dict[str, Any]) -> dict[str, float]:
    return {k: stats[f"data_wait_{k}_ms_per_step"] for k in ("restart", "first", "main", "steady")}


def test_workers_forked_every_epoch_are_the_restart_part(split: dict[str, dict[str, Any]]) -> None:
    parts = _parts(split["restarted"])
    assert split["restarted"]["loader_worker_starts"] >= 2
    assert parts["restart"] > 0.5 and parts["restart"] > parts["steady"] and parts["main"] == 0.0
    persistent = _parts(split["persistent"])
    assert persistent["restart"] == 0.0 and persistent["main"] == 0.0


def test_loading_in_the_loop_is_the_main_part(split: dict[str, dict[str, Any]]) -> None:
    stats = split["main"]
    parts = _parts(stats)
    assert parts["steady"] == parts["restart"] == parts["first"] == 0.0
    wait_ms = stats["data_wait_pct"] / 100 * 1000 / stats["steps_per_s"]
    assert parts["main"] == pytest.approx(wait_ms, rel=0.05)
    # four samples of 2 ms each: one step's batch takes at least 8 ms to load there
    assert stats["loader_main_wait_ms"] >= 8.0 and stats["loader_main_steps"] >= 3


def test_the_dataset_and_the_loaders_line_are_named(split: dict[str, dict[str, Any]]) -> None:
    # input_wait_loop.py builds its loaders after the agent is in, so the construction line is seen
    for stats in split.values():
        assert stats["loader_dataset"].startswith("Timed.__getitem__ (") and "input_wait_loop.py:" in stats["loader_dataset"]
        assert stats["loader_made_at"] and "input_wait_loop.py:" in stats["loader_made_at"]
    lines = (HERE / "input_wait_loop.py").read_text().splitlines()
    made = int(split["main"]["loader_made_at"].rsplit(":", 1)[1])
    assert "DataLoader(" in lines[made - 1]


def test_workers_slower_than_the_loop_are_the_steady_part(split: dict[str, dict[str, Any]]) -> None:
    stats = split["slow_workers"]
    parts = _parts(stats)
    assert parts["steady"] > 3 * (parts["restart"] + parts["first"] + parts["main"])
    # two workers, 24 ms a batch each: the loop runs at their period, 12 ms or more
    assert 2 * stats["loader_steady_step_ms"] >= 24.0


def _gd102_and_gd106(stats: dict[str, Any], cpus: int) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(StepStats)}
    steps = from_wire(StepStats, {k: v for k, v in stats.items() if k in names})
    proc = ProcessSample(time.time(), 10, True, cpu_pct=100.0, cpu_affinity=tuple(range(cpus)))
    factsets = build_factsets(10, [], proc, None, None, steps, 10.0)
    return {f.code: f for f in evaluate(load_catalog(), factsets, [Source.LIVE]).findings}


def test_restarts_go_to_gd106_not_to_gd102s_estimate(split: dict[str, dict[str, Any]]) -> None:
    found = _gd102_and_gd106(split["restarted"], cpus=16)
    assert "GD106" in found and found["GD106"].impact is not None
    gd102 = found.get("GD102")
    if gd102 is not None and gd102.impact is not None:
        # GD102 counts only the steady part: whatever it promises is below GD106's, and its basis says
        # what it left out
        assert gd102.impact.cost_ms_per_step is not None
        assert gd102.impact.cost_ms_per_step <= _parts(split["restarted"])["steady"] + 1e-3  # the impact is rounded to µs
        assert "worker restarts (GD106)" in gd102.impact.basis


def test_loading_in_the_loop_gets_a_narrow_gd102_estimate(split: dict[str, dict[str, Any]]) -> None:
    found = _gd102_and_gd106(split["main"], cpus=16)
    impact = found["GD102"].impact
    assert impact is not None and impact.est_speedup_low > 1.2
    assert impact.est_speedup_high / impact.est_speedup_low <= 1.5
    assert "to load in the training loop" in impact.basis


def test_the_report_states_gpudoctors_own_cpu(split: dict[str, dict[str, Any]]) -> None:
    from gpudoctor.live.report import watcher_cost_note

    # stats() asked from the training thread (input_wait_loop.py) cannot time the agent's own thread
    assert all(s["agent_cpu_pct"] is None for s in split.values())
    note = watcher_cost_note(0.5, 10.0)
    assert note is not None and "of one core in the target" in note and "CPUs" in note
    assert watcher_cost_note(None, None) is None
