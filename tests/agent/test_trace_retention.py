"""The agent's profile traces do not pile up: a process keeps its last few, exited processes' old
traces are swept, and nothing that is not an agent trace is touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpudoctor.agent.profiling import DEAD_PROCESS_TRACE_MAX_AGE_S, prune_traces


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_prune_keeps_the_newest_traces_of_this_process(tmp_path: Path) -> None:
    pid = os.getpid()
    for stamp in (100, 300, 200, 400):
        (tmp_path / f"trace-{pid}-{stamp}.pt.trace.json").write_text("{}")
    other = tmp_path / "notes.txt"
    other.write_text("user file")
    deleted = prune_traces(tmp_path, pid, keep=2)
    assert sorted(deleted) == [f"trace-{pid}-100.pt.trace.json", f"trace-{pid}-200.pt.trace.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["notes.txt", f"trace-{pid}-300.pt.trace.json", f"trace-{pid}-400.pt.trace.json"])


def test_old_traces_of_exited_processes_are_swept_recent_ones_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    old = tmp_path / f"trace-{dead}-1.pt.trace.json"
    recent = tmp_path / f"trace-{dead}-2.pt.trace.json"
    alive_old = tmp_path / f"trace-{os.getppid()}-3.pt.trace.json"   # a live process: never swept
    for path in (old, recent, alive_old):
        path.write_text("{}")
    week_ago = time.time() - DEAD_PROCESS_TRACE_MAX_AGE_S - 60
    os.utime(old, (week_ago, week_ago))
    os.utime(alive_old, (week_ago, week_ago))
    deleted = prune_traces(tmp_path, os.getpid())
    assert deleted == [old.name]
    assert recent.exists() and alive_old.exists()
