"""End to end with the real agent: torchrun starts 2 gloo ranks with the agent inside (the
environment ``gpudoctor run`` gives a command); gpudoctor finds both ranks from the launcher's PID,
polls each rank's agent (``RankMonitor``, what the session holds) and names the input-slowed rank through the rules engine.
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
from gpudoctor.model import Source

from .conftest import DDP_JOB

pytestmark = pytest.mark.slow
TORCHRUN = Path(sys.executable).parent / "torchrun"


def kill_tree(proc: subprocess.Popen) -> None:
    """torchrun starts its ranks in sessions of their own: killing its process group misses them."""
    import psutil

    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        victims = []
    os.killpg(proc.pid, signal.SIGKILL)
    for child in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    proc.wait(timeout=10)


@contextlib.contextmanager
def torchrun_job(out: Path, mode: str, with_agents: bool = True) -> Iterator[subprocess.Popen]:
    """torchrun, 2 gloo ranks, rank 1 slowed by ``mode``; with the agent in both ranks (as ``gpudoctor
    run`` starts them) or none (``attach`` injects them). The job registers no comm hook of its own, so
    each rank's agent registers one and measures the collective wait itself."""
    pytest.importorskip("torch")
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    from gpudoctor.commands.run import agent_env

    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(DDP_JOB), "--launcher", "env",
           "--mode", mode, "--steps", "5000", "--out", str(out), "--comm-timer", "none"]
    env = agent_env(dict(os.environ)) if with_agents else dict(os.environ)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180  # torch start-up on a loaded 2-core machine can be slow
        while not all((out / f"rank{r}.jsonl").exists() for r in (0, 1)) and time.time() < deadline:
            time.sleep(0.3)
        yield proc
    finally:
        kill_tree(proc)


@pytest.fixture(scope="module")
def torchrun_with_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    """Rank 1 slowed by its data loading."""
    with torchrun_job(tmp_path_factory.mktemp("e2e"), "input") as proc:
        yield proc


def poll_until_gd601(monitor: RankMonitor, timeout_s: float = 60.0) -> list:
    findings: list = []
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        factsets = monitor.evaluate(time.time())
        findings = evaluate(load_catalog().select(["GD601"], []), factsets, [Source.LIVE]).findings
        if findings:
            break
        time.sleep(1.0)
    return findings


def test_attach_to_a_plain_torchrun_injects_every_rank_and_names_the_compute_straggler(tmp_path: Path) -> None:
    """A job started without gpudoctor: ``attach <torchrun pid> --profile 3`` injects an agent into each
    rank (not the launcher), the agents' comm hooks measure the collective wait — rank 0 waits for rank 1,
    which has extra compute — so GD601 names rank 1, cause compute; the profile window on both ranks is
    analysed as a set; the agents are detached at the end and the job runs on."""
    with torchrun_job(tmp_path, "compute", with_agents=False) as proc:
        gpudoctor = Path(sys.executable).parent / "gpudoctor"
        # 40 s: on a loaded 2-core machine the two injections alone can take 15 s, and GD601 needs
        # min_slow_windows (3) judged windows after that
        out = subprocess.run([str(gpudoctor), "attach", str(proc.pid), "--duration", "40", "--window", "2",
                              "--profile", "3", "--no-stacks", "--format", "json", "--select", "GD601,GD610"],
                             capture_output=True, text=True, timeout=200)
        report = json.loads(out.stdout)
        # the live finding and the profile window's post-hoc one are about the same rank: merged into
        # one (the trace's kept, the live source listed beside it)
        live = [f for f in report["findings"] if "live" in f["sources"]]
        assert [(f["code"], f["location"]["rank"]) for f in live] == [("GD601", 1)], report["findings"]
        assert "(compute)" in live[0]["message"] or "(cpu)" in live[0]["message"], live[0]["message"]
        rows = {row["rank"]: row for t in report["tables"] if t.get("key") == "ranks" for row in t["rows"]}
        assert rows[0]["collective_wait_pct"] > 2 * rows[1]["collective_wait_pct"], rows
        assert "launches the job's ranks" in report["agent"]["detail"]
        profile = report["rank_profile"]
        assert profile["status"].startswith("analysed 2"), profile
        waits = {r["rank"]: r["collective_wait_ms_p50"] for r in profile["ranks"]}
        assert waits[0] > waits[1], profile              # the trace tells the same story
        assert proc.poll() is None, "attaching must leave the job running"
        from gpudoctor.agent.client import find_agent
        assert all(find_agent(int(r["pid"])) is None for r in rows.values()), "injected agents must be detached"


def test_attach_to_launcher_names_the_input_straggler(torchrun_with_agents: subprocess.Popen) -> None:
    proc = torchrun_with_agents
    monitor = RankMonitor.for_target(proc.pid, window_s=2.0)  # what the live session holds
    assert monitor is not None and [r.rank for r in monitor.group.ranks] == [0, 1]
    assert monitor.group.launcher_pid == proc.pid
    try:
        findings = poll_until_gd601(monitor)
        assert [(f.code, f.location.rank) for f in findings] == [("GD601", 1)], monitor.table
        assert "(input)" in findings[0].message
        rows = {row["rank"]: row for row in monitor.table}
        assert rows[1]["data_wait_pct"] > 30 > rows[0]["data_wait_pct"]
        assert rows[0]["steps_total"] > 0 and rows[1]["steps_total"] > 0
    finally:
        monitor.close()


def test_gpudoctor_attach_to_torchrun_reports_the_straggler(torchrun_with_agents: subprocess.Popen) -> None:
    """The whole path a user takes: ``gpudoctor attach <torchrun pid> --duration … --format json``."""
    proc = torchrun_with_agents
    gpudoctor = Path(sys.executable).parent / "gpudoctor"
    out = subprocess.run([str(gpudoctor), "attach", str(proc.pid), "--duration", "16", "--window", "2",
                          "--no-agent", "--no-stacks", "--format", "json", "--select", "GD601,GD610"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # findings at warning or above
    report = json.loads(out.stdout)
    found = [(f["code"], f["location"].get("rank")) for f in report["findings"]]
    assert found == [("GD601", 1)], report["findings"]
    assert "(input)" in report["findings"][0]["message"]
    assert proc.poll() is None, "attaching must leave the job running"
