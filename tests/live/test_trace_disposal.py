"""Profile traces the session analysed are removed from the agent's private directory (they piled up in
/tmp/gpudoctor-<uid>), unless --keep-traces; a trace elsewhere, or one that could not be analysed, stays."""

from __future__ import annotations

import os
from pathlib import Path

from gpudoctor.agent.paths import ensure_private_dir
from gpudoctor.catalog.catalog import load_catalog
from gpudoctor.live.session import LiveSession


def _session(keep: bool) -> LiveSession:
    return LiveSession(os.getpid(), load_catalog(), agent="off", keep_traces=keep)


def test_analysed_traces_are_removed_unless_kept(tmp_path: Path) -> None:
    private = ensure_private_dir()
    trace = private / f"trace-{os.getpid()}-test-disposal.pt.trace.json"
    trace.write_text("{}")
    try:
        assert _session(keep=False)._dispose_traces([str(trace)], analysed=False) == ""
        assert trace.exists()   # not analysed: the user may want to look at it
        kept = trace.with_name("kept-" + trace.name)
        assert _session(keep=True)._dispose_traces([str(trace)], analysed=True) == f"; kept at {kept}"
        assert kept.exists() and not trace.exists()   # renamed out of the stale sweep's way
        kept.rename(trace)
        note = _session(keep=False)._dispose_traces([str(trace)], analysed=True)
        assert not trace.exists() and "--keep-traces" in note
    finally:
        trace.unlink(missing_ok=True)
        trace.with_name("kept-" + trace.name).unlink(missing_ok=True)
    elsewhere = tmp_path / "trace-1-2.pt.trace.json"
    elsewhere.write_text("{}")
    assert _session(keep=False)._dispose_traces([str(elsewhere)], analysed=True) == ""
    assert elsewhere.exists()   # only the agent's own directory is cleaned


def test_the_sweep_removes_only_old_agent_traces_whose_job_is_gone(tmp_path: Path) -> None:
    """Traces of a watch that was killed before its analysis stayed in /tmp/gpudoctor-<uid> forever."""
    import subprocess
    import sys
    import time

    from gpudoctor.live.tracefiles import STALE_AFTER_S, sweep_stale

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    old = time.time() - STALE_AFTER_S - 60
    names = {"stale": f"trace-{gone}-1700000000000.pt.trace.json",
             "fresh": f"trace-{gone}-1800000000000.pt.trace.json",
             "running": f"trace-{os.getpid()}-1700000000000.pt.trace.json",
             "kept": f"kept-trace-{gone}-1700000000000.pt.trace.json",
             "user": "my-notes.json"}
    for key, name in names.items():
        (tmp_path / name).write_text("{}")
        if key != "fresh":
            os.utime(tmp_path / name, (old, old))
    assert sweep_stale([tmp_path, tmp_path / "absent"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for k, n in names.items() if k != "stale")
