"""Profile traces are analysed in a child interpreter: same findings as in-process, one sentence
(and no hang) for a file that is not a trace or an analysis that takes too long."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.live.profileanalysis import analyze_profile_traces
from gpudoctor.pipeline import analyze_paths

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
RANKS = TRACES / "public" / "hta" / "trace_filter"


def test_child_gives_the_same_report_as_in_process() -> None:
    if not RANKS.is_dir():
        pytest.skip(f"{RANKS} is not here")
    catalog = load_catalog()
    paths = [str(p) for p in sorted(RANKS.glob("*.json.gz"))]
    report, why = analyze_profile_traces(paths, catalog, {})
    assert why is None and report is not None
    here = analyze_paths(paths, catalog=catalog, options={})
    assert [(f.code, f.location.rank) for f in report.findings] == [(f.code, f.location.rank) for f in here.findings]
    assert [r["idle_pct"] for r in report.data["ranks"]] == [r["idle_pct"] for r in here.data["ranks"]]


def test_a_file_that_is_not_a_trace_gives_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text(json.dumps({"hello": "world"}))
    report, why = analyze_profile_traces([str(bad)], load_catalog(), {})
    assert report is None and why and "\n" not in why


def test_a_slow_analysis_is_stopped(tmp_path: Path) -> None:
    if not RANKS.is_dir():
        pytest.skip(f"{RANKS} is not here")
    paths = [str(p) for p in sorted(RANKS.glob("*.json.gz"))]
    report, why = analyze_profile_traces(paths, load_catalog(), {}, timeout_s=0.01)
    assert report is None and why is not None and "longer than" in why


def test_works_from_a_parent_whose_main_module_cannot_be_reimported() -> None:
    """A REPL or ``python -`` parent: a multiprocessing 'spawn' child would fail to re-run ``__main__``
    and leave the parent waiting; the analysis child is a fresh interpreter and does not care."""
    if not RANKS.is_dir():
        pytest.skip(f"{RANKS} is not here")
    import subprocess
    import sys

    code = ("from gpudoctor.catalog import load_catalog\n"
            "from gpudoctor.live.profileanalysis import analyze_profile_traces\n"
            f"report, why = analyze_profile_traces({[str(p) for p in sorted(RANKS.glob('*.json.gz'))]!r}, "
            "load_catalog(), {}, timeout_s=60)\n"
            "print('ranks', len(report.data['ranks']), why)\n")
    done = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.strip() == "ranks 2 None"



PARENT = r'''
import subprocess, sys
from gpudoctor.catalog import load_catalog
from gpudoctor.live import profileanalysis

# analyze_profile_traces starts its child as it always does (same call, same keyword arguments); only
# the program is a sleeper standing for an analysis that runs on
SLEEPER = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(60)"]
real_run = subprocess.run

def run(cmd, **kwargs):
    kwargs.pop("capture_output", None)
    kwargs.pop("input", None)
    return real_run(SLEEPER, **kwargs)

profileanalysis.subprocess.run = run
profileanalysis.analyze_profile_traces([], load_catalog(), {}, timeout_s=60)
'''


def test_the_analysis_child_dies_with_the_process_that_started_it() -> None:
    """A dashboard killed mid-analysis (SSH dropped) leaves no analysis process behind: the child is
    started like py-spy, with the kernel asked to kill it when its parent dies (prctl PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))   # printed by the child: its setup is done
        assert child.ppid() == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.1)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and child.is_running():
            child.kill()
