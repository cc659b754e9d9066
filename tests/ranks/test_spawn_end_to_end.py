"""End to end on ranks started by ``torch.multiprocessing.spawn``, the way pytorch/examples' ImageNet
script starts them with ``--multiprocessing-distributed``: ``init_method="tcp://…"``, so the ranks carry
no ``RANK``/``MASTER_*`` environment, and each rank has a DataLoader worker of its own.

``gpudoctor attach <parent pid>`` must find both ranks from the process tree (not take them for
DataLoader workers), inject an agent into each, and name the rank slowed by extra compute (GD601).
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

from .conftest import DDP_JOB

pytestmark = pytest.mark.slow
GPUDOCTOR = Path(sys.executable).parent / "gpudoctor"


@contextlib.contextmanager
def spawn_job(out: Path, mode: str, *extra: str) -> Iterator[subprocess.Popen]:
    """2 gloo ranks under ``mp.spawn``, rank 1 slowed by ``mode``, no comm hook of the job's own (the
    agents register theirs), one DataLoader worker per rank."""
    pytest.importorskip("torch")
    cmd = [sys.executable, str(DDP_JOB), "--launcher", "spawn", "--init-method", "tcp", "--mode", mode,
           "--steps", "5000", "--workers", "1", "--comm-timer", "none", "--out", str(out), *extra]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180  # torch start-up on a loaded 2-core machine can be slow
        while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size
                      for r in (0, 1)) and time.time() < deadline:
            time.sleep(0.3)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _rank_pids(out: Path) -> dict[int, int]:
    return {r: json.loads((out / f"rank{r}.jsonl").read_text().splitlines()[0])["pid"] for r in (0, 1)}


def test_attach_to_the_spawn_parent_names_the_compute_straggler(tmp_path: Path) -> None:
    with spawn_job(tmp_path, "compute") as proc:
        truth = _rank_pids(tmp_path)
        assert all("RANK" not in (psutil.Process(p).environ()) for p in truth.values())  # the ImageNet shape
        # 40 s: on a loaded 2-core machine the two injections alone can take 15 s, and GD601 needs
        # min_slow_windows (3) judged windows after that
        out = subprocess.run([str(GPUDOCTOR), "attach", str(proc.pid), "--duration", "40", "--window", "2",
                              "--no-stacks", "--format", "json", "--select", "GD601,GD610"],
                             capture_output=True, text=True, timeout=200)
        assert out.stdout, out.stderr
        report = json.loads(out.stdout)
        live = [f for f in report["findings"] if "live" in f["sources"]]
        assert [(f["code"], f["location"]["rank"], f["location"]["pid"]) for f in live] == \
            [("GD601", 1, truth[1])], (report["findings"], report["tables"])
        # extra work; "cpu" only if rank 1 was starved of CPU more than rank 0 (a busy test machine)
        assert "(compute)" in live[0]["message"] or "(cpu)" in live[0]["message"], live[0]["message"]
        tables = {t.get("key"): t["rows"] for t in report["tables"]}
        roles = {row["pid"]: row["role"] for row in tables["processes"]}
        assert roles[truth[0]] == roles[truth[1]] == "rank", roles
        workers = [c.pid for p in truth.values() for c in psutil.Process(p).children()]
        assert workers and all(roles.get(w) == "dataloader" for w in workers), roles
        rows = {row["rank"]: row for row in tables["ranks"]}
        assert rows[1]["status"] == "straggler" and rows[0]["status"] == "ok", rows
        assert rows[0]["steps_total"] > 0 and rows[1]["steps_total"] > 0
        assert rows[0]["collective_wait_pct"] > 2 * rows[1]["collective_wait_pct"], rows
        assert proc.poll() is None, "attaching must leave the job running"
        from gpudoctor.agent.client import find_agent
        assert all(find_agent(pid) is None for pid in truth.values()), "injected agents must be detached"


def test_a_rank_without_an_agent_is_no_data_not_ok(tmp_path: Path) -> None:
    """``--no-agent``: nothing measures the ranks, so neither may read "ok" (a false all-clear)."""
    with spawn_job(tmp_path, "healthy") as proc:
        out = subprocess.run([str(GPUDOCTOR), "attach", str(proc.pid), "--duration", "6", "--window", "2",
                              "--no-agent", "--no-stacks", "--format", "json", "--select", "GD601,GD610"],
                             capture_output=True, text=True, timeout=120)
        report = json.loads(out.stdout)
        rows = [row for t in report["tables"] if t.get("key") == "ranks" for row in t["rows"]]
        assert [r["status"] for r in rows] == ["no data", "no data"], rows
        assert all(r["note"] for r in rows), rows
        assert not [f for f in report["findings"] if f["code"] == "GD601"]


def test_run_starts_an_agent_in_each_spawned_rank_and_watches_rank_0(tmp_path: Path) -> None:
    """``gpudoctor run -- python main.py --multiprocessing-distributed``: the ranks are spawn children
    with no RANK in their environment. The bootstrap starts their agents when they join the process
    group (DataLoader workers, spawn children too, never do), and run watches rank 0, not the parent."""
    pytest.importorskip("torch")
    out_json = tmp_path / "report.json"
    cmd = [str(GPUDOCTOR), "run", "--duration", "25", "--window", "2", "--no-stacks", "--format", "json",
           "-o", str(out_json), "--select", "GD601,GD610", "--",
           sys.executable, str(DDP_JOB), "--launcher", "spawn", "--init-method", "tcp", "--mode", "compute",
           "--steps", "5000", "--workers", "1", "--comm-timer", "none", "--out", str(tmp_path / "job")]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 200
        while not (out_json.exists() and out_json.stat().st_size) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert out_json.exists() and out_json.stat().st_size, proc.stderr.read().decode() if proc.poll() is not None else "no report"
        time.sleep(0.5)   # the report is written in one go; let the writer close it
        report = json.loads(out_json.read_text())
        truth = _rank_pids(tmp_path / "job")
        assert report["target_pid"] == truth[0], (report["target_pid"], truth)
        assert report["steps"] and report["steps"]["steps_total"] > 0, report["notes"]
        rows = {row["rank"]: row for t in report["tables"] if t.get("key") == "ranks" for row in t["rows"]}
        assert set(rows) == {0, 1} and all(r["steps_total"] > 0 for r in rows.values()), rows
        assert all(r["status"] != "no data" for r in rows.values()), rows
        assert [f["location"]["rank"] for f in report["findings"] if f["code"] == "GD601"] == [1], report["findings"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
