"""GD613 on a real hang: torchrun starts 2 gloo ranks with the agent inside (as ``gpudoctor run`` does);
rank 1 then blocks on I/O before an all-reduce and rank 0 waits inside it. gpudoctor finds both ranks
from the launcher's PID and polls their agents (``RankMonitor``, what the live session holds).

The job is watched while it trains (no finding: the ranks progress), then told to hang; GD613 must
fire once no step came for ``hang_after_s`` (3 s here, to keep the test short), with both ranks at
the same step, and GD610 must not (the step counts agree).
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

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.rankwatch import RankMonitor
from gpudoctor.live.rankwhere import where_ranks
from gpudoctor.live.stragglers import rank_factsets
from gpudoctor.model import Source

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
HANG_JOB = HERE / "hang_job.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
HANG_AFTER_S = 3.0


def _kill_tree(proc: subprocess.Popen) -> None:
    """torchrun starts its ranks in sessions of their own: kill them by PID, then the launcher."""
    import psutil

    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        victims = []
    for child in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


class HangJobs:
    """torchrun hang jobs for this module: one is shared while it fits (torch start-up on 3 processes
    is the slow part); a test that must watch the job train before it hangs gets a fresh one once the
    shared job was told to hang."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.current: tuple[subprocess.Popen, Path] | None = None
        self.started: list[subprocess.Popen] = []

    def get(self, training: bool) -> tuple[subprocess.Popen, Path]:
        if self.current is not None:
            proc, out = self.current
            if proc.poll() is None and not (training and (out / "hang").exists()):
                return self.current
        self.current = self._start()
        return self.current

    def _start(self) -> tuple[subprocess.Popen, Path]:
        from gpudoctor.commands.run import agent_env

        out = self.tmp_path_factory.mktemp("hang_job")
        cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(HANG_JOB), "--out", str(out)]
        proc = subprocess.Popen(cmd, env=agent_env(dict(os.environ)), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started.append(proc)
        deadline = time.time() + 180  # torch start-up on a loaded 2-core machine can be slow
        while time.time() < deadline and not all(_last_step(out, r) >= 20 for r in (0, 1)):
            assert proc.poll() is None, "the job exited before it trained"
            time.sleep(0.3)
        return proc, out

    def close(self) -> None:
        for proc in self.started:
            _kill_tree(proc)


@pytest.fixture(scope="module")
def hang_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HangJobs]:
    pytest.importorskip("torch")
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    jobs = HangJobs(tmp_path_factory)
    try:
        yield jobs
    finally:
        jobs.close()


def _last_step(out: Path, rank: int) -> int:
    try:
        lines = (out / f"rank{rank}.jsonl").read_text().splitlines()
    except OSError:
        return 0
    return json.loads(lines[-1])["step"] if lines else 0


def _judge(monitor: RankMonitor) -> tuple[list, list]:
    factsets = monitor.evaluate(time.time())
    options = {"GD613": {"hang_after_s": HANG_AFTER_S}, "GD610": {"min_stall_s": HANG_AFTER_S}}
    result = evaluate(load_catalog().select(["GD610", "GD613"], []), factsets, [Source.LIVE], options)
    return [f for f in result.findings if f.code == "GD613"], [f for f in result.findings if f.code == "GD610"]


def test_ranks_hung_in_a_collective_are_reported(hang_jobs: HangJobs) -> None:
    proc, out = hang_jobs.get(training=True)
    monitor = RankMonitor.for_target(proc.pid, window_s=1.0)
    assert monitor is not None and [r.rank for r in monitor.group.ranks] == [0, 1]
    try:
        # Training: the ranks move, nothing is hung — for longer than hang_after_s.
        start = time.time()
        while time.time() - start < 2 * HANG_AFTER_S:
            hung, desync = _judge(monitor)
            assert not hung and not desync, [f.message for f in hung + desync]
            time.sleep(0.5)
        rows = {row["rank"]: row for row in monitor.table}
        assert all(row["steps_total"] and row["steps_total"] >= 20 for row in rows.values()), rows
        (out / "hang").touch()
        hung_at = time.time()
        hung = []
        while not hung and time.time() - hung_at < 60:
            time.sleep(0.5)
            hung, desync = _judge(monitor)
            assert not desync, [f.message for f in desync]
        assert len(hung) == 1, monitor.table
        evidence = {e.name: e.value for e in hung[0].evidence}
        # Both ranks stopped at the very step rank 1 blocked after (the one each wrote last).
        step = _last_step(out, 1)
        assert _last_step(out, 0) == step and evidence["max_steps_total"] == step
        assert f"at step {step}" in hung[0].message
        assert evidence["stalled_s"] >= HANG_AFTER_S
        assert f"rank 0: step {step}" in evidence["steps_by_rank"]
        assert f"rank 1: step {step}" in evidence["steps_by_rank"]
        assert 0 < evidence["recent_step_time_s"] < 1.0  # the job stepped in well under a second
        # Where each rank is (one py-spy dump each, as the session would add once stalled):
        # rank 1 blocked in its read, rank 0 inside the all-reduce waiting for it.
        where = where_ranks({r.rank: r.pid for r in monitor.group.ranks if r.rank is not None})
        if not where:
            pytest.skip("py-spy cannot read the ranks here (not installed, or no ptrace permission)")
        assert where[1].startswith("block_on_io (hang_job.py:"), where  # the culprit, in its own code
        assert where[0].startswith("all_reduce (") and " from main (hang_job.py:" in where[0], where
        report = monitor.tracker.update(monitor.watch.poll(time.time()), time.time(), where=where)
        options = {"GD613": {"hang_after_s": HANG_AFTER_S}}
        (f,) = evaluate(load_catalog().select(["GD613"], []), rank_factsets(report), [Source.LIVE], options).findings
        shown = {e.name: e.value for e in f.evidence}["where_by_rank"]
        assert shown == f"rank 0: {where[0]}; rank 1: {where[1]}"
        assert proc.poll() is None, "watching must leave the job alone"
    finally:
        monitor.close()


def test_gpudoctor_attach_to_a_hung_torchrun_job(hang_jobs: HangJobs, tmp_path: Path) -> None:
    """The user's path: the job is already hung when ``gpudoctor attach <torchrun pid> --duration``
    starts (the job the test above hung, when it ran); the report names the hang (GD613, not GD610)
    and shows both ranks in its Ranks table."""
    proc, out = hang_jobs.get(training=False)
    (out / "hang").touch()
    time.sleep(1.0)
    config = tmp_path / "gpudoctor.toml"
    config.write_text(f"[options.GD613]\nhang_after_s = {HANG_AFTER_S}\n")
    gpudoctor = Path(sys.executable).parent / "gpudoctor"
    done = subprocess.run([str(gpudoctor), "attach", str(proc.pid), "--duration", "8", "--window", "1",
                           "--no-agent", "--no-stacks", "--format", "json", "--select", "GD610,GD613",
                           "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # a critical finding
    report = json.loads(done.stdout)
    assert [f["code"] for f in report["findings"]] == ["GD613"], report["findings"]
    step = _last_step(out, 1)
    assert f"at step {step}" in report["findings"][0]["message"]
    (ranks,) = [t for t in report["tables"] if t["key"] == "ranks"]
    rows = {r["rank"]: r for r in ranks["rows"]}
    assert rows[0]["steps_total"] == rows[1]["steps_total"] == step
    assert min(rows[0]["since_last_step_s"], rows[1]["since_last_step_s"]) >= HANG_AFTER_S
    assert proc.poll() is None, "attaching must leave the job running"
