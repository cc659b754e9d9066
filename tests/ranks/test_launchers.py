"""Rank discovery on every common launcher, from the launcher, each rank and each DataLoader worker.

Real launchers where they are installed: Lightning's ``ddp`` (the script is rank 0 and re-launches
itself with ``LOCAL_RANK`` for the others) and ``ddp_spawn``, ``accelerate launch`` (wraps torchrun);
both are optional (not gpudoctor dependencies): the tests skip when they are missing. Always: a plain
parent that forks its ranks (no rank variable visible), and a single process whose ``spawn``-context
DataLoader workers look like ``mp.spawn`` ranks but are not. torchrun and ``mp.spawn`` are in
``test_discovery.py`` and ``test_spawn_end_to_end.py``.

The process table's roles must agree: ranks are "rank", their workers "dataloader".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpudoctor.live.process import ProcessCollector
from gpudoctor.live.ranks import discover_ranks

from .conftest import DDP_JOB, HERE

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _pid_of(out: Path, rank: int) -> int | None:
    """The PID a rank wrote: ``rank<r>.pid``, or the first step row of ``ddp_job.py``'s ``rank<r>.jsonl``."""
    for name in (f"rank{rank}.pid", f"rank{rank}.jsonl"):
        f = out / name
        text = f.read_text().splitlines() if f.exists() else []
        if text and text[0].strip():
            return int(text[0]) if name.endswith(".pid") else int(json.loads(text[0])["pid"])
    return None


def _pids(out: Path, n: int, timeout_s: float = 180.0) -> dict[int, int]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = {r: pid for r in range(n) if (pid := _pid_of(out, r)) is not None}
        if len(found) == n:
            time.sleep(2.0)  # let every DataLoader worker start
            return found
        time.sleep(0.3)
    raise AssertionError(f"the job's ranks did not start training in time ({sorted(out.iterdir())})")


@contextlib.contextmanager
def _job(cmd: list[str], out: Path, n: int = 2) -> Iterator[tuple[int, dict[int, int]]]:
    pytest.importorskip("torch")
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc.pid, _pids(out, n)
    finally:  # accelerate's torchrun starts its ranks in sessions of their own: the group misses them
        victims = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        os.killpg(proc.pid, signal.SIGKILL)
        for child in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        proc.wait(timeout=10)


def _assert_found_from_everywhere(launcher: int, truth: dict[int, int]) -> None:
    """From the launcher, every rank and every rank's DataLoader worker: the same ranks, and the
    launcher's process table calls the ranks "rank" and their workers "dataloader"."""
    workers = [c.pid for pid in truth.values() for c in psutil.Process(pid).children()
               if "resource_tracker" not in " ".join(c.cmdline()) and c.pid not in truth.values()]
    assert workers, "each rank should have a DataLoader worker"
    for pid in (launcher, *truth.values(), *workers):
        group = discover_ranks(pid)
        assert {r.rank: r.pid for r in group.ranks} == truth, (pid, group)
    collector = ProcessCollector(launcher)
    collector.sample()
    roles = {w.pid: w.role for w in collector.sample().workers}
    roles[launcher] = "rank" if launcher in truth.values() else "launcher"
    assert all(roles[p] == "rank" for p in truth.values()), roles
    assert all(roles[w] == "dataloader" for w in workers), roles


@pytest.fixture
def lightning_cmd() -> list[str]:
    pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning)")
    return [sys.executable, str(HERE / "lightning_job.py"), "--workers", "1"]


def test_lightning_ddp_rank0_is_the_launcher(tmp_path: Path, lightning_cmd: list[str]) -> None:
    with _job([*lightning_cmd, "--strategy", "ddp", "--out", str(tmp_path)], tmp_path) as (launcher, truth):
        assert truth[0] == launcher  # Lightning's ddp: the script itself trains as rank 0
        _assert_found_from_everywhere(launcher, truth)


def test_lightning_ddp_spawn(tmp_path: Path, lightning_cmd: list[str]) -> None:
    """ddp_spawn's ranks use spawn-context DataLoader workers: same command line as the ranks."""
    with _job([*lightning_cmd, "--strategy", "ddp_spawn", "--out", str(tmp_path)], tmp_path) as (launcher, truth):
        _assert_found_from_everywhere(launcher, truth)
        assert all(r.rank_source == "spawn-order" for r in discover_ranks(launcher).ranks)


def test_accelerate_launch(tmp_path: Path) -> None:
    pytest.importorskip("accelerate", reason="accelerate is not installed (pip install accelerate)")
    cmd = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", str(DDP_JOB), "--launcher", "env",
           "--steps", "5000", "--step-sleep-ms", "20", "--workers", "1", "--out", str(tmp_path)]
    with _job(cmd, tmp_path) as (launcher, truth):
        _assert_found_from_everywhere(launcher, truth)
        assert all(r.rank_source == "env" for r in discover_ranks(launcher).ranks)


def test_plain_parent_that_forks_its_ranks(tmp_path: Path) -> None:
    """No rank variable is visible in /proc (set after the fork), no spawn command line: the ranks'
    process groups are what tells them from the DataLoader workers they fork in turn."""
    cmd = [sys.executable, str(HERE / "fork_job.py"), "--shape", "fork", "--out", str(tmp_path)]
    with _job(cmd, tmp_path) as (launcher, truth):
        for pid in truth.values():
            assert "RANK" not in psutil.Process(pid).environ()
        group = discover_ranks(launcher)
        assert {r.rank: r.pid for r in group.ranks} == truth and group.launcher_pid == launcher
        assert discover_ranks(truth[1]).pids == group.pids
        collector = ProcessCollector(launcher)
        collector.sample()
        roles = {w.pid: w.role for w in collector.sample().workers}
        assert roles[truth[0]] == roles[truth[1]] == "rank", roles


def test_spawn_context_workers_of_one_process_are_not_ranks(tmp_path: Path) -> None:
    """The trap the other way: two ``spawn_main`` children, but no process group anywhere."""
    cmd = [sys.executable, str(HERE / "fork_job.py"), "--shape", "single", "--out", str(tmp_path)]
    with _job(cmd, tmp_path, n=1) as (pid, _):
        workers = [c for c in psutil.Process(pid).children() if "spawn_main" in " ".join(c.cmdline())
                   and "resource_tracker" not in " ".join(c.cmdline())]
        assert len(workers) == 2
        group = discover_ranks(pid)
        assert group.pids == (pid,) and not group.is_distributed, group
        collector = ProcessCollector(pid)
        collector.sample()
        roles = {w.pid: w.role for w in collector.sample().workers}
        assert all(roles[w.pid] == "dataloader" for w in workers), roles
