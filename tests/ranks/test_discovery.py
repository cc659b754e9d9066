"""Rank discovery on real launchers: torchrun and torch.multiprocessing.spawn, 2 gloo ranks on the CPU.

Each rank of ``ddp_job.py`` writes its own PID into its step rows, so the test knows the truth.
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

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live.ranks import discover_ranks, rank_from_env, read_environ

from .conftest import DDP_JOB

pytestmark = pytest.mark.slow
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _rank_pids(out: Path, timeout_s: float = 180.0) -> dict[int, int]:
    """rank → pid, read from the rows the ranks write once they train."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = {}
        for r in (0, 1):
            f = out / f"rank{r}.jsonl"
            lines = f.read_text().splitlines() if f.exists() else []
            if lines:
                found[r] = json.loads(lines[0])["pid"]
        if len(found) == 2:
            return found
        time.sleep(0.2)
    raise AssertionError("the DDP ranks did not start training in time")


def _start(cmd: list[str], out: Path) -> Iterator[tuple[subprocess.Popen, dict[int, int]]]:
    pytest.importorskip("torch")
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc, _rank_pids(out)
    finally:  # torchrun starts its ranks in sessions of their own: its process group misses them
        victims = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        os.killpg(proc.pid, signal.SIGKILL)
        for child in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def torchrun_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen, dict[int, int]]]:
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    out = tmp_path_factory.mktemp("torchrun")
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(DDP_JOB), "--launcher", "env",
           "--steps", "2000", "--step-sleep-ms", "20", "--workers", "1", "--out", str(out)]
    yield from _start(cmd, out)


@pytest.fixture(scope="module")
def spawn_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen, dict[int, int]]]:
    out = tmp_path_factory.mktemp("spawn")
    cmd = [sys.executable, str(DDP_JOB), "--launcher", "spawn", "--steps", "2000", "--step-sleep-ms", "20",
           "--out", str(out)]
    yield from _start(cmd, out)


def test_torchrun_launcher_pid_finds_both_ranks(torchrun_job) -> None:
    launcher, truth = torchrun_job
    group = discover_ranks(launcher.pid)
    assert {r.rank: r.pid for r in group.ranks} == truth
    assert group.world_size == 2 and group.launcher_pid == launcher.pid
    assert all(r.rank_source == "env" and r.local_rank == r.rank for r in group.ranks)


def test_torchrun_any_rank_pid_finds_its_siblings(torchrun_job) -> None:
    launcher, truth = torchrun_job
    for pid in truth.values():
        group = discover_ranks(pid)
        assert {r.rank: r.pid for r in group.ranks} == truth
        assert group.launcher_pid == launcher.pid


def test_dataloader_workers_inherit_rank_env_but_are_not_ranks(torchrun_job) -> None:
    launcher, truth = torchrun_job
    workers = [c for pid in truth.values() for c in psutil.Process(pid).children()]
    assert workers, "each rank should have a DataLoader worker"
    env = read_environ(workers[0].pid)
    assert env is not None and rank_from_env(env) is not None  # the trap: same RANK variable
    group = discover_ranks(workers[0].pid)
    assert {r.rank: r.pid for r in group.ranks} == truth


def test_spawn_parent_and_child_find_both_ranks(spawn_job) -> None:
    parent, truth = spawn_job
    for pid in (parent.pid, truth[1]):
        group = discover_ranks(pid)
        assert {r.rank: r.pid for r in group.ranks} == truth
        assert group.launcher_pid == parent.pid
        assert all(r.rank_source == "spawn-order" for r in group.ranks)
        assert any("start order" in n for n in group.notes)


def test_single_process_is_a_group_of_one() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        group = discover_ranks(proc.pid)
        assert group.pids == (proc.pid,) and group.ranks[0].rank is None and not group.is_distributed
    finally:
        proc.kill()
        proc.wait()


def test_missing_pid_is_a_user_error() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(UserError) as err:
        discover_ranks(proc.pid)
    assert err.value.code == ExitCode.NO_SUCH_PROCESS
