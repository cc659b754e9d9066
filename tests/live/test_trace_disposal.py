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
        assert _session(keep=True)._dispose_traces([str(trace)], analysed=True) == "; kept"
        assert trace.exists()
        assert _session(keep=False)._dispose_traces([str(trace)], analysed=False) == ""
        assert trace.exists()   # not analysed: the user may want to look at it
        note = _session(keep=False)._dispose_traces([str(trace)], analysed=True)
        assert not trace.exists() and "--keep-traces" in note
    finally:
        trace.unlink(missing_ok=True)
    elsewhere = tmp_path / "trace-1-2.pt.trace.json"
    elsewhere.write_text("{}")
    assert _session(keep=False)._dispose_traces([str(elsewhere)], analysed=True) == ""
    assert elsewhere.exists()   # only the agent's own directory is cleaned
